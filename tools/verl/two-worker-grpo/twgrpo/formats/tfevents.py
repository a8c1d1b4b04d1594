"""TensorBoard event files without tensorboard: TFRecord framing, CRC-32C, Event protobufs.

A record is: uint64 length, uint32 masked CRC-32C of the length bytes, the data, uint32
masked CRC-32C of the data. CRC-32C is the Castagnoli polynomial, not zlib's crc32.
"""
from __future__ import annotations

import dataclasses
import math
import re
import struct
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .crc32c import crc32c
from .lines import open_regular
from .thrift import read_varint

def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclasses.dataclass
class Problem:
    kind: str  # "truncated" (end of a file cut short) or "crc" (damaged record)
    path: str
    record: int
    offset: int
    message: str


MAX_RECORD = 16 << 20  # larger records (images, graphs) are stepped over, not read
MAX_LENGTH = 1 << 32  # no writer makes a record this long: a larger length field is damage


def read_records(path: Path, problems: List[Problem]) -> Iterator[bytes]:
    """Yield each record's data; a damaged record is skipped, a cut-off tail ends the file.
    A length field must fit the file: memory is one record of at most MAX_RECORD bytes."""
    with open_regular(path) as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        index = 0
        while True:
            offset = stream.tell()
            header = stream.read(12)
            if not header:
                return
            if len(header) < 12:
                problems.append(Problem("truncated", str(path), index, offset,
                                        f"{len(header)} bytes of a record header, then end of file"))
                return
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc(header[:8]) != length_crc:
                problems.append(Problem("crc", str(path), index, offset,
                                        "the length's CRC does not match; the rest is unreadable"))
                return
            room = size - offset - 16
            if length > room:
                if length > MAX_LENGTH:
                    problems.append(Problem("crc", str(path), index, offset,
                                            f"length field {length} is impossible in a {size}-byte "
                                            "file; the rest is unreadable"))
                else:
                    problems.append(Problem("truncated", str(path), index, offset,
                                            f"record of {length} bytes cut off by end of file "
                                            f"({max(room, 0)} bytes left)"))
                return
            if length > MAX_RECORD:  # not a scalar: step over it unread
                stream.seek(length + 4, 1)
                index += 1
                continue
            data = stream.read(length)
            footer = stream.read(4)
            if len(data) < length or len(footer) < 4:  # the file shrank while being read
                problems.append(Problem("truncated", str(path), index, offset,
                                        f"record of {length} bytes cut off by end of file"))
                return
            if masked_crc(data) != struct.unpack("<I", footer)[0]:
                problems.append(Problem("crc", str(path), index, offset,
                                        "the data's CRC does not match; record skipped"))
            else:
                yield data
            index += 1


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
    """A scalar from a TensorProto (new-style summaries): float_val, double_val or content."""
    dtype, content, values = None, None, []
    for number, wire, value in _fields(buf):
        if number == 1:
            dtype = value
        elif number == 4:
            content = value
        elif number == 5:  # float_val, packed or not
            values += list(struct.unpack(f"<{len(value) // 4}f", value))
        elif number == 6:  # double_val
            values += list(struct.unpack(f"<{len(value) // 8}d", value))
        elif number in (7, 10) and wire == 0:
            values.append(float(value))
        elif number == 13 and wire == 0:  # half_val, bits in an int
            values.append(struct.unpack("<e", struct.pack("<H", value))[0])
    if values:
        return float(values[0])
    if content:
        fmt = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q", DT_HALF: "<e"}
        if dtype in fmt and len(content) >= struct.calcsize(fmt[dtype]):
            return float(struct.unpack_from(fmt[dtype], content)[0])
    return None


def scalars_of_event(data: bytes) -> Tuple[int, float, List[Tuple[str, float]]]:
    """(step, wall time, [(tag, value)]) of one Event record."""
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

    def at(self, tag: str, step: int) -> Optional[float]:
        return self.values.get(tag, {}).get(step)

    def last_step(self, tag: str) -> Optional[int]:
        return self.last.get(tag)


def load_scalars(folder: Path, keep: Optional[Iterable[str]] = None,
                 keep_step: Optional[int] = None) -> Scalars:
    """Scalars of every event file under folder; with ``keep``, values of those tags only.
    Memory is bounded: each tag keeps the steps that are multiples of its stride, the stride
    doubling whenever the tag holds more than its share of MAX_VALUES, so a tag's series covers
    the whole run; its last step and keep_step are always held."""
    files = sorted(folder.rglob("events.out.tfevents.*"), key=_file_order)
    scalars = Scalars(files, {}, Problems())
    wanted = set(keep) if keep is not None else None
    latest: Dict[str, Tuple[int, float]] = {}
    for path in files:
        try:
            for index, record in enumerate(read_records(path, scalars.problems)):
                try:
                    step, _, found = scalars_of_event(record)
                except (ValueError, struct.error) as exc:  # ThriftError is a ValueError
                    scalars.problems.append(Problem("crc", str(path), index, -1,
                                                    f"record does not decode: {exc}"))
                    continue
                for tag, value in found:
                    if _hold(scalars, tag, step, value, wanted, keep_step) and \
                            step >= latest.get(tag, (step,))[0]:
                        latest[tag] = (step, value)
        except OSError as exc:  # a FIFO, a device, a read error
            scalars.problems.append(Problem("crc", str(path), 0, -1, f"unreadable: {exc.strerror or exc}"))
    for tag, (step, value) in latest.items():  # the chart and the summary end at the last step
        if step not in scalars.values[tag]:
            scalars.held += 1
        scalars.values[tag][step] = value
    return scalars


def _hold(scalars: Scalars, tag: str, step: int, value: float, wanted: Optional[Set[str]],
          keep_step: Optional[int]) -> bool:
    """Hold one value if its tag is held; True when the tag is held at all."""
    if len(scalars.tags) < MAX_TAGS:
        scalars.tags.add(tag)
    if not math.isfinite(value) and (tag in scalars.nonfinite or len(scalars.nonfinite) < MAX_TAGS):
        if tag not in scalars.nonfinite or step < scalars.nonfinite[tag][0]:
            scalars.nonfinite[tag] = (step, value)
    if wanted is not None and tag not in wanted:
        return False
    series = scalars.values.get(tag)
    if series is None:
        if len(scalars.values) >= MAX_TAGS:
            scalars.dropped += 1
            return False
        series = scalars.values[tag] = {}
    scalars.last[tag] = max(scalars.last.get(tag, step), step)
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
