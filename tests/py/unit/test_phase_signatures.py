"""The command line stops at cli/: no module under checks/ or report/ imports argparse or takes
a parameter named args, so every phase is called with plain values (a RunFolder, the Profile,
keyword options) and can be called so from a test or a script. The source check is shown to
catch a planted module."""
import ast
from pathlib import Path
from typing import List

PACKAGE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo" / "twgrpo"
BELOW_THE_COMMAND_LINE = ("checks", "report")


def command_line_leaks(source: str) -> List[str]:
    """'line N: ...' for each argparse import and each parameter named args (``*args`` is a
    function's rest of positional arguments, not a parsed command line)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            found.append(f"line {node.lineno}: imports argparse")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and \
                (node.module or "").split(".")[0] == "argparse":
            found.append(f"line {node.lineno}: imports from argparse")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            given = node.args
            named = [*given.posonlyargs, *given.args, *given.kwonlyargs]
            if any(parameter.arg == "args" for parameter in named):
                found.append(f"line {node.lineno}: {getattr(node, 'name', 'lambda')} takes args")
    return found


def test_no_phase_below_the_command_line_sees_argparse():
    found = {}
    for layer in BELOW_THE_COMMAND_LINE:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            leaks = command_line_leaks(path.read_text(encoding="utf-8"))
            if leaks:
                found[str(path.relative_to(PACKAGE))] = leaks
    assert found == {}


def test_the_check_catches_a_planted_module(tmp_path):
    planted = tmp_path / "checks" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("import argparse\nfrom argparse import Namespace\n\n\n"
                       "def main(args, profile):\n    return 0\n\n\n"
                       "def run(folder, *, args=None):\n    return 0\n\n\n"
                       "def fine(*args, **kwargs):\n    return 0\n")
    assert command_line_leaks(planted.read_text()) == [
        "line 1: imports argparse", "line 2: imports from argparse",
        "line 5: main takes args", "line 9: run takes args"]


def test_the_phases_take_a_run_folder_and_the_profile():
    """The entry of each phase that judges one run takes its folder first, never a namespace."""
    from twgrpo.checks.postflight import postflight
    from twgrpo.checks.preflight import preflight
    from twgrpo.checks.resume import resume
    from twgrpo.checks.watch import stall
    from twgrpo.report import summary
    import inspect
    for phase in (postflight.run, preflight.run, resume.run, summary.run, stall.run):
        assert list(inspect.signature(phase).parameters)[0] == "folder", phase.__module__
