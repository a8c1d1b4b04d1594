"""The bundle's TensorBoard reader (formats/tfevents.py with tfrecord.py) against TensorBoard's
own reader, EventAccumulator, on event files TensorBoard's writers wrote: torch's SummaryWriter
(what verl's tensorboard logger uses) with every kind of summary it writes, tensorboard's
EventFileWriter, a resumed run's two files, and the real runs' files in tests/fixtures. Every
scalar, tag by tag and step by step, must be the same; the last tests break the reader to show
that the comparison then fails."""
import math
from pathlib import Path

import pytest
import tbevents

torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")
np = pytest.importorskip("numpy")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402
from twgrpo.formats import tfevents, tfproto, tfrecord  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL = sorted({path.parent for path in FIXTURES.rglob("events.out.tfevents.*")})
pytestmark = pytest.mark.filterwarnings("ignore")


def tensorboard_scalars(folder: Path) -> dict:
    """tag -> step -> value as TensorBoard reads the folder (one run): simple values and
    tensors of the scalars plugin, every event kept (no purge), the last write of a step winning."""
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0},
                                   purge_orphaned_data=False)
    accumulator.Reload()
    found: dict = {}
    tags = accumulator.Tags()
    for tag in tags["scalars"]:
        for item in accumulator.Scalars(tag):
            found.setdefault(tag, {})[item.step] = item.value
    for tag in tags["tensors"]:
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
            for item in accumulator.Tensors(tag):
                found.setdefault(tag, {})[item.step] = float(tensor_util.make_ndarray(item.tensor_proto))
    return found


def assert_reader_agrees_with_tensorboard(folder: Path) -> None:
    ours = tfevents.load_scalars(folder)
    assert ours.problems == []
    theirs = tensorboard_scalars(folder)
    assert theirs, "the oracle found no scalars: the case proves nothing"
    # repr: a NaN equals a NaN, and 0.1 read as a float32 must be the same float32 in both
    assert {tag: repr(sorted(steps.items())) for tag, steps in ours.values.items()} == \
        {tag: repr(sorted(steps.items())) for tag, steps in theirs.items()}
    assert ours.tags == set(theirs)


def with_summary_writer(folder: Path) -> None:
    """torch's SummaryWriter: scalars old and new style, float32 and float64, values of every
    sign and NaN and inf, steps up to 2^40, long and non-ASCII tags, and the summaries that are
    not scalars (histograms, text, PR curves, images), which both readers must pass over."""
    writer = torch_tensorboard.SummaryWriter(str(folder))
    for step in (0, 1, 2, 3, 127, 128, 2 ** 20, 2 ** 40):
        writer.add_scalar("actor/pg_loss", 0.5 / (step + 1), step)
        writer.add_scalar("critic/score/mean", -step * 0.1, step)
        writer.add_scalar("new/style", step * 1.5, step, new_style=True)
        writer.add_scalar("new/double", step / 3, step, new_style=True, double_precision=True)
        writer.add_scalar("edge/" + "x" * 200, float(step), step)
        writer.add_scalar("grad/ñorm ✓", [math.nan, math.inf, -math.inf, 1e-30][step % 4], step)
        writer.add_histogram("weights", np.arange(10) * (step % 7), step)
        writer.add_text("note", f"step {step}", step)
        writer.add_pr_curve("pr", np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.8, 0.3]), step)
        writer.add_image("picture", np.zeros((3, 4, 4)), step)
    writer.close()


