"""The command line imports a phase's module when that phase runs (twgrpo/cli/dispatch.py): postflight
starts without the preflight, report and launcher modules, and every phase still has its options."""
import subprocess
import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo"
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from twgrpo import cli
heavy = ("twgrpo.checks.inputs.inputs", "twgrpo.checks.preflight.preflight", "twgrpo.report.compare",
         "twgrpo.report.summary", "twgrpo.checks.postflight.postflight", "twgrpo.cli.launcher",
         "twgrpo.report.runview")
print(sorted(name for name in heavy if name in sys.modules))
try:
    cli.main(sys.argv[2:])
except SystemExit:
    pass
print(sorted(name for name in heavy if name in sys.modules))
"""


def loaded(*argv):
    out = subprocess.run([sys.executable, "-c", PROBE, str(BUNDLE), *argv], capture_output=True,
                         text=True, check=True).stdout
    return [eval(line) for line in out.splitlines() if line.startswith("[")]


def test_the_command_line_alone_imports_no_phase():
    assert loaded("catalog")[0] == []


def test_postflight_imports_its_own_module_and_not_the_others(tmp_path):
    before, after = loaded("postflight", "--output-dir", str(tmp_path / "absent"))
    assert before == [] and "twgrpo.checks.postflight.postflight" in after  # (it re-hashes inputs)
    assert not {"twgrpo.checks.preflight.preflight", "twgrpo.report.compare", "twgrpo.report.summary",
                "twgrpo.cli.launcher"} & set(after)


def test_compare_reads_its_own_options_when_named():
    out = subprocess.run([sys.executable, str(BUNDLE / "verify-two-worker-grpo-v1.py"), "compare", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--against" in out and "--tolerance" in out
    out = subprocess.run([sys.executable, str(BUNDLE / "verify-two-worker-grpo-v1.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "compare a run with one or more reference runs" in out
