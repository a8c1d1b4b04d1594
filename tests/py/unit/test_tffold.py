"""Rows of one record layout folded a tag at a time (twgrpo/formats/tffold.py) give every view
exactly what folding record by record gives: random streams of event records (tags that come
late, steps written again, runs resumed from an earlier step, NaN and inf, layouts that change,
a damaged record) under small bounds that force thinning, full envelope and tag tables and
batch cuts, read both ways and compared field by field, dict order included."""
import math
import random

import pytest
from tbwrite import event, record
from twgrpo.formats import tfevents, tffold, tfnonfinite

FIELDS = ("values", "tags", "last", "held", "dropped", "thinned", "stride", "nonfinite", "taken_back", "envelope",
          "width")


def canonical(value):
    """Dicts as their items in order, sets sorted, floats by their bits (NaN equals NaN)."""
    if isinstance(value, dict):
        return [(canonical(k), canonical(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else value
    return value


def views_read(folder, views, envelopes):
    """Each view's fields; a tag's bucket width and stride are looked up, never walked (the
    first doubling of each may come in another tag order), so those two compare as sets."""
    return [{**{name: canonical(getattr(s, name)) for name in FIELDS},
             **{name: sorted(getattr(s, name).items()) for name in ("width", "stride")},
             "problems": [vars(p) for p in s.problems]}
            for s in tfevents.load_views(folder, views, envelopes=envelopes)]


def random_stream(rng: random.Random, records: int, rising: bool = False):
    pool = [f"tag/{i}" for i in range(rng.randint(2, 9))]
    layout = rng.sample(pool, rng.randint(1, len(pool)))
    step, stream = 0, []
    for _ in range(records):
        roll = rng.random() if not rising else 1.0  # rising: one layout, each step new
        if roll < 0.03:
            layout = rng.sample(pool, rng.randint(1, len(pool)))  # another layout, tags new or not
        elif roll < 0.05 and step > 3:
            step = rng.randint(0, step)  # resumed from an earlier checkpoint: steps written again
        elif roll < 0.07:
            layout = layout + [layout[0]]  # one tag twice in a record
        step += rng.choice((1, 1, 1, 0, 2) if not rising else (1, 1, 1, 2, 3))
        values = [rng.choice((math.nan, math.inf, -math.inf, 1e38)) if rng.random() < 0.04 else
                  rng.choice((0.0, 1.0, -1.0)) if rng.random() < 0.3 else rng.uniform(-5, 5)  # ties
                  for _ in layout]
        stream.append(event(step, 1e9 + step, list(zip(layout, values))))
    return stream


@pytest.mark.parametrize("seed", range(40))
def test_folding_a_tag_at_a_time_equals_folding_record_by_record(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    for name, value in (("MAX_VALUES", rng.choice((60, 300, 5000))), ("MIN_PER_TAG", 4),
                        ("MAX_TAGS", rng.choice((3, 6, 64))), ("ENVELOPE_TAGS", rng.choice((2, 5, 64))),
                        ("BUCKETS", rng.choice((4, 16, 240)))):
        monkeypatch.setattr(tfevents, name, value)
    monkeypatch.setattr(tffold, "BATCH", rng.choice((1, 7, 4096)))
    monkeypatch.setattr(tfnonfinite, "HELD_WRITES", rng.choice((1, 3, 40, 1 << 17)))
    stream = random_stream(rng, rng.randint(200, 3000), rising=seed % 4 == 1)
    if seed % 3 == 0:  # a damaged record in the middle: skipped, named, the rest read
        middle = bytearray(record(stream[len(stream) // 2]))
        middle[-5] ^= 0xFF
        stream_bytes = [record(e) for e in stream[:len(stream) // 2]] + [bytes(middle)] + \
            [record(e) for e in stream[len(stream) // 2 + 1:]]
    else:
        stream_bytes = [record(e) for e in stream]
    cut = rng.randint(0, len(stream_bytes))  # two files: the second read after the first
    (tmp_path / "events.out.tfevents.1.host.1.0").write_bytes(b"".join(stream_bytes[:cut]))
    (tmp_path / "events.out.tfevents.2.host.1.0").write_bytes(b"".join(stream_bytes[cut:]))
    views = [(None, None), (("tag/0", "tag/1"), rng.randint(0, 50)), (("tag/2",), None)]
    for envelopes in (False, True):
        batched = views_read(tmp_path, views, envelopes)
        with monkeypatch.context() as plain:
            plain.setattr(tfevents, "known_row", lambda layouts, data: None)  # every record alone
            assert views_read(tmp_path, views, envelopes) == batched


def test_a_long_runs_rows_are_folded_a_tag_at_a_time(tmp_path, monkeypatch):
    """The batch path is taken: a steady run's rows reach fold_rows, not the record fold."""
    (tmp_path / "events.out.tfevents.1.host.1.0").write_bytes(
        b"".join(record(event(s, 1.0, [("a", s * 0.5), ("b", -s)])) for s in range(1, 2001)))
    folded = []
    fold_rows = tffold.fold_rows
    monkeypatch.setattr(tffold, "fold_rows", lambda tags, steps, *rest: (folded.append(len(steps)),
                                                                          fold_rows(tags, steps, *rest))[1])
    scalars = tfevents.load_scalars(tmp_path)
    assert sum(folded) >= 1990 and scalars.at("a", 2000) == 1000.0 and scalars.last_step("b") == 2000


def test_a_rising_run_takes_the_slices_of_new_steps_and_gives_what_one_by_one_gives(tmp_path, monkeypatch):
    """A long run's steps only rise: without envelopes its batches take _fold_new (slices up to
    each thinning), with them _fold_column; both give the record-by-record views."""
    monkeypatch.setattr(tfevents, "MAX_VALUES", 300)
    monkeypatch.setattr(tfevents, "MIN_PER_TAG", 4)
    monkeypatch.setattr(tffold, "BATCH", 512)
    stream = random_stream(random.Random(7), 5000, rising=True)
    (tmp_path / "events.out.tfevents.1.host.1.0").write_bytes(b"".join(record(e) for e in stream))
    calls = []
    fold_new = tffold._fold_new
    monkeypatch.setattr(tffold, "_fold_new", lambda *a: (calls.append(a[0]), fold_new(*a))[1])
    views = [(None, None), (("tag/0", "tag/1"), 4321)]
    batched = views_read(tmp_path, views, False)
    assert len(calls) > 20 and batched[0]["thinned"] > 4000
    with monkeypatch.context() as plain:
        plain.setattr(tfevents, "known_row", lambda layouts, data: None)  # every record alone
        assert views_read(tmp_path, views, False) == batched
