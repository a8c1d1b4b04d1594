"""One owner for the run: the run folder's file names are written in run/runfolder.py only,
run.json is read by run/runrecord.py only, and the RUN_ID rule (run/runid.py) is the one every
entry point applies. Each rule is checked on the source, and each source check is shown to catch
a planted breach."""
import ast
import re
from pathlib import Path

import pytest

from twgrpo.run import runid
from twgrpo.run.findings import UsageError
from twgrpo.run.runfolder import FILES, RunFolder

REPO = Path(__file__).resolve().parents[3]
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
SOURCES = sorted([*BUNDLE.rglob("*.py"), *(REPO / "prep").rglob("*.py"), *(REPO / "dev").rglob("*.py")])
OWNER = BUNDLE / "twgrpo" / "run" / "runfolder.py"
READER = BUNDLE / "twgrpo" / "run" / "runrecord.py"
# Names with a dot or a dash: SUCCESS, FAILED, checkpoints, rollouts and tensorboard are also
# verdict words, evidence keys and page anchors, so a constant equal to them is not a path.
FILE_NAMES = {name for name in FILES.values() if "." in name or "-" in name}
READERS = {"read_object", "read_bytes", "read_text", "tail_lines", "read_record", "read_json",
           "fields", "intact", "open", "read_small", "loads"}


