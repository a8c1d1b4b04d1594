"""A long run's scalars: each tag thinned by stride over the whole run, its last step always
held, memory within MAX_VALUES; the standard-library CRC-32C's wide loop equals the byte loop."""
import os
import random

import pytest
import tbevents
from tbwrite import write_events  # 10,000 steps: the fast writer of synthesized runs
from twgrpo.formats import crc32c, tfevents

STEPS, TAGS = 10_000, [f"tag/{i}" for i in range(4)]


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tb")
    write_events(folder / "events.out.tfevents.1.host.1.0",
                 [(s, {t: float(s) + i / 4 for i, t in enumerate(TAGS)}) for s in range(1, STEPS + 1)])
    return folder


def test_a_10000_step_run_is_charted_to_its_last_step_within_the_memory_bound(long_run, monkeypatch):
    monkeypatch.setattr(tfevents, "MAX_VALUES", 2000)  # 500 a tag, 20x fewer than the steps
    scalars = tfevents.load_scalars(long_run, keep_step=7777)
    assert scalars.held <= 2000 + 2 * len(TAGS) and scalars.dropped == 0
    for i, tag in enumerate(TAGS):
        steps = sorted(scalars.values[tag])
        assert steps[0] <= 32 and steps[-1] == STEPS  # the whole run, not its first part
        assert scalars.at(tag, STEPS) == STEPS + i / 4  # the summary's latest is the last step
        assert scalars.at(tag, 7777) == 7777 + i / 4  # postflight's step is held exactly
        gaps = {b - a for a, b in zip(steps, steps[1:]) if b not in (7777, STEPS) and a != 7777}
        assert len(gaps) == 1  # evenly spaced: one stride


def test_a_rewritten_last_step_keeps_its_last_write(tmp_path, monkeypatch):
    monkeypatch.setattr(tfevents, "MAX_VALUES", 40)
    tbevents.write_events(tmp_path / "events.out.tfevents.1.h.1.0", [(s, {"a": 1.0}) for s in range(1, 300)])
    tbevents.write_events(tmp_path / "events.out.tfevents.2.h.1.0", [(299, {"a": 5.0})])
    scalars = tfevents.load_scalars(tmp_path)
    assert max(scalars.values["a"]) == 299 and scalars.at("a", 299) == 5.0


def test_tags_past_max_tags_are_counted_as_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(tfevents, "MAX_TAGS", 2)
    tbevents.write_events(tmp_path / "events.out.tfevents.1.h.1.0", [(1, {"a": 1.0, "b": 2.0, "c": 3.0})])
    scalars = tfevents.load_scalars(tmp_path)
    assert sorted(scalars.values) == ["a", "b"] and scalars.dropped == 1


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 511, 512, 513, 1000, 4099, 1 << 16])
def test_the_wide_crc32c_equals_the_byte_loop(size):
    data = random.Random(size).getrandbits(8 * size + 8).to_bytes(size + 1, "little")[:size]  # randbytes: 3.9+
    assert crc32c.crc32c(data) == crc32c.crc32c_bytewise(data)
    assert crc32c.crc32c(data, 0x12345678) == crc32c.crc32c_bytewise(data, 0x12345678)


def test_the_wide_crc32c_has_the_published_check_value():
    assert crc32c.crc32c(b"123456789" * 100) == crc32c.crc32c_bytewise(b"123456789" * 100)
    assert crc32c.crc32c_bytewise(b"123456789") == 0xE3069283
    data = os.urandom(4096)
    assert crc32c.crc32c(data[:1000] + data[1000:]) == crc32c.crc32c(data[1000:], crc32c.crc32c(data[:1000]))
