"""The verifier runs on Python 3.8 and newer (verify-two-worker-grpo-v1.py says so, and a cluster's
image may have 3.10): every module must import where re has no possessive quantifiers or atomic
groups (3.11's). Checked here on any Python that has them, by refusing them at compile time as
an older re would; a module that uses them must fall back (rolloutshape.py reads every file
with the JSON reader then). A 3.11-only pattern once made postflight crash on import on 3.10."""
import subprocess
import sys
from pathlib import Path

import pytest

BUNDLE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo"
AS_OLD_RE = r'''
import importlib, pkgutil, re, sys
from re import _constants as c, _parser as parser
NEW = {c.POSSESSIVE_REPEAT, c.ATOMIC_GROUP}

def uses_new(node):
    if isinstance(node, parser.SubPattern):
        return any(op in NEW or uses_new(av) for op, av in node)
    if isinstance(node, (list, tuple)):
        return any(uses_new(item) for item in node)
    return False

compile_ = re.compile
def compile_as_old(pattern, flags=0):
    if isinstance(pattern, (str, bytes)) and uses_new(parser.parse(pattern, flags)):
        raise re.error("a possessive quantifier or atomic group: Python 3.11's re")
    return compile_(pattern, flags)
re.compile = compile_as_old
sys.path.insert(0, sys.argv[1])
import twgrpo
failed = []
for module in pkgutil.walk_packages(twgrpo.__path__, "twgrpo."):
    try:
        importlib.import_module(module.name)
    except Exception as exc:
        failed.append(f"{module.name}: {exc!r}")
from twgrpo.formats import rolloutshape
print("FAILED" if failed else "OK", rolloutshape._FILE is None, *failed, sep="\n")
'''


@pytest.mark.skipif(sys.version_info < (3, 11), reason="re._parser names the 3.11 constructs")
def test_every_module_imports_where_re_lacks_possessive_quantifiers():
    out = subprocess.run([sys.executable, "-I", "-B", "-c", AS_OLD_RE, str(BUNDLE)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "OK", out
    assert out[1] == "True"  # the check bit: rolloutshape's possessive patterns were refused


def test_the_metrics_shape_and_the_rollout_shape_agree_on_this_python():
    from twgrpo.formats import rolloutshape
    from twgrpo.formats import trainshape
    assert trainshape.SHAPED.pattern  # compiled here whatever the version
    assert (rolloutshape._FILE is None) == (sys.version_info < (3, 11))
