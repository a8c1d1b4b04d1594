"""Every finding id an operator sees comes with the catalog's hint: code names an id only as a
value of its own (finding("PRE-E001", ...), usage("LAUNCH-E008", ...)), never inside message
text, where a hand-written hint could drift from docs/findings.md; and the errors that carry an
id of their own (JobsError, RecordError), like finding() and usage(), say what went wrong, never a hand-written "— fix" tail
beside the catalog's HINT."""
import ast
import re
from pathlib import Path

import pytest

from twgrpo.run.catalog import CATALOG

REPO = Path(__file__).resolve().parents[3]
ID = re.compile(r"\b[A-Z]{2,6}-[EW]\d{3}\b")
# The catalog (catalog.py and its parts, catalog_<phase>.py) is where ids and hints are written;
# its hints may point at other ids.
CATALOG_FILES = set((REPO / "tools/verl/two-worker-grpo/twgrpo/run").glob("catalog*.py"))


def sources():
    return [p for root in ("tools", "prep", "dev") for p in sorted((REPO / root).rglob("*.py"))
            if p not in CATALOG_FILES]


def docstrings(tree):
    """Docstrings are exempt: they explain the code to its readers and are never printed to an
    operator, so naming an id there ("refused (LAUNCH-E094)") cannot give a second hint."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def id_texts(source, name="<test>"):
    """(line, text) of every string constant or f-string part that holds an id pattern."""
    tree = ast.parse(source, name)
    skip = docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip and ID.search(node.value)]


# Findings and errors built from an id and a message, whose hint is the catalog's.
ID_ERRORS = ("JobsError", "RecordError", "finding", "usage")


def fix_tails(tree):
    """(line, text) of every string in a call of an ID_ERRORS class that holds ' — ': the house
    form of 'what went wrong — what to do', whose second half is the catalog's hint here."""
    found = []
    for call in ast.walk(tree):
        func = getattr(call, "func", None)
        name = getattr(func, "id", None) or getattr(func, "attr", None)
        if isinstance(call, ast.Call) and name in ID_ERRORS:
            found += [(node.lineno, node.value) for node in ast.walk(call)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and " — " in node.value]
    return found


def problems(source, name="<test>"):
    out = [f"{name}:{line}: a hand-written fix {text.strip()[:60]!r} in a finding, usage, "
           "JobsError or RecordError: say what went wrong; the fix is the catalog's hint for its id"
           for line, text in fix_tails(ast.parse(source, name))]
    for line, text in id_texts(source, name):
        if not ID.fullmatch(text):
            out.append(f"{name}:{line}: an id inside text {text[:80]!r}: build it with "
                       "finding() or usage(), whose hint is the catalog's")
        elif text not in CATALOG:
            out.append(f"{name}:{line}: {text} is not in twgrpo/run/catalog.py")
    return out


def test_no_code_writes_an_id_into_message_text():
    found = [problem for path in sources()
             for problem in problems(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert found == []


@pytest.mark.parametrize("planted", [
    'raise UsageError(f"(LAUNCH-E008) run folder {x} exists — set a new RUN_ID")',
    'print("prune: (GEN-E130) KEEP is not a number")',
    'problems.append(f"{root}: (POST-E040) a symlink")',
    'finding("PRE-E' + '999", obj, "an id the catalog does not have")',  # split: no test names it
    'raise JobsError("SUB-E001", f"RAY_ADDRESS is not set — {want}")',
    'raise jobs_api.JobsError("SUB-E003", f"no answer from {base} "\n "— check RAY_ADDRESS")',
    'return RecordError("GEN-E002", f"cannot write {path}: {cause} — free space", cause)',
    'return [finding("SUB-E013", str(folder), f"{folder} exists — set a new RUN_ID")]',
    'raise usage("GEN-E050", obj, f"{word} is the bundle\'s — drop it")',
])
def test_a_planted_id_is_found(planted):
    assert len(problems(planted)) == 1


def test_ids_as_values_and_docstrings_pass():
    source = ('"""Refused (LAUNCH-E094), never adopted."""\n'
              'def f():\n    """Says LAUNCH-E008 here."""\n'
              '    return usage("LAUNCH-E008", None, f"run folder {x} exists")\n'
              'raise JobsError("SUB-E001", "RAY_ADDRESS is not set")\n'
              'raise RecordError("GEN-E002", f"cannot write {path}: {cause}", cause)\n')
    assert problems(source) == []
