"""Records' JSON text (formats/jsonlayout.py): exactly json.dumps(indent=2, sort_keys=True)'s for
lists and objects of at most LONG items; past that each item on a line of its own, written by
the C encoder; the same value back in every case, and the glance's `\\n  "key": ` at top level."""
import json
import random
from pathlib import Path

import pytest
from twgrpo.formats import jsonlayout
from twgrpo.run import glance
from twgrpo.run.records import write_json


def reference(value):
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def random_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-10 ** 12, 10 ** 12)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, 1e300, float("nan"), float("inf"), rng.random()])
    if kind == 3:
        return "".join(rng.choice('ab"\\\n\té€\U0001f600 ,:{}[]') for _ in range(rng.randrange(6)))
    if kind == 4:
        return Path("/runs") / str(rng.randrange(9))  # written by default=str
    sizes = [0, 1, 3, jsonlayout.LONG, jsonlayout.LONG + 1] if depth == 0 else [0, 1, 2, 3, jsonlayout.LONG + 1]
    size = rng.choice(sizes)
    if kind in (5, 6):
        return {f"k{rng.randrange(10 ** 6)}{'é' * rng.randrange(2)}": random_value(rng, depth + 2)
                for _ in range(size)}
    items = [random_value(rng, depth + 2) for _ in range(size)]
    return tuple(items) if kind == 7 else items


@pytest.mark.parametrize("seed", range(8))
def test_the_text_is_json_dumps_up_to_long_and_the_same_value_past_it(seed, monkeypatch):
    rng = random.Random(seed)
    values = [random_value(rng) for _ in range(12)]
    text = [jsonlayout.dumps(v) for v in values]
    for value, written in zip(values, text):
        assert json.dumps(json.loads(written), sort_keys=True) == json.dumps(
            json.loads(reference(value)), sort_keys=True)
    monkeypatch.setattr(jsonlayout, "LONG", 10 ** 9)  # nothing is long: indent=2's own text
    assert [jsonlayout.dumps(v) for v in values] == [reference(v) for v in values]


def test_each_item_of_a_long_list_or_object_is_one_line():
    ranks = [{"rank": r, "ib_devices": ["mlx5_0:1/IB", "mlx5_1:1/IB"], "host": f"node-{r // 8}"}
             for r in range(jsonlayout.LONG + 1)]
    shards = {f"rank_{r}.pt": 4848 for r in range(jsonlayout.LONG + 1)}
    text = jsonlayout.dumps({"actors": ranks, "shards": shards, "status": "passed", "few": [1, 2]})
    lines = text.splitlines()
    assert lines[0] == "{" and lines[1] == '  "actors": ['
    assert lines[2] == '    {"host": "node-0", "ib_devices": ["mlx5_0:1/IB", "mlx5_1:1/IB"], "rank": 0},'
    assert len(lines) == 1 + 1 + len(ranks) + 1 + 1 + 3 + 1 + len(shards) + 1 + 1 + 1
    assert '\n  "status": "passed"' in text and '\n    "rank_9.pt": 4848,' in text
    assert '\n  "few": [\n    1,\n    2\n  ],' in text  # a short list: indent=2's layout


def test_non_string_keys_keep_jsons_own_conversion():
    value = {"outer": {1: "a", 2: {"x": [1]}}}
    assert jsonlayout.dumps(value) == reference(value)


def test_the_glance_reads_the_status_of_a_record_with_long_lists(tmp_path):
    record = {"run_id": "exp", "status": "passed", "actors": [{"rank": r} for r in range(20000)]}
    write_json(tmp_path / "actor-placement.json", record)
    assert json.loads((tmp_path / "actor-placement.json").read_text()) == record
    assert (tmp_path / "actor-placement.json").stat().st_size > glance.WHOLE  # searched, not parsed
    assert glance.fields(tmp_path / "actor-placement.json", ["status", "rank"], {}, 1 << 30) == {
        "status": "passed", "rank": None}  # a rank is a nested field: never taken for a top one


def test_a_top_level_object_of_many_keys_keeps_the_glances_layout(tmp_path):
    record = {"status": "passed", "resume": {"from": 3}, "pad": "x" * 20000,
              **{f"k{i:03}": {"n": i} for i in range(jsonlayout.LONG + 44)}}
    write_json(tmp_path / "run.json", record)
    assert json.loads((tmp_path / "run.json").read_text()) == record
    assert glance.fields(tmp_path / "run.json", ["status", "resume", "resume.from"], {}, 1 << 30) == {
        "status": "passed", "resume": {}, "resume.from": 3}
    nested = jsonlayout.dumps({"outer": {f"k{i:03}": {"n": i} for i in range(jsonlayout.LONG + 1)}})
    assert '\n    "k000": {"n": 0},\n' in nested  # below the top, a long object's items are lines
