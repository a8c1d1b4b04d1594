"""make smoke-2x1 on machines that cannot run it: exit 2 at once with the reason, nothing started;
and how it gives GPUs to the hosts. The run itself needs a GPU machine (its artifacts are the
fixture tests/fixtures/real-smoke-run-2x1/, tested in test_postflight_real_2x1.py)."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "dev" / "multihost-smoke.py"
spec = importlib.util.spec_from_file_location("multihost_smoke", SCRIPT)
smoke = importlib.util.module_from_spec(spec)
spec.loader.exec_module(smoke)


SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
SYSTEM_PYTHON = shutil.which("python3", path=SYSTEM_PATH)  # one any user may run


def as_nobody(command):
    """The command as an unprivileged user (the test may run as root)."""
    if SYSTEM_PYTHON is None:
        pytest.skip(f"no python3 on {SYSTEM_PATH}")
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and setpriv (util-linux) is missing to drop it")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]


def test_without_root_it_stops_at_once_with_exit_2(tmp_path):
    out = subprocess.run(as_nobody([SYSTEM_PYTHON, str(SCRIPT), str(tmp_path / "smoke")]),
                         env={**os.environ, "PATH": SYSTEM_PATH},
                         capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 2, out.stderr
    assert "needs root" in out.stderr and "run it as root on a GPU machine" in out.stderr
    assert not (tmp_path / "smoke").exists()


def test_make_smoke_2x1_reaches_the_script(tmp_path):
    out = subprocess.run(as_nobody(["make", "-s", "-C", str(REPO), "smoke-2x1",
                                    f"SMOKE_ROOT={tmp_path / 'smoke'}", f"PYTHON={SYSTEM_PYTHON}"]),
                         env={**os.environ, "PATH": SYSTEM_PATH},
                         capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode != 0
    assert "multihost-smoke: two hosts on one machine needs root" in out.stderr
    assert not (tmp_path / "smoke").exists()


def path_without_gpus():
    path = ":".join(p for p in os.environ["PATH"].split(":") if not shutil.which("nvidia-smi", path=p))
    return f"{Path(sys.executable).parent}:{path}"


@pytest.mark.skipif(smoke.netcluster.missing_prerequisites() is not None,
                    reason="needs a machine that can host the namespaced cluster (root, pyroute2, ray)")
def test_root_without_a_gpu_stops_at_once_with_exit_2(tmp_path):
    env = {**os.environ, "PATH": path_without_gpus()}
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "smoke")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "(ENV-E001) nvidia-smi is not on PATH" in out.stderr  # the environment step, first
    assert not (tmp_path / "smoke").exists()


@pytest.mark.skipif(smoke.netcluster.missing_prerequisites() is not None,
                    reason="needs a machine that can host the namespaced cluster (root, pyroute2, ray)")
def test_a_gpu_with_a_cpu_torch_stops_at_once_with_exit_2(tmp_path):
    table = tmp_path / "gpus.csv"
    from dev.stubgpus import gpus_csv
    gpus_csv(table, 1)
    env = {**os.environ, "PATH": f"{REPO / 'tests' / 'stubs'}:{path_without_gpus()}",
           "NVIDIA_SMI_STUB": str(table), "SMOKE_ENV": str(tmp_path / "env")}
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "smoke")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    # the test venv's torch is the CPU build: the environment step refuses it before any install
    assert "(ENV-E003)" in out.stderr and "is a CPU build" in out.stderr
    assert not (tmp_path / "smoke").exists() and not (tmp_path / "env").exists()


def test_a_relative_smoke_folder_is_made_absolute_before_any_tool_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert smoke.parse_args(["rel/smoke"]).smoke_dir == tmp_path / "rel" / "smoke"


def test_an_unknown_profile_is_exit_2(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "smoke"), "--profile", "no-such"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "no-such" in out.stderr


@pytest.mark.parametrize("gpus, nodes, per, expected", [
    (1, 2, 1, ["0", "0"]),          # the one-GPU machine: both hosts on GPU 0
    (2, 2, 1, ["0", "1"]),          # a GPU each
    (4, 2, 2, ["0,1", "2,3"]),
    (8, 2, 2, ["0,1", "2,3"]),      # more than needed: the first ones
    (2, 2, 2, None),                # hosts of 2 GPUs cannot share
    (0, 2, 1, None),
])
def test_gpus_are_given_to_hosts(gpus, nodes, per, expected):
    assert smoke.gpu_assignment(gpus, nodes, per) == expected


def test_the_profile_is_two_hosts_of_one_gpu_with_dividing_batches():
    from twgrpo.checks.rules import sizes
    from twgrpo.run.profile import load_profile
    profile, base = load_profile("smoke-2x1"), load_profile("smoke-1x1")
    assert (profile.NODES, profile.GPUS_PER_NODE, profile.world_size) == (2, 1, 2)
    assert sizes.check_batch_sizes(profile) == []
    differing = {k for k in base.values if base.values[k] != profile.values[k]}
    assert differing == {"PROFILE_NAME", "NODES"}  # the same generated inputs and pins


@pytest.mark.parametrize("root", ["/dev/shm/smoke-x", "/tmp/ray/smoke-x"])
def test_a_smoke_root_the_hosts_cannot_see_is_refused_with_one_line(root, capsys):
    assert smoke.main([root]) == 2
    err = capsys.readouterr().err
    assert f"SMOKE_ROOT {root} is under /{root.split('/')[1]}/{root.split('/')[2]}" in err
    assert "set SMOKE_ROOT to a folder on a disk" in err
    assert not os.path.exists(root)


def test_the_hosts_runtime_env_names_each_folder_once_and_keeps_nvls_off(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    env = smoke.runtime_env("smoke-2x1", tmp_path)
    path = env["PYTHONPATH"].split(":")
    assert len(path) == len(set(path)) and path[-1] == "/opt/site"
    assert path[1] == str(tmp_path / "tools/verl/two-worker-grpo/rollout")
    assert (env["NCCL_NVLS_ENABLE"], env["NCCL_SOCKET_IFNAME"]) == ("0", "eth0")
