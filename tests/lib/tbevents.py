"""TensorBoard event files written by tensorboard's own writer, for tests that need real event
files at a path of their choosing: EventFileWriter writes a whole file (its file_version event
first), RecordWriter appends one Event protobuf to a file that is already there."""
import os
import tempfile
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.summary.writer.record_writer import RecordWriter


def event(step: int, wall_time: float, scalars=()) -> event_pb2.Event:
    """An Event of simple_value scalars, as a writer's add_scalar makes it."""
    values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in scalars]
    return event_pb2.Event(step=step, wall_time=wall_time, summary=summary_pb2.Summary(value=values))


def write_events(path: Path, steps, wall_time: float = 1.0e9) -> None:
    """steps: [(step, {tag: value})], each at wall_time + step. EventFileWriter names its file
    itself, so it writes into a folder of its own beside path and the file is moved to path."""
    path = Path(path)
    folder = Path(tempfile.mkdtemp(prefix=".tbwriter-", dir=path.parent))
    writer = EventFileWriter(str(folder))
    for step, scalars in steps:
        writer.add_event(event(step, wall_time + step, scalars.items()))
    writer.close()
    (written,) = folder.iterdir()
    os.replace(written, path)
    folder.rmdir()


def append_event(path: Path, step: int, wall_time: float, scalars) -> None:
    """One more event at the end of an event file: scalars is [(tag, value)]."""
    with open(path, "ab") as stream:
        RecordWriter(stream).write(event(step, wall_time, scalars).SerializeToString())
