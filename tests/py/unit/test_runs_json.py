"""make runs FORMAT=json: one object per run that parses and agrees with the table, on the real
runs (a fresh run, a preempted run and its resumption, a two-host run) and on folders that are
not whole runs."""
import json

import pytest
from compareruns import FRESH, PARENT, RESUMED, TWO_HOST, storage_with_real_runs
from twgrpo.cli import main

TABLE_KEYS = {"RUN_ID": "id", "STARTED": "started", "TOOK": "took", "PROFILE": "profile",
              "VERDICT": "verdict", "LINEAGE": "lineage"}


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs") / "storage"
    runs = storage_with_real_runs(root)
    (runs / "empty-folder").mkdir()
    (runs / "bad-record").mkdir()
    (runs / "bad-record" / "run.json").write_text("{not json")
    (runs / "name with space").mkdir()
    return root


def table(capsys, root):
    assert main(["runs", "--storage-root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:-1]
    starts = [header.index(name) for name in TABLE_KEYS]
    out = []
    for row in rows:
        cells = [row[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
        out.append(dict(zip(TABLE_KEYS.values(), cells)))
    return out


def listing(capsys, root):
    assert main(["runs", "--storage-root", str(root), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_json_parses_and_agrees_with_the_table_row_for_row(volume, capsys):
    rows, objects = table(capsys, volume), listing(capsys, volume)
    assert len(objects) == len(rows) == 7
    for row, obj in zip(rows, objects):
        shown = {key: (obj[key] or "—") if key not in ("lineage",) else obj[key] for key in row}
        assert shown == row


def test_each_object_carries_what_scripts_need(volume, capsys):
    objects = {o["id"]: o for o in listing(capsys, volume)}
    fresh, resumed, two_host = objects[FRESH], objects[RESUMED], objects[TWO_HOST]
    record = json.loads((volume / "runs/verl/two-worker-grpo" / FRESH / "run.json").read_text())
    assert fresh["start"] == record["started_at"] and isinstance(fresh["duration_s"], int)
    assert fresh["profile"] == "smoke-1x1" and two_host["profile"] == "smoke-2x1"
    assert resumed["parent"] == PARENT and objects[PARENT]["children"] == RESUMED
    assert fresh["bundle_version"] == record["bundle_version"]
    assert set(fresh) == {"id", "start", "started", "duration_s", "took", "profile", "verdict",
                          "lineage", "parent", "children", "bundle_version"}
    assert objects["empty-folder"]["start"] is None and objects["empty-folder"]["duration_s"] is None
    assert objects["'name with space'"]["verdict"]  # an odd name is quoted, as in the table


def test_an_empty_volume_is_an_empty_list(tmp_path, capsys):
    (tmp_path / "runs" / "verl" / "two-worker-grpo").mkdir(parents=True)
    assert listing(capsys, tmp_path) == []
