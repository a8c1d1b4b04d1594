"""make audit (postflight --audit): the same checks, nothing written, no marker moved, on a
read-only mount too; a folder without checkpoints/ is a partial verdict (exit 3), never a
reason to move SUCCESS aside."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.run.profile import load_profile

VERIFY = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo" / "verify-two-worker-grpo-v1.py"
HOSTS = [{"hostname": f"worker-{i}", "ip": f"10.231.0.{10 + i}"} for i in range(2)]


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(folder, load_profile("tutorial-2x2-a100"), "exp-001", "/mnt/verl-reproduction", HOSTS)
    assert main(["postflight", "--output-dir", str(folder)]) == 0
    return folder


def snapshot(folder):
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(folder.rglob("*"))}


def test_audit_of_a_good_run_passes_and_writes_nothing(run, capsys):
    before = snapshot(run)
    assert main(["postflight", "--audit", "--output-dir", str(run)]) == 0
    assert snapshot(run) == before
    assert "audit only: nothing written; the run's recorded verdict stays SUCCESS" in capsys.readouterr().out


def test_audit_of_a_damaged_run_fails_but_moves_no_marker(run):
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    before = snapshot(run)
    assert main(["postflight", "--audit", "--output-dir", str(run)]) == 1
    assert snapshot(run) == before and (run / "SUCCESS").exists()
    assert not list(run.glob("SUCCESS.superseded-*"))


@pytest.mark.parametrize("audit", [False, True], ids=["postflight", "audit"])
def test_a_copy_without_checkpoints_is_partial_and_keeps_success(run, capsys, audit):
    shutil.rmtree(run / "checkpoints")
    before = snapshot(run)
    assert main(["postflight", *(["--audit"] if audit else []), "--output-dir", str(run)]) == 3
    out = capsys.readouterr().out
    assert re.search(r"checkpoint \.+ skipped \(checkpoint not present here", out)
    assert "PARTIAL" in out and "stays SUCCESS" in out
    assert snapshot(run) == before and not list(run.glob("SUCCESS.superseded-*"))


def test_without_checkpoints_another_failure_is_still_recorded(run):
    shutil.rmtree(run / "checkpoints")
    (run / "inputs.json").write_text(json.dumps({"status": "failed"}))
    assert main(["postflight", "--output-dir", str(run)]) == 1
    record = json.loads((run / "verification.json").read_text())
    assert record["status"] == "failed" and not (run / "SUCCESS").exists()
    assert list(run.glob("SUCCESS.superseded-*"))  # demoted by the inputs record, not by the copy


def test_audit_works_on_a_read_only_bind_mount(run, tmp_path):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a bind mount needs root")
    mount = tmp_path / "ro" / run.name  # the run id is the folder's name
    mount.mkdir(parents=True)
    try:
        subprocess.run(["mount", "--bind", str(run), str(mount)], check=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"cannot make a read-only bind mount here: {exc}")
    try:
        with pytest.raises(OSError):
            (mount / "probe").write_text("x")  # it is read-only
        verify = [sys.executable, "-I", "-B", str(VERIFY), "postflight"]
        audit = subprocess.run(verify + ["--audit", "--output-dir", str(mount)], capture_output=True, text=True)
        assert audit.returncode == 0, audit.stdout + audit.stderr
        plain = subprocess.run(verify + ["--output-dir", str(mount)], capture_output=True, text=True)
        assert plain.returncode != 0 and "GEN-E002" in plain.stdout + plain.stderr  # what audit avoids
    finally:
        subprocess.run(["umount", str(mount)], check=False)
