"""TFRecord framing, as TensorBoard's event files use it: a record is a uint64 length, the
uint32 masked CRC-32C of the length bytes, the data, the uint32 masked CRC-32C of the data.
CRC-32C is the Castagnoli polynomial, not zlib's crc32.
"""
from __future__ import annotations

import dataclasses
import functools
import struct
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from . import crcbulk
from .crc32c import crc32c, crc32c_bytewise
from .lines import open_regular


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
BLOCK = 8 << 20  # bytes read at a time; records are cut out of the block, not read one by one
BYTEWISE_RECORDS = 4096  # a file's first records take the byte loop (no wide tables for a short file)


@functools.lru_cache(maxsize=4096)
def _length_crc(length: int) -> int:
    """The masked CRC of a record's length field: lengths repeat (one size a scalar event)."""
    return masked_crc(struct.pack("<Q", length))


def read_records(path: Path, problems: List[Problem]) -> Iterator[bytes]:
    """Yield each record's data; a damaged record is skipped, a cut-off tail ends the file.
    A length field must fit the file: memory is one block and one record of at most MAX_RECORD
    bytes. The file is read BLOCK bytes at a time and each record cut out of the block; the
    block's records are framed first and their data CRCs checked together (crcbulk.py), then
    yielded in order, each problem noted where its record comes."""
    with open_regular(path) as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        buf, base, pos, index = b"", 0, 0, 0  # the block, its file offset, the next record in it
        framed: List[Tuple[int, int]] = []  # (position in buf, length) of records not yet yielded

        def refill(need: int) -> None:  # never past the size taken at the start: a file
            nonlocal buf, base, pos      # a live run appends to is read as it was then
            want = min(max(BLOCK, need), max(size - stream.tell(), 0))
            buf, base, pos = buf[pos:] + stream.read(want), base + pos, 0
        while True:
            if len(buf) - pos < 12:
                yield from _checked(path, buf, base, framed, index - len(framed), problems)
                refill(12)
                if not buf:
                    return
            offset = base + pos
            if len(buf) - pos < 12:
                problems.append(Problem("truncated", str(path), index, offset,
                                        f"{len(buf) - pos} bytes of a record header, then end of file"))
                return
            length, length_crc = struct.unpack_from("<QI", buf, pos)
            if _length_crc(length) != length_crc:
                yield from _checked(path, buf, base, framed, index - len(framed), problems)
                problems.append(Problem("crc", str(path), index, offset,
                                        "the length's CRC does not match; the rest is unreadable"))
                return
            room = size - offset - 16
            if length > room:
                yield from _checked(path, buf, base, framed, index - len(framed), problems)
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
                yield from _checked(path, buf, base, framed, index - len(framed), problems)
                stream.seek(offset + length + 16)
                buf, base, pos, index = b"", offset + length + 16, 0, index + 1
                continue
            if len(buf) - pos < length + 16:
                yield from _checked(path, buf, base, framed, index - len(framed), problems)
                refill(length + 16)
                if len(buf) < length + 16:  # the file shrank while being read
                    problems.append(Problem("truncated", str(path), index, offset,
                                            f"record of {length} bytes cut off by end of file"))
                    return
            framed.append((pos, length))
            pos += length + 16
            index += 1


BULK_MIN = 16  # records of one length in a block checked together; fewer, one by one


def _checked(path: Path, buf: bytes, base: int, framed: List[Tuple[int, int]], first: int,
             problems: List[Problem]) -> Iterator[bytes]:
    """The data of each framed record of buf whose CRC matches, in order (first: the index of
    the first); a problem for each that does not. Empties framed."""
    groups: Dict[int, List[int]] = {}
    for position, length in framed:
        groups.setdefault(length, []).append(position)
    good: Dict[int, bool] = {}
    for length, positions in groups.items():
        if len(positions) >= BULK_MIN and 0 < length <= crcbulk.MAX_LENGTH:  # no columns in an empty one
            ours = crcbulk.crcs(b"".join([buf[p + 12:p + 12 + length] for p in positions]), length)
        else:
            ours = [(crc32c_bytewise if first < BYTEWISE_RECORDS else crc32c)(buf[p + 12:p + 12 + length])
                    for p in positions]
        for p, crc in zip(positions, ours):
            good[p] = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF == \
                struct.unpack_from("<I", buf, p + 12 + length)[0]
    for number, (position, length) in enumerate(framed, first):
        if good[position]:
            yield buf[position + 12:position + 12 + length]
        else:
            problems.append(Problem("crc", str(path), number, base + position,
                                    "the data's CRC does not match; record skipped"))
    framed.clear()
