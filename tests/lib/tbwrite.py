"""TensorBoard event files written with the standard library, only where tensorboard's own
writer (tbevents.py, which tests that need real event files use) cannot serve: records to
damage or cut off at a known offset (test_tfevents.py, test_postflight_real.py, hostile.py), and
runs of many thousands of steps written fast (synthrun.py's synthesized runs, the long-run and
chart tests, bench/). tensorboard's EventAccumulator reads what it writes (test_tfevents.py)."""
import struct
from pathlib import Path

from twgrpo.formats.tfevents import masked_crc


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def event(step: int, wall_time: float, scalars=(), file_version: str = "") -> bytes:
    data = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    if file_version:
        data += _field(3, 2, file_version.encode())
    values = b"".join(_field(1, 2, _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value)))
                      for tag, value in scalars)
    if values:
        data += _field(5, 2, values)
    return data


def record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


def write_events(path: Path, steps) -> None:
    """steps: [(step, {tag: value})]; a file_version event first, like every writer."""
    with open(path, "wb") as stream:
        stream.write(record(event(0, 1.0e9, file_version="brain.Event:2")))
        for step, scalars in steps:
            stream.write(record(event(step, 1.0e9 + step, sorted(scalars.items()))))