def with_event_file_writer(folder: Path) -> None:
    """tensorboard's EventFileWriter: many tags an event (a summary over 127 bytes), a step
    written twice, simple values and scalar tensors of every number type (ints packed)."""
    writer = EventFileWriter(str(folder))
    for step in list(range(1, 40)) + [20]:
        summary = summary_pb2.Summary()
        for index in range(12):
            summary.value.add(tag=f"metric/{index:02d}", simple_value=step * 0.25 + index)
        for tag, tensor in (("t/float", tensor_pb2.TensorProto(dtype=1, float_val=[step / 7])),
                            ("t/double", tensor_pb2.TensorProto(dtype=2, double_val=[step / 9])),
                            ("t/int64", tensor_pb2.TensorProto(dtype=9, int64_val=[step * -2 ** 40])),
                            ("t/int32", tensor_pb2.TensorProto(dtype=3, int_val=[step - 20])),
                            ("t/half", tensor_pb2.TensorProto(dtype=19, half_val=[15360 + step]))):
            item = summary.value.add(tag=tag, tensor=tensor)
            item.metadata.plugin_data.plugin_name = "scalars"
        writer.add_event(event_pb2.Event(step=step, wall_time=1e9 + step, summary=summary))
    writer.close()


def resumed_run(folder: Path) -> None:
    """A run preempted at step 3 and resumed from its step-2 checkpoint: a second file, later by
    its name, writes step 3 again."""
    tbevents.write_events(folder / "events.out.tfevents.1700000000.host.1.0",
                          [(s, {"a": float(s), "b": -s / 3}) for s in (1, 2, 3)])
    tbevents.write_events(folder / "events.out.tfevents.1700000500.host.2.0",
                          [(s, {"a": s * 10.0, "b": s / 3}) for s in (3, 4)])


WRITERS = {writer.__name__: writer for writer in (with_summary_writer, with_event_file_writer,
                                                  resumed_run)}


@pytest.mark.parametrize("writer", WRITERS)
def test_the_reader_agrees_with_tensorboard_on_files_its_writers_wrote(tmp_path, writer):
    WRITERS[writer](tmp_path)
    assert_reader_agrees_with_tensorboard(tmp_path)


@pytest.mark.parametrize("folder", REAL, ids=lambda p: p.parent.name)
def test_the_reader_agrees_with_tensorboard_on_the_real_runs(folder):
    assert_reader_agrees_with_tensorboard(folder)


def test_the_summaries_that_are_not_scalars_are_passed_over(tmp_path):
    with_summary_writer(tmp_path)
    assert {"weights", "note", "pr", "picture"}.isdisjoint(tfevents.load_scalars(tmp_path).tags)
    assert {"weights", "picture"} <= {tag for kind in ("histograms", "images")
                                      for tag in tensorboard_tags(tmp_path)[kind]}


def tensorboard_tags(folder: Path) -> dict:
    accumulator = EventAccumulator(str(folder))
    accumulator.Reload()
    return accumulator.Tags()


BREAKS = {  # a fault in the reader, and the files that show it
    "the fast path drops an event's last value": ("resumed_run", lambda m: m.setattr(
        tfproto, "_simple_event",
        lambda data, read=tfproto._simple_event: read(data) and (*read(data)[:2], read(data)[2][:-1]))),
    "scalar tensors not read": ("with_event_file_writer", lambda m: m.setattr(
        tfproto, "_tensor_scalar", lambda buf: None)),
    "int64 scalars read unsigned": ("with_event_file_writer", lambda m: m.setattr(
        tfproto, "read_varint", lambda buf, pos, read=tfproto.read_varint: (read(buf, pos)[0] % 2 ** 63, read(buf, pos)[1]))),
    "steps read one too high": ("with_summary_writer", lambda m: m.setattr(
        tfevents, "scalars_of_event",
        lambda data, *layouts, read=tfevents.scalars_of_event: (read(data)[0] + 1, *read(data)[1:]))),
    "a length field's CRC computed over the wrong bytes": ("resumed_run", lambda m: m.setattr(
        tfrecord, "_length_crc", lambda length: tfrecord.masked_crc(length.to_bytes(8, "big")))),
}


@pytest.mark.parametrize("fault", BREAKS)
def test_the_comparison_fails_when_the_reader_is_broken(tmp_path, monkeypatch, fault):
    writer, breaks = BREAKS[fault]
    WRITERS[writer](tmp_path)
    assert_reader_agrees_with_tensorboard(tmp_path)
    breaks(monkeypatch)
    with pytest.raises(AssertionError):
        assert_reader_agrees_with_tensorboard(tmp_path)
