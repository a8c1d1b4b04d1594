"""The standard-library TensorBoard reader: CRC-32C, framing, damaged and cut-off records, a
resumed run's files, views. Real event files come from tensorboard's own writer (tbevents.py);
damaged records from tbwrite.py. test_oracle_tensorboard.py holds the reader against
TensorBoard's own reader."""
import math
import struct

import pytest

import tbevents
from tbwrite import event, record, write_events
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from twgrpo.formats import tfevents, tfproto, tfrecord


def test_crc32c_matches_the_standard_check_value():
    assert tfevents.crc32c(b"123456789") == 0xE3069283  # CRC-32C's published check value


def test_our_test_writer_is_read_by_tensorboard_too(tmp_path):
    write_events(tmp_path / "events.out.tfevents.1.host.1.0", [(1, {"a": 1.5}), (2, {"a": 2.5})])
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("a")] == [(1, 1.5), (2, 2.5)]


def test_a_resumed_run_adds_a_file_and_its_later_write_of_a_step_wins(tmp_path):
    tbevents.write_events(tmp_path / "events.out.tfevents.1700000000.h.1.0", [(1, {"a": 1.0}), (2, {"a": 2.0})])
    tbevents.write_events(tmp_path / "events.out.tfevents.1700000500.h.2.0", [(2, {"a": 20.0}), (3, {"a": 3.0})])
    ours = tfevents.load_scalars(tmp_path)
    assert ours.values["a"] == {1: 1.0, 2: 20.0, 3: 3.0}
    assert len(ours.files) == 2


def test_a_truncated_last_record_ends_the_file_with_a_warning(tmp_path):
    path = tmp_path / "events.out.tfevents.1.h.1.0"
    write_events(path, [(1, {"a": 1.0})])
    with open(path, "ab") as stream:
        stream.write(record(event(2, 2.0, [("a", 2.0)]))[:-3])
    ours = tfevents.load_scalars(tmp_path)
    assert ours.values["a"] == {1: 1.0}
    assert [p.kind for p in ours.problems] == ["truncated"]


def test_a_damaged_record_is_skipped_and_reported(tmp_path):
    path = tmp_path / "events.out.tfevents.1.h.1.0"
    write_events(path, [(1, {"a": 1.0}), (2, {"a": 2.0}), (3, {"a": 3.0})])
    data = bytearray(path.read_bytes())
    second = len(record(event(0, 1.0e9, file_version="brain.Event:2"))) + len(record(event(1, 1e9 + 1, [("a", 1.0)])))
    data[second + 14] ^= 0x01  # inside the data of the step-2 record
    path.write_bytes(bytes(data))
    ours = tfevents.load_scalars(tmp_path)
    assert ours.values["a"] == {1: 1.0, 3: 3.0}
    assert [p.kind for p in ours.problems] == ["crc"]


def test_a_damaged_length_stops_the_file(tmp_path):
    path = tmp_path / "events.out.tfevents.1.h.1.0"
    write_events(path, [(1, {"a": 1.0})])
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    ours = tfevents.load_scalars(tmp_path)
    assert ours.values == {}
    assert ours.problems[0].kind == "crc" and "length" in ours.problems[0].message


def test_non_finite_values_survive_the_round_trip(tmp_path):
    tbevents.write_events(tmp_path / "events.out.tfevents.1.h.1.0", [(1, {"a": math.nan, "b": math.inf})])
    ours = tfevents.load_scalars(tmp_path)
    assert math.isnan(ours.values["a"][1]) and ours.values["b"][1] == math.inf
    assert not tfevents.is_finite(ours.values["a"][1])


def test_several_views_in_one_pass_equal_each_view_read_alone(tmp_path):
    steps = [(s, {"a": float(s), "b": 0.5 * s, "c": math.nan if s == 7 else 1.0})
             for s in range(1, 3000)]
    tbevents.write_events(tmp_path / "events.out.tfevents.1.host", steps)
    views = [(("a",), 2999), (("b", "c"), None), (None, None), (None, 1234)]
    together = tfevents.load_views(tmp_path, views)
    for (keep, keep_step), scalars in zip(views, together):
        alone = tfevents.load_scalars(tmp_path, keep, keep_step)
        assert repr(scalars.values) == repr(alone.values) and repr(scalars.nonfinite) == repr(alone.nonfinite)
        assert (scalars.held, scalars.thinned, scalars.last) == (alone.held, alone.thinned, alone.last)


def test_crc32c_wide_and_bytewise_agree_at_every_length_near_the_switch():
    data = bytes(range(256)) * 3
    for length in range(0, 2 * tfevents.crc32c.__globals__["WIDE_MIN"] + 9):
        assert tfevents.crc32c(data[:length]) == \
            tfevents.crc32c.__globals__["crc32c_bytewise"](data[:length])


