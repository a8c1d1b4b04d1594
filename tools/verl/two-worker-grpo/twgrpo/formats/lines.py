"""Lines of a file in bounded memory: a line longer than the limit is measured, never held."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Union

from . import bounded

CHUNK = 1 << 20
MAX_SMALL = 1 << 20  # a JSON record or a one-line text file of the run folder


def open_regular(path: Union[str, Path]) -> BinaryIO:
    """Open a regular file for reading; a FIFO, device or directory (a symlink to /dev/zero,
    say) would block or never end, so it is refused as an OSError (O_NONBLOCK, then fstat)."""
    return bounded.open_regular(path)[0]


def read_small(path: Union[str, Path], limit: int = MAX_SMALL) -> str:
    """The whole text of a small file; OSError if unreadable, ValueError if larger than
    ``limit`` bytes or not UTF-8."""
    with open_regular(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data.decode("utf-8")


@dataclasses.dataclass
class Line:
    number: int  # from 1
    offset: int  # of its first byte in the file
    length: int  # without the newline
    data: Optional[bytes]  # None when length > the limit: the line was skipped, not read whole


def read_lines(path: Union[str, Path], max_line: int, chunk: int = CHUNK) -> Iterator[Line]:
    """Every line of the file (the last may lack its newline); memory is max_line + chunk."""
    number, offset, pending, skipping = 0, 0, b"", 0
    with open_regular(path) as stream:
        while True:
            data = stream.read(chunk)
            if not data:
                break
            start = 0
            while True:
                cut = data.find(b"\n", start)
                if cut == -1:
                    break
                number += 1
                if skipping:  # the end of an over-long line
                    length = skipping + cut - start
                    yield Line(number, offset, length, None)
                else:
                    line = pending + data[start:cut]
                    yield Line(number, offset, len(line), line if len(line) <= max_line else None)
                offset += (skipping or len(pending)) + cut - start + 1
                pending, skipping, start = b"", 0, cut + 1
            rest = data[start:]
            if skipping:
                skipping += len(rest)
            elif len(pending) + len(rest) > max_line:  # too long to hold: measure the rest
                skipping = len(pending) + len(rest)
                pending = b""
            else:
                pending += rest
    if skipping or pending:
        yield Line(number + 1, offset, skipping or len(pending), None if skipping else pending)
