"""make test-fast: the inner loop leaves out every test that starts a Ray cluster, namespaced
hosts, Slurm or a browser, and only those named for their cost; make test still runs them all."""
import re
import subprocess
import sys
from pathlib import Path

import conftest

HERE = Path(__file__).resolve().parent
# What a module does when it starts a cluster or a browser (conftest's ray_head, ray.init, the
# namespaced hosts' prerequisites, the Slurm cluster, Chromium).
STARTS_SOMETHING = re.compile(r"ray_head|ray\.init|missing_prerequisites\(|slurmcluster|chromium")


def fast_modules() -> set:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", "-m", "not slow", str(HERE)],
                         capture_output=True, text=True, cwd=HERE.parents[1])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {Path(line.split("::")[0]).stem for line in out.stdout.splitlines() if "::" in line}


def test_every_slow_module_named_exists():
    missing = sorted(name for name in conftest.SLOW_MODULES if not (HERE / f"{name}.py").is_file())
    assert missing == []


def test_the_fast_subset_starts_no_cluster_and_no_browser():
    fast = fast_modules()
    assert "test_fast_subset" in fast and len(fast) > 40
    assert fast.isdisjoint(conftest.SLOW_MODULES)
    starting = sorted(name for name in fast - {"test_fast_subset"}
                      if STARTS_SOMETHING.search((HERE / f"{name}.py").read_text()))
    assert starting == [], f"add them to SLOW_MODULES in conftest.py: {starting}"