def _general(data):
    """scalars_of_event without its fast path (the protobuf field walk alone)."""
    original = tfproto._simple_event
    tfproto._simple_event = lambda data: None
    try:
        return tfevents.scalars_of_event(data)
    except (ValueError, IndexError, Exception) as exc:  # the general reader's own refusal
        return type(exc)
    finally:
        tfproto._simple_event = original


def test_the_fast_event_reader_agrees_with_the_general_one_or_stands_aside():
    import random
    rng = random.Random(7)

    def real(step, wall_time, scalars=()):  # the Event protobuf's own serialization
        return tbevents.event(step, wall_time, scalars).SerializeToString()
    samples = [real(s, 1e9 + s, [(f"tag/{s % 7}", s * 0.5)]) for s in (0, 1, 127, 128, 2 ** 40)]
    samples += [real(3, 1e9, [("a", 1.0), ("b" * 100, 2.0)]), real(5, 1e9),
                real(8, 1e9, [(f"tag/{i}", i * 0.25) for i in range(10)]),
                real(8, 1e9, [(f"t{i:03d}", 1.0) for i in range(700)]),
                real(-1, 1e9, [("neg", 1.0)]), real(9, 1e9, [("x" * 130, 1.0)]),
                event_pb2.Event(step=1, wall_time=2.0, file_version="brain.Event:2").SerializeToString()]
    for data in list(samples):
        for _ in range(300):  # damage: a byte changed, cut short, grown
            cut = bytearray(data)
            at = rng.randrange(len(cut))
            cut[at] = rng.randrange(256)
            samples.append(bytes(cut[:rng.randrange(len(cut) + 1)] if rng.random() < 0.3 else cut))
    fast_taken = 0
    for data in samples:
        fast = tfproto._simple_event(data)
        if fast is not None:
            fast_taken += 1
            assert repr(fast) == repr(_general(data)), data
    assert fast_taken > 100
    ten = real(8, 1e9, [(f"tag/{i}", i * 0.25) for i in range(10)])  # a two-byte summary length
    assert tfproto._simple_event(ten) == (8, 1e9, [(f"tag/{i}", i * 0.25) for i in range(10)])


def test_records_cut_from_blocks_match_records_read_one_by_one(tmp_path, monkeypatch):
    """Block edges inside headers, data and footers: the same records and problems."""
    events = [event(s, 1e9 + s, [("t", float(s))]) for s in range(1, 400)]
    path = tmp_path / "events.out.tfevents.1.h"
    blob = bytearray(b"".join(record(e) for e in events))
    blob[1000] ^= 0x40  # one damaged record
    path.write_bytes(bytes(blob[:-7]))  # and a cut-off tail
    reference_problems = []
    monkeypatch.setattr(tfrecord, "BLOCK", 1 << 20)
    reference = list(tfevents.read_records(path, reference_problems))
    for block in (1, 5, 13, 64, 100):
        monkeypatch.setattr(tfrecord, "BLOCK", block)
        problems = []
        assert list(tfevents.read_records(path, problems)) == reference
        assert [(p.kind, p.record, p.offset) for p in problems] == \
            [(p.kind, p.record, p.offset) for p in reference_problems]
    assert [p.kind for p in reference_problems] == ["crc", "truncated"]


def test_records_in_a_layout_seen_before_read_as_the_first_was_read(monkeypatch):
    """scalars_of_event with layouts answers a record in a known layout from one unpack; each
    record here differs from the one before in one way the layout must notice or ignore."""
    records = [event(step, 1e9 + step, scalars) for step, scalars in [
        (1, [("a/x", 1.0), ("a/y", 2.0)]),
        (2, [("a/x", -3.5), ("a/y", float("nan"))]),  # new values: the same layout
        (127, [("a/x", 1.0), ("a/y", 2.0)]),
        (128, [("a/x", 1.0), ("a/y", 2.0)]),  # a two-byte step: one byte longer
        (2 ** 40, [("a/x", 1.0), ("a/y", 2.0)]),
        (3, [("a/x", 1.0), ("b/y", 2.0)]),  # another tag, the same length and last byte
        (3, [("b/x", 1.0), ("a/y", 2.0)]),
        (4, [("a/x", 1.0), ("a/y", 2.0), ("c", 0.5)]),
        (5, [("a/x", 1.0)]),
        (6, []),
    ]]
    two_bytes = records[3]  # step 128: 0x80 0x01; its last byte marked to go on, as damage would
    records.append(two_bytes[:11] + bytes([two_bytes[11] | 0x80]) + two_bytes[12:])
    layouts = {}
    for data in records:
        outcomes = []
        for known in (None, layouts):
            try:
                outcomes.append(repr(tfevents.scalars_of_event(data, known)))
            except Exception as exc:  # the general reader's refusal, which load_views names
                outcomes.append(type(exc))
        assert outcomes[1] == outcomes[0]
    assert layouts  # the layouts were learned, and now answer alone
    monkeypatch.setattr(tfproto, "_simple_event", lambda data: None)
    again = event(7, 1e9, [("a/x", 9.0), ("a/y", 8.0)])
    assert tfevents.scalars_of_event(again, layouts) == (7, 1e9, [("a/x", 9.0), ("a/y", 8.0)])


