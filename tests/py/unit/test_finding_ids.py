"""Every finding id an operator sees comes with the catalog's hint: code names an id only as a
value of its own (finding("PRE-E001", ...), usage("LAUNCH-E008", ...)), never inside message
text, where a hand-written hint could drift from docs/findings.md."""
import ast
import re
from pathlib import Path

import pytest

from twgrpo.run.catalog import CATALOG

REPO = Path(__file__).resolve().parents[3]
ID = re.compile(r"\b[A-Z]{2,6}-[EW]\d{3}\b")
# The catalog is where ids and hints are written; its hints may point at other ids.
CATALOG_FILE = REPO / "tools/verl/two-worker-grpo/twgrpo/run/catalog.py"


def sources():
    return [p for root in ("tools", "prep", "dev") for p in sorted((REPO / root).rglob("*.py"))
            if p != CATALOG_FILE]


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


def problems(source, name="<test>"):
    out = []
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
])
def test_a_planted_id_is_found(planted):
    assert len(problems(planted)) == 1


def test_ids_as_values_and_docstrings_pass():
    source = ('"""Refused (LAUNCH-E094), never adopted."""\n'
              'def f():\n    """Says LAUNCH-E008 here."""\n'
              '    return usage("LAUNCH-E008", None, f"run folder {x} exists")\n')
    assert problems(source) == []
