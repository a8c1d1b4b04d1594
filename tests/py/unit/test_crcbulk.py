"""crcbulk.crcs gives every record the CRC-32C the byte loop gives it, and read_records, which
checks a block's records of one length together, still names each damaged record where it is."""
import random
import struct

import pytest
from twgrpo.formats import crcbulk, tfrecord
from twgrpo.formats.crc32c import crc32c_bytewise


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 40, 286, crcbulk.MAX_LENGTH])
def test_the_columns_give_each_record_its_crc(length):
    rng = random.Random(length)
    varying = set(rng.sample(range(length), max(1, length // 5)))  # the rest is one layout
    layout = bytes(rng.getrandbits(8) for _ in range(length))
    records = [bytes(rng.getrandbits(8) if i in varying else layout[i] for i in range(length))
               for _ in range(37)]
    assert crcbulk.crcs(b"".join(records), length) == [crc32c_bytewise(r) for r in records]


def test_records_all_alike_and_none():
    assert crcbulk.crcs(b"abc" * 20, 3) == [crc32c_bytewise(b"abc")] * 20
    assert crcbulk.crcs(b"", 3) == []


def frame(data: bytes, damaged: bool = False) -> bytes:
    header = struct.pack("<Q", len(data))
    crc = tfrecord.masked_crc(data) ^ (1 if damaged else 0)
    return header + struct.pack("<I", tfrecord.masked_crc(header)) + data + struct.pack("<I", crc)


def test_a_damaged_record_among_many_of_one_length_is_named_and_skipped(tmp_path):
    datas = [b"record %05d" % i for i in range(200)] + [b"short"]
    bad = {7, 150}
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(b"".join(frame(d, i in bad) for i, d in enumerate(datas)))
    problems = []
    read = list(tfrecord.read_records(path, problems))
    assert read == [d for i, d in enumerate(datas) if i not in bad]
    assert [(p.kind, p.record, p.offset) for p in problems] == \
        [("crc", i, sum(len(d) + 16 for d in datas[:i])) for i in sorted(bad)]


def test_many_empty_records_are_checked_and_a_damaged_one_named(tmp_path):
    """Empty records have no columns to cut: they are checked one by one, never divided by."""
    bad = {3, 40}
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(b"".join(frame(b"", i in bad) for i in range(tfrecord.BULK_MIN * 4)))
    problems = []
    assert list(tfrecord.read_records(path, problems)) == [b""] * (tfrecord.BULK_MIN * 4 - len(bad))
    assert [(p.kind, p.record) for p in problems] == [("crc", i) for i in sorted(bad)]
