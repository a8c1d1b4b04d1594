"""tests/summarize.py: the closing line of make test counts what did not run as failed."""
import subprocess
import sys
from pathlib import Path

SUMMARIZE = Path(__file__).resolve().parents[2] / "summarize.py"
JUNIT = ('<testsuites><testsuite><testcase name="a"/><testcase name="b"><skipped/></testcase>'
         '</testsuite></testsuites>')


def summarize(tmp_path, shellcheck="1..1\nok 1 x\n", bats="1..2\nok 1 a\nok 2 b # skip why\n",
              junit=JUNIT):
    for name, text in (("shellcheck.tap", shellcheck), ("bats.tap", bats), ("pytest.xml", junit)):
        if text is not None:
            (tmp_path / name).write_text(text)
    out = subprocess.run([sys.executable, str(SUMMARIZE), str(tmp_path)], capture_output=True,
                         text=True)
    return out.returncode, out.stdout.strip()


def test_complete_results_are_counted(tmp_path):
    assert summarize(tmp_path) == (0, "3 passed, 0 failed, 2 skipped")


def test_a_bats_run_that_died_midway_counts_the_tests_it_never_ran_as_failed(tmp_path):
    assert summarize(tmp_path, bats="1..5\nok 1 a\nok 2 b\n") == (1, "4 passed, 3 failed, 1 skipped")


def test_a_tap_file_without_its_plan_is_a_failure(tmp_path):
    assert summarize(tmp_path, shellcheck="ok 1 x\n") == (1, "3 passed, 1 failed, 2 skipped")


def test_more_results_than_planned_is_a_failure(tmp_path):
    assert summarize(tmp_path, shellcheck="1..1\nok 1 x\nok 2 y\n")[0] == 1


def test_a_missing_or_cut_off_junit_file_is_a_failure(tmp_path):
    assert summarize(tmp_path, junit=None)[0] == 1
    assert summarize(tmp_path, junit=JUNIT[:40]) == (1, "2 passed, 1 failed, 1 skipped")
