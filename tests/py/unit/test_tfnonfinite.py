"""NaN and inf in TensorBoard scalars (twgrpo/formats/tfnonfinite.py): a non-finite write stands
unless a later write of the same tag and step is finite (verl resumed in the same folder),
whichever file, layout or batch it comes in; what was taken back is told apart, and past the
steps held a tag, a write stands."""
import math

import pytest
from tbwrite import event, record
from twgrpo.formats import tfevents, tffold, tfnonfinite

NAN, INF = math.nan, math.inf


def attempts(folder, *files):
    """Event files read one after the other, each a list of (step, [(tag, value), ...])."""
    folder.mkdir()
    for number, steps in enumerate(files, 1):
        (folder / f"events.out.tfevents.{number}.host.1.0").write_bytes(
            b"".join(record(event(step, 1e9 + step, values)) for step, values in steps))
    scalars = tfevents.load_scalars(folder)
    return {t: (s, repr(v)) for t, (s, v) in scalars.nonfinite.items()}, \
        {t: (s, repr(v)) for t, (s, v) in scalars.taken_back.items()}


def run_of(steps, bad=(), value=NAN):
    return [(s, [("loss", value if s in bad else 0.5), ("lr", 1e-6)]) for s in steps]


@pytest.fixture(params=[1, 4096], ids=["record-by-record", "batched"])
def batch(request, monkeypatch):
    monkeypatch.setattr(tffold, "BATCH", request.param)


def test_a_nan_the_retry_wrote_again_finite_is_taken_back(tmp_path, batch):
    killed = run_of(range(1, 8), bad={5, 7})  # killed after step 7; the retry resumes from 4
    retry = run_of(range(5, 11))
    assert attempts(tmp_path / "run", killed, retry) == ({}, {"loss": (5, "nan")})


def test_a_nan_no_later_write_took_back_stands(tmp_path, batch):
    killed = run_of(range(1, 8), bad={5, 7})
    retry = run_of(range(6, 11))  # resumed from step 5: step 5's NaN stands, 7's is taken back
    assert attempts(tmp_path / "run", killed, retry) == ({"loss": (5, "nan")}, {"loss": (7, "nan")})


def test_a_finite_write_before_the_nan_or_a_nan_written_again_takes_nothing_back(tmp_path, batch):
    first = run_of(range(1, 4))
    again = run_of(range(2, 4), bad={3}, value=INF)  # finite first, then inf: the inf is the last
    assert attempts(tmp_path / "a", first, again) == ({"loss": (3, "inf")}, {})
    nan_twice = run_of(range(1, 4), bad={2}) + run_of([2], bad={2}, value=-INF)
    assert attempts(tmp_path / "b", nan_twice) == ({"loss": (2, "-inf")}, {})


def test_a_diverged_run_resumed_before_its_divergence_leaves_no_nan_standing(tmp_path, batch):
    killed = run_of(range(1, 301), bad=set(range(100, 301)))  # NaN from step 100 until killed
    retry = run_of(range(91, 401))  # resumed from step 90: every NaN written again, finite
    assert attempts(tmp_path / "run", killed, retry) == ({}, {"loss": (100, "nan")})


def test_a_nan_written_again_after_its_finite_rewrite_stands_and_is_not_said_taken_back(tmp_path, batch):
    three = run_of(range(1, 4)) + [(2, [("loss", NAN)]), (2, [("loss", 0.25)]), (2, [("loss", NAN)])]
    assert attempts(tmp_path / "run", three) == ({"loss": (2, "nan")}, {})


def test_tags_whose_nans_were_all_taken_back_keep_no_later_nan_from_standing(tmp_path, batch, monkeypatch):
    monkeypatch.setattr(tfevents, "MAX_TAGS", 8)
    junk = [f"junk/{i}" for i in range(8)]  # every tag slot used by a NaN that is taken back
    stream = [(1, [(t, NAN) for t in junk]), (1, [(t, 0.0) for t in junk]), (2, [("loss", NAN)])]
    standing, taken_back = attempts(tmp_path / "run", stream)
    assert standing == {"loss": (2, "nan")} and sorted(taken_back) == junk


def test_past_the_steps_held_each_tag_keeps_its_lowest_and_a_write_not_held_stands(tmp_path, batch, monkeypatch):
    monkeypatch.setattr(tfnonfinite, "HELD_WRITES", 2)
    diverged = run_of(range(1, 6), bad={2, 3, 4, 5})  # NaN from step 2 on: 2 and 3 held
    retry = run_of(range(1, 6))  # every step written again finite
    standing, taken_back = attempts(tmp_path / "run", diverged, retry)
    assert taken_back == {"loss": (2, "nan")} and standing == {"loss": (4, "nan")}  # 4: not held


def test_past_the_bounds_the_last_value_written_at_a_step_that_stands_is_the_one_said(tmp_path, batch, monkeypatch):
    monkeypatch.setattr(tfnonfinite, "HELD_WRITES", 1)
    diverged = run_of(range(1, 5), bad={2, 3, 4})  # 2 held; 3 is the lowest write not held
    again = run_of([3], bad={3}, value=-INF) + run_of([4], bad={4}, value=INF)  # 3 written again
    assert attempts(tmp_path / "steps", diverged, again) == ({"loss": (2, "nan")}, {})
    retry = run_of([2])  # 2 taken back: 3 stands, with its last value
    assert attempts(tmp_path / "last", diverged, again, retry) == ({"loss": (3, "-inf")}, {"loss": (2, "nan")})
    monkeypatch.setattr(tfevents, "MAX_TAGS", 1)
    tags = [(1, [("a", NAN), ("b", NAN)]), (1, [("b", INF)]), (2, [("b", -INF)])]  # b: no slot
    assert attempts(tmp_path / "tags", tags)[0] == {"a": (1, "nan"), "b": (1, "inf")}


def test_steps_that_go_down_past_the_budget_give_way_from_the_top(tmp_path, batch, monkeypatch):
    monkeypatch.setattr(tfnonfinite, "HELD_WRITES", 2)
    late = run_of(range(6, 9), bad={6, 7, 8})  # 6 and 7 held, 8 past them
    early = run_of([2, 3], bad={2})  # a NaN below the held ones: 7 gives way, and stands
    retry = run_of(range(2, 9))
    assert attempts(tmp_path / "run", late, early, retry) == ({"loss": (7, "nan")}, {"loss": (2, "nan")})


def test_every_write_costs_a_bounded_number_of_steps_whatever_the_order():
    """Steps going down once the budget is full (each gives way from a heap), and one step
    written NaN and finite over and over (its stale heap entries dropped): linear, bounded."""
    writes = tfnonfinite.NonFinite(16)
    for step in range(3 * tfnonfinite.HELD_WRITES, 0, -1):
        writes.note("a", step, NAN)
    assert writes.count == tfnonfinite.HELD_WRITES and repr(writes.standing()) == repr({"a": (1, NAN)})
    assert len(writes.tops["a"]) <= 2 * writes.count + 16
    again = tfnonfinite.NonFinite(16)
    for _ in range(10_000):
        again.note("b", 5, NAN)
        again.note("b", 6, INF)
        again.finite("b", 5)
    assert again.count == 2 and len(again.tops["b"]) <= 2 * 1 + 16
    assert repr((again.standing(), again.taken_back())) == repr(({"b": (6, INF)}, {"b": (5, NAN)}))
