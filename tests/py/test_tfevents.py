"""The standard-library TensorBoard reader against tensorboard itself (the oracle)."""
import math

import pytest
from tbwrite import event, record, write_events
from twgrpo.formats import tfevents

summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")
event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
tensor_pb2 = pytest.importorskip("tensorboard.compat.proto.tensor_pb2")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402


def test_crc32c_matches_the_standard_check_value():
    assert tfevents.crc32c(b"123456789") == 0xE3069283  # CRC-32C's published check value


def write_with_tensorboard(folder, steps, new_style=False):
    writer = EventFileWriter(str(folder))
    for step, values in steps:
        summary = summary_pb2.Summary()
        for tag, value in values.items():
            item = summary.value.add(tag=tag)
            if new_style:
                item.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=1, float_val=[value]))
                item.metadata.plugin_data.plugin_name = "scalars"
            else:
                item.simple_value = value
        writer.add_event(event_pb2.Event(step=step, wall_time=1e9 + step, summary=summary))
    writer.close()


@pytest.mark.parametrize("new_style", [False, True])
def test_scalars_match_event_accumulator(tmp_path, new_style):
    steps = [(s, {"actor/pg_loss": 0.5 / s, "training/global_step": float(s), "x/y": -s})
             for s in range(1, 6)]
    write_with_tensorboard(tmp_path, steps, new_style)
    ours = tfevents.load_scalars(tmp_path)
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    for tag in ("actor/pg_loss", "training/global_step", "x/y"):
        if new_style:
            theirs = {e.step: float(tensor_pb2.TensorProto.FromString(e.tensor_proto.SerializeToString()).float_val[0])
                      for e in acc.Tensors(tag)}
        else:
            theirs = {e.step: e.value for e in acc.Scalars(tag)}
        assert ours.values[tag] == pytest.approx(theirs), tag
    assert ours.problems == []


def test_our_test_writer_is_read_by_tensorboard_too(tmp_path):
    write_events(tmp_path / "events.out.tfevents.1.host.1.0", [(1, {"a": 1.5}), (2, {"a": 2.5})])
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("a")] == [(1, 1.5), (2, 2.5)]


def test_a_resumed_run_adds_a_file_and_its_later_write_of_a_step_wins(tmp_path):
    write_events(tmp_path / "events.out.tfevents.1700000000.h.1.0", [(1, {"a": 1.0}), (2, {"a": 2.0})])
    write_events(tmp_path / "events.out.tfevents.1700000500.h.2.0", [(2, {"a": 20.0}), (3, {"a": 3.0})])
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
    write_events(tmp_path / "events.out.tfevents.1.h.1.0", [(1, {"a": math.nan, "b": math.inf})])
    ours = tfevents.load_scalars(tmp_path)
    assert math.isnan(ours.values["a"][1]) and ours.values["b"][1] == math.inf
    assert not tfevents.is_finite(ours.values["a"][1])
