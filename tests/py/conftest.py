"""The one path bootstrap for pytest: the bundle's twgrpo, the repo root (prep/, dev/), and the
test libraries (tests/lib/) become importable; no test touches sys.path."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# unit/ and functional/ are on the path too: a functional test borrows a unit test's helpers
for path in (REPO / "tools" / "verl" / "two-worker-grpo", REPO, REPO / "tests" / "lib",
             HERE / "unit", HERE / "functional"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


# A storage root built by tests/lib/fixture.py once per module; each test gets its own copy.
@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    root = tmp_path_factory.mktemp("golden") / "storage"
    subprocess.run([sys.executable, str(REPO / "tests/lib/fixture.py"), str(root)], check=True,
                   capture_output=True)
    return root


@pytest.fixture
def storage(golden, tmp_path):
    root = tmp_path / "storage"
    shutil.copytree(golden, root, symlinks=True)
    return root


# A local Ray head for a module (one node, no GPUs); tests give its address to ray.init.
@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    ray = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray is None:
        pytest.skip("ray is not installed in the test venv")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    temp = tmp_path_factory.mktemp("rayhead")
    short = f"/tmp/twgrpo-head-{os.getpid()}-{len(str(temp))}"  # Ray's socket paths must fit 107 bytes
    head = subprocess.Popen([ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                             f"--port={port}", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={short}", "--num-cpus=2", "--num-gpus=0"],
                            stdout=open(temp / "head.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True,  # the venv's tools (py-spy) on the node's PATH
                            env={**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}"})
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(90):
            ok = subprocess.run([sys.executable, "-c", "import ray, sys; ray.init(address=sys.argv[1], "
                                 "log_to_driver=False); ray.shutdown()", address],
                                capture_output=True).returncode == 0
            if ok:
                break
            if head.poll() is not None:
                pytest.skip(f"ray start exited: {(temp / 'head.log').read_text()[-500:]}")
            time.sleep(1)
        else:
            pytest.skip("the Ray head did not come up in 90 s")
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(short, ignore_errors=True)


# The inner loop (make test-fast) runs unit/ alone; functional/ holds what starts a Ray cluster,
# namespaced hosts, Slurm, a browser or a venv build, or runs the verifier many times on large
# records. tests/py/unit/test_fast_subset.py fails when a unit test starts one of them.
FUNCTIONAL = HERE / "functional"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a functional test, left out of make test-fast")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if FUNCTIONAL in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)
