"""The launcher, the Driver command, the bundle checker and make sbatch's batch script print
finding ids before the verifier's Python can be trusted (or where there is none), so they carry
their hints as text: each id they print is in the catalog, and a hint they print after ' — '
is the catalog's, word for word."""
import importlib.util
import re
from pathlib import Path

import pytest

from prep import driver_command
from twgrpo.run.catalog import CATALOG

REPO = Path(__file__).resolve().parents[3]
BUNDLE = REPO / "tools/verl/two-worker-grpo"
# the launcher with its parts (sourced once verified), and make sbatch's batch script
SHELL_FILES = [BUNDLE / "run-two-worker-grpo-v1.sh", *sorted((BUNDLE / "launcher").glob("*.bash")),
               REPO / "prep/slurm-job.bash"]
ID = re.compile(r"\b[A-Z]{2,6}-[EW]\d{3}\b")
SAID = re.compile(r"\(([A-Z]{2,6}-[EW]\d{3})\) ([^\n]*)")
# where a printed text ends in the shell: its closing quote, or printf's \n'
END = re.compile(r"\"|\\n'")


def said(text):
    """(id, hint or None) for every '(ID) message[ — hint]' in shell text, comments left out."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for match in SAID.finditer(line):
            words = END.split(match.group(2), 1)[0]
            out.append((match.group(1), words.split(" — ", 1)[1] if " — " in words else None))
    return out


def problems(text):
    found = [f"{fid} is not in the catalog" for line in text.splitlines()
             if not line.lstrip().startswith("#") for fid in ID.findall(line) if fid not in CATALOG]
    return found + [f"({fid}) says {hint!r}, the catalog {CATALOG[fid][1]!r}"
                    for fid, hint in said(text) if hint is not None and hint != CATALOG[fid][1]]


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda p: p.name)
def test_shell_ids_are_the_catalogs_with_its_hints(path):
    text = path.read_text(encoding="utf-8")
    assert said(text), "no id found: the pattern no longer reads this file"
    assert problems(text) == []


def test_the_driver_commands_refusals_carry_the_catalogs_hints():
    text = "\n".join(driver_command.refusal(*how) for how in driver_command.REFUSALS.values())
    assert [fid for fid, _ in said(text)] == ["LAUNCH-E045", "LAUNCH-E046", "LAUNCH-E003",
                                              "LAUNCH-E047"]
    assert problems(text) == []


def test_a_hint_in_double_quotes_is_escaped_for_the_shell(monkeypatch):
    monkeypatch.setitem(CATALOG, "LAUNCH-E003", ("t", 'Set "$RUN_ID" or `x`.'))
    line = driver_command.refusal("LAUNCH-E003", "RUN_ID is not set", 2)
    assert line == ('{ echo "driver: (LAUNCH-E003) RUN_ID is not set — Set \\"\\$RUN_ID\\" or '
                    '\\`x\\`." >&2; exit 2; }')


def test_the_bundle_checkers_hints_are_the_catalogs():
    spec = importlib.util.spec_from_file_location("check_bundle", BUNDLE / "check-bundle-v1.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.HINTS and {fid: CATALOG[fid][1] for fid in module.HINTS} == module.HINTS


@pytest.mark.parametrize("planted", [
    'die 2 "(LAUNCH-E008) run folder $X already exists — set a new RUN_ID"',
    "printf '%s: (LAUNCH-E019) cannot write %s — free space\\n' \"$PROG\"",
    'die 2 "(LAUNCH-E' '999) an id the catalog lacks"',
])
def test_a_hint_that_drifted_or_an_unknown_id_is_found(planted):
    assert len(problems(planted)) == 1
