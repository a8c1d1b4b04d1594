"""dev/gpu-checks-real.py, the GPU machine's own run of the every-GPU health probe and a node's
own collective, runs end to end here over Gloo with the stub nvidia-smi: the ranks meet, and a
GPU the stub reports in MIG mode is named."""
import json
import os
import subprocess
import sys
from pathlib import Path

from dev import stubgpus

REPO = Path(__file__).resolve().parents[3]


def run(tmp_path, health=None):
    table = tmp_path / "gpus.csv"
    stubgpus.gpus_csv(table, 2, health=health)
    env = {**os.environ, "NVIDIA_SMI_STUB": str(table),
           "PATH": f"{REPO / 'tests' / 'stubs'}:{os.environ['PATH']}"}
    out = subprocess.run([sys.executable, str(REPO / "dev" / "gpu-checks-real.py"), "--gloo",
                          "--seconds", "30", "--out", str(tmp_path / "out.json")],
                         env=env, capture_output=True, text=True, timeout=120)
    return out, json.loads((tmp_path / "out.json").read_text())


def test_two_local_ranks_meet_and_every_gpu_is_read(tmp_path):
    out, record = run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert [record["ranks"][r]["stage"] for r in ("0", "1")] == ["done", "done"]
    assert record["gpus"] == 2 and record["findings"] == []
    assert "node collective" in out.stdout and "health probe" in out.stdout


def test_a_gpu_in_mig_mode_fails_the_run(tmp_path):
    out, record = run(tmp_path, health={1: {"mig.mode.current": "Enabled"}})
    assert out.returncode == 1
    assert [f["id"] for f in record["findings"]] == ["PRE-E204"]
