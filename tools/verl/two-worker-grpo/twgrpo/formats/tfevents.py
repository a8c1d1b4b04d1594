"""TensorBoard event files without tensorboard: Event protobufs and their scalars, from the
records tfrecord.py frames and checks.
"""
from __future__ import annotations

import dataclasses
import math
import re
import struct
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .crc32c import crc32c
from .thrift import read_varint
from .tfrecord import MAX_RECORD, Problem, masked_crc, read_records

__all__ = ["MAX_RECORD", "Problem", "Scalars", "crc32c", "load_scalars", "load_views",
           "masked_crc", "read_records", "scalars_of_event"]

def _fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """Protobuf wire format: (field number, wire type, raw value)."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("protobuf field runs past the end of its message")
        yield number, wire, value


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_HALF = 1, 2, 3, 9, 19


def _tensor_scalar(buf: bytes) -> Optional[float]:
    """A scalar from a TensorProto (new-style summaries): float_val, double_val or content;
    None for a tensor of more than one element (a PR curve, a histogram), as TensorBoard has."""
    dtype, content, values = None, None, []
    for number, wire, value in _fields(buf):
        if number == 1:
            dtype = value
        elif number == 2 and wire == 2 and any(dim.get(1) != 1 for dim in _dims(value)):
            return None
        elif number == 4:
            content = value
        elif number == 5:  # float_val, packed or not
            values += list(struct.unpack(f"<{len(value) // 4}f", value))
        elif number == 6:  # double_val
            values += list(struct.unpack(f"<{len(value) // 8}d", value))
        elif number in (7, 10, 13) and (wire == 0 or value):  # int, int64, half bits: packed or not
            bits = value if wire == 0 else read_varint(value, 0)[0]  # the first value
            values.append(struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0] if number == 13
                          else float(bits - (bits >> 63 << 64)))  # two's complement in 64 bits
    if values:
        return float(values[0])
    if content:
        fmt = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q", DT_HALF: "<e"}
        if dtype in fmt and len(content) >= struct.calcsize(fmt[dtype]):
            return float(struct.unpack_from(fmt[dtype], content)[0])
    return None


def _dims(shape: bytes) -> Iterator[Dict[int, object]]:
    """Each dimension of a TensorShapeProto as {1: size} (a size of 0 is left out)."""
    return ({n: v for n, _, v in _fields(dim)} for number, wire, dim in _fields(shape)
            if number == 2 and wire == 2)


def _simple_event(data: bytes) -> Optional[Tuple[int, float, List[Tuple[str, float]]]]:
    """scalars_of_event for the layout TensorBoard's writers give a scalar event (wall time,
    step, then a summary of {tag, simple_value} values, each value's length under 128, the
    summary's under 16 KiB), read by position; None for any other layout, which the general
    reader then takes."""
    try:
        if data[0] != 0x09 or data[9] != 0x10:
            return None
        wall = struct.unpack_from("<d", data, 1)[0]
        pos, step, shift = 10, 0, 0
        while True:
            byte = data[pos]
            pos += 1
            step |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                return None
        step = step if step < 1 << 63 else step - (1 << 64)
        end = len(data)
        if pos == end:
            return step, wall, []
        if data[pos] != 0x2A:
            return None
        size, pos = data[pos + 1], pos + 2
        if size >= 0x80:  # a summary of several values: a two-byte length
            size, pos = (size & 0x7F) | data[pos] << 7, pos + 1
            if size >= 1 << 14 or size < 0x80:
                return None
        if pos + size != end:
            return None
        found = []
        while pos < end:
            item, tag_length = data[pos + 1], data[pos + 3]
            tag_end = pos + 4 + tag_length
            if data[pos] != 0x0A or data[pos + 2] != 0x0A or item >= 0x80 or tag_length >= 0x80 \
                    or tag_end + 5 != pos + 2 + item or data[tag_end] != 0x15:
                return None
            found.append((data[pos + 4:tag_end].decode("utf-8", "replace"),
                          struct.unpack_from("<f", data, tag_end + 1)[0]))
            pos = tag_end + 5
        return step, wall, found
    except (IndexError, struct.error):
        return None


def scalars_of_event(data: bytes) -> Tuple[int, float, List[Tuple[str, float]]]:
    """(step, wall time, [(tag, value)]) of one Event record."""
    simple = _simple_event(data)
    if simple is not None:
        return simple
    step, wall, found = 0, 0.0, []
    for number, _, value in _fields(data):
        if number == 1:
            wall = struct.unpack("<d", value)[0]
        elif number == 2:
            step = value if value < 1 << 63 else value - (1 << 64)
        elif number == 5:
            for n, _, item in _fields(value):
                if n != 1:
                    continue
                tag, scalar = None, None
                for vn, _, vv in _fields(item):
                    if vn == 1:
                        tag = vv.decode("utf-8", "replace")
                    elif vn == 2:
                        scalar = struct.unpack("<f", vv)[0]
                    elif vn == 8:
                        scalar = _tensor_scalar(vv)
                if tag is not None and scalar is not None:
                    found.append((tag, scalar))
    return step, wall, found


def _file_order(path: Path) -> Tuple[int, str]:
    match = re.search(r"tfevents\.(\d+)", path.name)
    return (int(match.group(1)) if match else 0, str(path))


class Problems(list):
    """The first PROBLEM_SAMPLES problems, and how many there were (a file of a million
    damaged records must not become a million findings)."""
    count = 0

    def append(self, problem: Problem) -> None:
        self.count += 1
        if len(self) < PROBLEM_SAMPLES:
            super().append(problem)


PROBLEM_SAMPLES = 20
MAX_VALUES = 200_000  # (tag, step) values held in all; each tag is thinned to its share
MIN_PER_TAG = 32  # a tag's share never falls below this (MAX_TAGS x 32 < MAX_VALUES)
MAX_TAGS = 4096
BUCKETS = 240  # a charted tag's envelope: at most this many step buckets, each its min and max
ENVELOPE_TAGS = 256  # tags given an envelope (the first seen); a report charts fewer


@dataclasses.dataclass
class Scalars:
    files: List[Path]
    values: Dict[str, Dict[int, float]]  # tag -> step -> value; the last write of a step wins
    problems: List[Problem]
    tags: Set[str] = dataclasses.field(default_factory=set)  # every tag seen (up to MAX_TAGS)
    last: Dict[str, int] = dataclasses.field(default_factory=dict)  # tag -> last step seen
    held: int = 0  # values held
    dropped: int = 0  # values not held: their tag came after MAX_TAGS others
    thinned: int = 0  # values let go to keep a long run's charts within MAX_VALUES
    stride: Dict[str, int] = dataclasses.field(default_factory=dict)  # tag -> steps kept: k*stride
    # tag -> (first step, value) of a NaN or inf write, for every tag, kept or not (MAX_TAGS)
    nonfinite: Dict[str, Tuple[int, float]] = dataclasses.field(default_factory=dict)
    # With envelopes on (charts): tag -> bucket -> [step of min, min, step of max, max] over
    # every finite value, thinned or not; a bucket is width[tag] steps, doubled as needed.
    envelope: Optional[Dict[str, Dict[int, List]]] = None
    width: Dict[str, int] = dataclasses.field(default_factory=dict)

    def drawn(self, tag: str) -> List[Tuple[int, float]]:
        """A tag's points for a chart: each bucket's lowest and highest value at their steps
        (min/max per pixel, from every value read), then the last step; without an envelope,
        the values held."""
        buckets = (self.envelope or {}).get(tag)
        # One step a bucket (a short run): each step's last write, exactly, as a rewrite wins.
        if not buckets or (self.width.get(tag, 1) == 1 and self.stride.get(tag, 1) == 1):
            return sorted(self.values.get(tag, {}).items())
        points = set()
        for low_step, low, high_step, high in buckets.values():
            points.add((low_step, low))
            points.add((high_step, high))
        last = self.last.get(tag)
        if last is not None and last in self.values.get(tag, {}):
            points = {p for p in points if p[0] != last} | {(last, self.values[tag][last])}
        return sorted(points)

    def at(self, tag: str, step: int) -> Optional[float]:
        return self.values.get(tag, {}).get(step)

    def last_step(self, tag: str) -> Optional[int]:
        return self.last.get(tag)


View = Tuple[Optional[Iterable[str]], Optional[int]]  # (keep, keep_step) of load_scalars


def load_scalars(folder: Path, keep: Optional[Iterable[str]] = None,
                 keep_step: Optional[int] = None) -> Scalars:
    """Scalars of every event file under folder; with ``keep``, values of those tags only.
    Memory is bounded: each tag keeps the steps that are multiples of its stride, the stride
    doubling whenever the tag holds more than its share of MAX_VALUES, so a tag's series covers
    the whole run; its last step and keep_step are always held."""
    return load_views(folder, [(keep, keep_step)])[0]


def load_views(folder: Path, views: List[View], envelopes: bool = False) -> List[Scalars]:
    """load_scalars for several (keep, keep_step) views in one pass: each record is read,
    CRC-checked and decoded once, and its values go to every view (postflight's checks).
    envelopes: each view also keeps every tag's min and max per step bucket (Scalars.drawn)."""
    files = sorted(folder.rglob("events.out.tfevents.*"), key=_file_order)
    problems = Problems()
    tags: Set[str] = set()
    nonfinite: Dict[str, Tuple[int, float]] = {}  # every tag's, whatever a view keeps: shared
    loads = [(Scalars(files, {}, problems, tags=tags, nonfinite=nonfinite,
                      envelope={} if envelopes else None),
              set(keep) if keep is not None else None, keep_step, {}) for keep, keep_step in views]
    for path in files:
        try:
            for index, record in enumerate(read_records(path, problems)):
                try:
                    step, _, found = scalars_of_event(record)
                except (ValueError, struct.error) as exc:  # ThriftError is a ValueError
                    problems.append(Problem("crc", str(path), index, -1,
                                            f"record does not decode: {exc}"))
                    continue
                for tag, value in found:
                    _seen(tags, nonfinite, tag, step, value)
                    for scalars, wanted, keep_step, latest in loads:
                        if (wanted is None or tag in wanted) and \
                                _hold(scalars, tag, step, value, keep_step) and \
                                step >= latest.get(tag, (step,))[0]:
                            latest[tag] = (step, value)
        except OSError as exc:  # a FIFO, a device, a read error
            problems.append(Problem("crc", str(path), 0, -1, f"unreadable: {exc.strerror or exc}"))
    for scalars, _, _, latest in loads:
        for tag, (step, value) in latest.items():  # the chart and the summary end at the last step
            if step not in scalars.values[tag]:
                scalars.held += 1
            scalars.values[tag][step] = value
    return [scalars for scalars, _, _, _ in loads]


def _seen(tags: Set[str], nonfinite: Dict[str, Tuple[int, float]], tag: str, step: int,
          value: float) -> None:
    """Every value, whatever a view keeps: its tag (up to MAX_TAGS), its first NaN or inf."""
    if tag not in tags and len(tags) < MAX_TAGS:
        tags.add(tag)
    if not math.isfinite(value) and (tag in nonfinite or len(nonfinite) < MAX_TAGS):
        if tag not in nonfinite or step < nonfinite[tag][0]:
            nonfinite[tag] = (step, value)


def _hold(scalars: Scalars, tag: str, step: int, value: float, keep_step: Optional[int]) -> bool:
    """Hold one value of a tag the view keeps; True when the tag is held at all."""
    if scalars.envelope is not None and math.isfinite(value):
        _envelop(scalars, tag, step, value)
    series = scalars.values.get(tag)
    if series is None:
        if len(scalars.values) >= MAX_TAGS:
            scalars.dropped += 1
            return False
        series = scalars.values[tag] = {}
    last = scalars.last.get(tag)
    if last is None or step > last:
        scalars.last[tag] = step
    stride = scalars.stride.get(tag, 1)
    if step in series:
        series[step] = value  # the last write of a step wins
    elif step % stride == 0 or step == keep_step:
        series[step] = value
        scalars.held += 1
        if len(series) > max(MIN_PER_TAG, MAX_VALUES // len(scalars.values)):
            _thin(scalars, tag, series, stride * 2, keep_step)
    else:
        scalars.thinned += 1
    return True


def _envelop(scalars: Scalars, tag: str, step: int, value: float) -> None:
    """Widen the tag's bucket of this step to hold value; past BUCKETS buckets, the width
    doubles and neighbouring buckets merge (a run of any length keeps BUCKETS at most)."""
    buckets = scalars.envelope.get(tag)
    if buckets is None:
        if len(scalars.envelope) >= ENVELOPE_TAGS:
            return
        buckets = scalars.envelope[tag] = {}
    width = scalars.width.get(tag, 1)
    cell = buckets.get(step // width)
    if cell is None:
        buckets[step // width] = [step, value, step, value]
        while len(buckets) > BUCKETS:
            width *= 2
            merged: Dict[int, List] = {}
            for index, (low_step, low, high_step, high) in buckets.items():
                into = merged.get(index // 2)
                if into is None:
                    merged[index // 2] = [low_step, low, high_step, high]
                    continue
                if low < into[1]:
                    into[0], into[1] = low_step, low
                if high > into[3]:
                    into[2], into[3] = high_step, high
            buckets = scalars.envelope[tag] = merged
            scalars.width[tag] = width
        return
    if value < cell[1]:
        cell[0], cell[1] = step, value
    if value > cell[3]:
        cell[2], cell[3] = step, value


def _thin(scalars: Scalars, tag: str, series: Dict[int, float], stride: int,
          keep_step: Optional[int]) -> None:
    """Keep every stride-th step of one tag (and keep_step): half of what it held."""
    scalars.stride[tag] = stride
    gone = [s for s in series if s % stride and s != keep_step]
    for step in gone:
        del series[step]
    scalars.held -= len(gone)
    scalars.thinned += len(gone)


def is_finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)