def _constants(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node


def file_name_literals(source: str):
    """(line, name) of string constants that are a run folder file's name."""
    return [(n.lineno, n.value) for n in _constants(ast.parse(source)) if n.value in FILE_NAMES]


def run_json_reads(source: str):
    """Lines that hand a run.json path to a reader."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            if name in READERS and any("run_json" in ast.dump(arg) for arg in node.args):
                found.append(node.lineno)
            elif name in READERS and receiver is not None and "run_json" in ast.dump(receiver):
                found.append(node.lineno)  # path.read_text(), path.open()
    return found


def test_the_run_folders_file_names_are_written_in_runfolder_only():
    found = {str(p.relative_to(REPO)): file_name_literals(p.read_text()) for p in SOURCES if p != OWNER}
    assert {path: hits for path, hits in found.items() if hits} == {}


def runs_layout_literals(source: str):
    """(line, text) of string constants that spell where run folders live under a storage root:
    a path's piece, not a message or a docstring that names the place (those hold spaces)."""
    return [(n.lineno, n.value) for n in _constants(ast.parse(source))
            if "runs/verl/two-worker-grpo" in n.value and not re.search(r"\s", n.value)]


def test_where_run_folders_live_is_written_in_runfolder_only():
    found = {str(p.relative_to(REPO)): runs_layout_literals(p.read_text()) for p in SOURCES if p != OWNER}
    assert {path: hits for path, hits in found.items() if hits} == {}
    assert runs_layout_literals('f"{root}/runs/verl/two-worker-grpo/{run_id}"\n') == \
        [(1, "/runs/verl/two-worker-grpo/")]


def test_run_json_is_read_by_runrecord_only():
    found = {str(p.relative_to(REPO)): run_json_reads(p.read_text()) for p in SOURCES if p != READER}
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_the_source_checks_catch_a_planted_breach():
    assert file_name_literals('path = run_dir / "verification.json"\n') == [(1, "verification.json")]
    assert file_name_literals('print("SUCCESS")\n') == []
    assert run_json_reads("data = bounded.read_object(RunFolder(d).run_json, 1 << 20)\n") == [1]
    assert run_json_reads("text = RunFolder(d).run_json.read_text()\n") == [1]
    assert run_json_reads("print(RunFolder(d).run_json)\n") == []


def test_every_file_has_a_property_and_a_distinct_name():
    folder = RunFolder("/s/runs/verl/two-worker-grpo/exp")
    assert len(set(FILES.values())) == len(FILES)
    for prop, name in FILES.items():
        assert getattr(folder, prop) == folder.path / name


def test_a_run_folder_prints_as_its_path():
    folder = RunFolder.at("/s", "exp")
    assert f"{folder}" == str(folder) == "/s/runs/verl/two-worker-grpo/exp" == str(folder.path)
    assert repr(folder) == "RunFolder('/s/runs/verl/two-worker-grpo/exp')"


GOOD = ["a", "exp-001", "Exp_1.2", "a" * runid.MOST, "9.x"]
BAD = ["", "a" * (runid.MOST + 1), "x/y", "../x", ".x", "-x", "_x", "x y", "x\n", "x\t", "é", "x;y"]


def _refusals(text):
    """Whether each entry point that takes a RUN_ID refuses text."""
    from prep import jobspec
    from twgrpo.checks.rules import request
    from twgrpo.run import command
    out = {"runid": not runid.is_run_id(text)}
    out["launch"] = any("RUN_ID" in str(p) for p in request.variable_problems(
        {"STORAGE_ROOT": "/mnt", "RUN_ID": text}))
    try:
        RunFolder.at("/mnt", text)
        out["folder"] = False
    except UsageError:
        out["folder"] = True
    try:  # the folders the training command names: the same checked folder
        command.checkpoint_dir(Path("/mnt"), text, 1)
        out["command"] = False
    except UsageError:
        out["command"] = True
    try:
        jobspec.check_run_id(text)
        out["submit"] = False
    except jobspec.SpecError:
        out["submit"] = True
    out["resume"] = any("RESUME_FROM" in str(p) for p in request.variable_problems(
        {"STORAGE_ROOT": "/mnt", "RUN_ID": "other", "RESUME_FROM": text})) if text else True
    return out


@pytest.mark.parametrize("text", GOOD + BAD)
def test_every_entry_point_applies_the_one_run_id_rule(text):
    refused = _refusals(text)
    assert set(refused.values()) == {text in BAD}, refused


def test_a_run_id_reaches_its_folder_one_way_only():
    """RunFolder.at, which applies the rule, is the only join of a RUN_ID onto the runs folder:
    the unchecked run_dir(root, run_id) is gone."""
    from twgrpo.run import runfolder
    assert not hasattr(runfolder, "run_dir")
    assert RunFolder.at("/mnt", "exp-1").path == runfolder.runs_dir("/mnt") / "exp-1"


def test_no_other_module_compiles_a_run_id_pattern():
    """A RUN_ID-shaped regex (a leading letter or digit, then [A-Za-z0-9._-]) compiled outside
    runid.py and the profile's own name rules is a second RUN_ID rule."""
    shape = re.compile(r"\[A-Za-z0-9\]\[A-Za-z0-9\._-\]")
    allowed = {BUNDLE / "twgrpo" / "run" / "runid.py", BUNDLE / "twgrpo" / "run" / "profile_keys.py",
               REPO / "dev" / "smokeenv" / "lockfile.py"}  # profile names; pip pins
    found = []
    for path in SOURCES:
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("compile", "match", "fullmatch") \
                    and node.args and isinstance(node.args[0], ast.Constant) \
                    and shape.search(str(node.args[0].value)):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_the_one_reader_refuses_a_fifo_a_link_and_a_forged_parent(tmp_path):
    """run.json as a FIFO is refused, never waited on; a symlinked run.json is not a run record;
    a tail whose parent is no RUN_ID names no parent."""
    import json
    import os
    from twgrpo.formats import bounded
    from twgrpo.run import runrecord
    fifo = tmp_path / "fifo-run"
    fifo.mkdir()
    os.mkfifo(RunFolder(fifo).run_json)
    with pytest.raises(bounded.Unreadable):
        runrecord.read(fifo)
    assert runrecord.read_or_empty(fifo) == {}
    linked = tmp_path / "linked-run"
    linked.mkdir()
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"profile": {"name": "x", "values": {}}}))
    RunFolder(linked).run_json.symlink_to(real)
    with pytest.raises(ValueError, match="not a plain file"):
        runrecord.read_run(linked)
    forged = tmp_path / "forged-run"
    forged.mkdir()
    for parent, named in (("../../etc", None), ("exp-1", ("exp-1", 3))):
        RunFolder(forged).run_json.write_text(json.dumps(
            {"resume": {"from_run_id": parent, "step": 3}}, indent=2, sort_keys=True) + "\n")
        assert runrecord.parent_glance(forged) == named