def test_envelopes_from_one_pass_equal_widening_each_bucket_value_by_value(tmp_path):
    """load_views widens a bucket inline: the same buckets as _envelop called for every value in
    order, ties included (the first step that reached a bucket's min or max is the one drawn)."""
    values = {s: (0.0 if s in (300, 301) else 5.0 if s in (900, 901) else 1.0 + (s % 7) / 8)
              for s in range(1, 3001)}
    write_events(tmp_path / "events.out.tfevents.1.host.1.0",
                 [(s, {"a/x": v, "a/y": -v}) for s, v in values.items()])
    loaded = tfevents.load_views(tmp_path, [(None, None)], envelopes=True)[0]
    for tag, sign in (("a/x", 1), ("a/y", -1)):
        alone = tfevents.Scalars([], {}, [], envelope={})
        for step, value in values.items():
            tfevents._envelop(alone, alone.envelope, tag, step, sign * value)
        assert loaded.envelope[tag] == alone.envelope[tag] and loaded.width[tag] == alone.width[tag]
    drawn = loaded.drawn("a/x")
    assert (300, 0.0) in drawn and (301, 0.0) not in drawn and (900, 5.0) in drawn and (901, 5.0) not in drawn


def _wrong_wire(number: int, wire: int) -> bytes:
    """A field of this number in the given wire type, with a small payload."""
    key = bytes([number << 3 | wire])
    return key + {0: b"\x05", 1: b"\x00" * 8, 2: b"\x02ab", 5: b"\x00" * 4}[wire]


@pytest.mark.parametrize("where", ["event", "value", "tensor"])
def test_a_known_field_in_another_wire_type_is_an_unknown_field_as_protobuf_reads_it(tmp_path, where):
    """A writer's field in an unexpected wire type never crashes the reader: where protobuf
    reads the record (skipping the field as unknown), the reader reads the same; where protobuf
    refuses it, the reader refuses it as damaged (it raised a TypeError before)."""
    from google.protobuf.message import DecodeError
    from tbwrite import _field
    proper = {"event": {1: (1,), 2: (0,), 5: (2,), 8: (2,)}, "value": {1: (2,), 2: (5,), 8: (2,)},
              "tensor": {1: (0,), 4: (2,), 5: (2, 5), 6: (1, 2)}}[where]
    compared = 0
    for number in proper:
        for wire in sorted({0, 1, 2, 5} - set(proper[number])):
            value = _field(1, 2, b"loss") + _field(2, 5, struct.pack("<f", 0.5))
            summary_value = value + _wrong_wire(number, wire) if where == "value" else value
            if where == "tensor":
                tensor = _field(1, 0, b"\x01") + _wrong_wire(number, wire) + _field(5, 5, struct.pack("<f", 2.0))
                summary_value = _field(1, 2, b"t") + _field(8, 2, tensor)
            data = _field(1, 1, struct.pack("<d", 7.0)) + _field(2, 0, b"\x03") + \
                _field(5, 2, _field(1, 2, summary_value))
            if where == "event":
                data += _wrong_wire(number, wire)
            try:
                oracle = event_pb2.Event.FromString(data)
            except DecodeError:
                with pytest.raises((ValueError, struct.error)):
                    tfevents.scalars_of_event(data)
                continue
            expected = [(v.tag, v.simple_value if v.HasField("simple_value") else v.tensor.float_val[0])
                        for v in oracle.summary.value if v.HasField("simple_value") or v.tensor.float_val]
            assert tfevents.scalars_of_event(data) == (oracle.step, oracle.wall_time, expected), (number, wire)
            (tmp_path / "events.out.tfevents.1.host.1.0").write_bytes(record(data))
            assert tfevents.load_scalars(tmp_path).problems == []
            compared += 1
    assert compared >= 8


@pytest.mark.parametrize("last", [0x01, 0x7F])
def test_a_ten_byte_step_keeps_its_low_64_bits_as_protobuf_does(last):
    """-1 as protobuf writes it (ten bytes, the last 0x01) and a last byte with bits past 64:
    both read as protobuf reads them, on the fast path and on the general one."""
    from tbwrite import _field
    data = _field(1, 1, struct.pack("<d", 7.0)) + b"\x10" + b"\xff" * 9 + bytes([last]) + \
        _field(5, 2, _field(1, 2, _field(1, 2, b"loss") + _field(2, 5, struct.pack("<f", 0.5))))
    step = event_pb2.Event.FromString(data).step
    assert step == -1
    assert tfevents.scalars_of_event(data)[0] == step and _general(data)[0] == step


