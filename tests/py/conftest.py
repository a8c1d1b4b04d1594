"""The one path bootstrap for pytest: the bundle's twgrpo, the repo root (prep/, dev/), and the
test libraries (tests/lib/) become importable; no test touches sys.path."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for path in (REPO / "tools" / "verl" / "two-worker-grpo", REPO, REPO / "tests" / "lib"):
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
