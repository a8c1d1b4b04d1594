"""A subcommand runs with the garbage collector paced for large runs (twgrpo/run/gcpace.py): its
youngest generation is collected after gcpace.YOUNG new objects, not CPython's 700, and the pace
the caller had comes back after, also when the subcommand raises."""
import gc
import subprocess
import sys
from pathlib import Path

import pytest

BUNDLE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo"
# A subcommand's handler replaced by one that says the pace it runs under, then raises or not.
PROBE = """
import gc, sys
sys.path.insert(0, sys.argv[1])
from twgrpo.cli import dispatch, phases
from twgrpo.run import gcpace
def catalog(args):
    print("inside", gc.get_threshold()[0], gcpace.YOUNG)
    if sys.argv[2] == "raise":
        raise OSError(5, "disk gone")
    return 0
phases.catalog = catalog
gc.set_threshold(700, 10, 10)
print("exit", dispatch.main(["catalog"]))
print("after", gc.get_threshold())
"""


@pytest.mark.parametrize("ending", ["return", "raise"])
def test_a_subcommand_runs_paced_and_the_pace_comes_back(ending):
    out = subprocess.run([sys.executable, "-c", PROBE, str(BUNDLE), ending], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    inside = next(line.split() for line in out if line.startswith("inside"))
    assert int(inside[1]) == int(inside[2]) >= 10_000  # far above CPython's 700
    assert ("exit 0" if ending == "return" else "exit 1") in out
    assert "after (700, 10, 10)" in out


def test_a_slower_pace_already_set_is_kept():
    sys.path.insert(0, str(BUNDLE))
    from twgrpo.run import gcpace
    before = gc.get_threshold()
    try:
        gc.set_threshold(gcpace.YOUNG * 3, 5, 5)
        with gcpace.paced():
            assert gc.get_threshold() == (gcpace.YOUNG * 3, 5, 5)
        assert gc.get_threshold() == (gcpace.YOUNG * 3, 5, 5)
    finally:
        gc.set_threshold(*before)
