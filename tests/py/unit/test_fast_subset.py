"""make test-fast: the inner loop runs tests/py/unit/ and leaves out tests/py/functional/, where
every test that starts a Ray cluster, namespaced hosts, Slurm or a browser lives, with those
named for their cost; make test still runs them all."""
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = HERE.parent
# What a module does when it starts a cluster or a browser (conftest's ray_head, ray.init, the
# namespaced hosts' prerequisites, the Slurm cluster, Chromium).
STARTS_SOMETHING = re.compile(r"ray_head|ray\.init|missing_prerequisites\(|slurmcluster|chromium")


def collected(*args) -> set:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", *args, str(PY)],
                         capture_output=True, text=True, cwd=PY.parents[1])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}


def test_the_fast_subset_is_the_unit_folder():
    fast, every = collected("-m", "not slow"), collected()
    assert fast and all(path.startswith("tests/py/unit/") for path in fast)
    assert {p for p in every if p.startswith("tests/py/unit/")} == fast
    assert {p for p in every - fast} and all(p.startswith("tests/py/functional/") for p in every - fast)


def starting(folder: Path) -> list:
    return sorted(path.name for path in folder.glob("test_*.py")
                  if path != Path(__file__).resolve() and STARTS_SOMETHING.search(path.read_text()))


def test_no_unit_test_starts_a_cluster_or_a_browser():
    assert starting(HERE) == [], "move them to tests/py/functional/"


def test_the_rule_finds_a_module_that_starts_a_cluster(tmp_path):
    (tmp_path / "test_planted.py").write_text("def test_x(ray_head):\n    pass\n")
    (tmp_path / "test_quiet.py").write_text("def test_y():\n    pass\n")
    assert starting(tmp_path) == ["test_planted.py"]