def test_a_file_that_grows_while_read_is_read_as_it_was_when_opened(tmp_path, monkeypatch):
    """A live run appends records while the report reads: the file is read up to the size it
    had when opened, with no false cut-off record (one was reported past the first block)."""
    monkeypatch.setattr(tfrecord, "BLOCK", 64)  # stands in for a file larger than one block
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(b"".join(record(event(s, 1.0, [("loss", float(s))])) for s in range(3)))
    problems = []
    reading = tfrecord.read_records(path, problems)
    first = next(reading)
    with open(path, "ab") as stream:
        stream.write(record(event(3, 1.0, [("loss", 3.0)])))
    assert len([first, *reading]) == 3 and problems == []


def test_a_tensors_first_value_is_read_without_unpacking_the_rest():
    """float_val packed with a million values: the first is the scalar, read in one unpack (the
    whole list was built before: 40 MiB more for 4 MiB of values); a length that is no whole
    count of floats is damage, as protobuf says."""
    import tracemalloc
    from tbwrite import _field
    def event_of(tensor):
        value = _field(1, 2, b"t") + _field(8, 2, tensor)
        return _field(1, 1, struct.pack("<d", 7.0)) + _field(2, 0, b"\x03") + _field(5, 2, _field(1, 2, value))
    values = struct.pack("<f", 2.5) + bytes(4 * 999_999)
    data = event_of(_field(1, 0, b"\x01") + _field(5, 2, values))
    tracemalloc.start()
    try:
        assert tfevents.scalars_of_event(data) == (3, 7.0, [("t", 2.5)])
        assert tracemalloc.get_traced_memory()[1] < 24 << 20  # the record sliced level by level
    finally:
        tracemalloc.stop()
    assert event_pb2.Event.FromString(data).summary.value[0].tensor.float_val[0] == 2.5
    with pytest.raises(struct.error):
        tfevents.scalars_of_event(event_of(_field(1, 0, b"\x01") + _field(5, 2, bytes(6))))


def _tensor_event(tensor: bytes) -> bytes:
    from tbwrite import _field
    value = _field(1, 2, b"t") + _field(8, 2, tensor)
    return _field(1, 1, struct.pack("<d", 7.0)) + _field(2, 0, b"\x03") + _field(5, 2, _field(1, 2, value))


@pytest.mark.parametrize("bits", [0x3F81, 0xC2F7, 0x4049, 0x0001])
def test_a_bfloat16_scalar_is_the_top_half_of_a_float32_and_a_half_an_ieee_half(bits):
    """half_val holds a bfloat16's bits or an IEEE half's, as dtype says (14 or 19), whichever
    field comes first; tensor_content too. A bfloat16 was read as a half: 1.0078 became 1.88."""
    from tbwrite import _field, _varint
    as_bf16 = struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    as_half = struct.unpack("<e", struct.pack("<H", bits))[0]
    for dtype, want in ((14, as_bf16), (19, as_half)):
        half = _field(13, 2, _varint(bits))
        for tensor in (_field(1, 0, _varint(dtype)) + half, half + _field(1, 0, _varint(dtype))):
            proto = event_pb2.Event.FromString(_tensor_event(tensor)).summary.value[0].tensor
            assert (proto.dtype, proto.half_val[0]) == (dtype, bits)  # what protobuf reads
            assert tfevents.scalars_of_event(_tensor_event(tensor))[2] == [("t", want)]
    content = _field(1, 0, _varint(14)) + _field(4, 2, struct.pack("<H", bits))
    assert tfevents.scalars_of_event(_tensor_event(content))[2] == [("t", as_bf16)]


@pytest.mark.parametrize("number,width", [(7, 32), (10, 64)])
def test_a_tensors_int_field_is_cut_to_its_width_as_protobuf_reads_it(number, width):
    """int_val (int32) and int64_val of ten bytes with bits past their width: the value protobuf
    reads, packed or not."""
    from tbwrite import _field
    raw = b"\xfe" + b"\xff" * 8 + b"\x7f"  # -2 in 64 bits, with bits past 64 set too
    for field in (_field(number, 0, raw), _field(number, 2, raw)):
        tensor = _field(1, 0, b"\x03" if width == 32 else b"\x09") + field
        proto = event_pb2.Event.FromString(_tensor_event(tensor)).summary.value[0].tensor
        expected = (proto.int_val if number == 7 else proto.int64_val)[0]
        assert expected == -2
        assert tfevents.scalars_of_event(_tensor_event(tensor))[2] == [("t", float(expected))]
