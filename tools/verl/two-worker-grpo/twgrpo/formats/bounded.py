"""Reading what a run left behind without trusting it: regular files only, never more than a
limit, so a FIFO, /dev/zero behind a symlink or a 50 GiB "record" cannot hang or exhaust us."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator

RECORD_LIMIT = 16 << 20  # the bundle's JSON records are kilobytes; 64 nodes stay far below this
LINE_LIMIT = 1 << 20     # longer lines are cut (and read past) rather than held whole


class Unreadable(Exception):
    """The file is missing, not a regular file, too large, or not what it should be."""


def regular(path: Path) -> os.stat_result:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise Unreadable("missing")
    except OSError as exc:
        raise Unreadable(f"cannot stat: {exc.strerror}")
    if not stat.S_ISREG(info.st_mode):
        raise Unreadable("not a regular file")
    return info


def read_text(path: Path, limit: int = RECORD_LIMIT) -> str:
    info = regular(path)
    if info.st_size > limit:
        raise Unreadable(f"{info.st_size} bytes, more than the {limit} a record may have")
    try:
        with open(path, "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}")
    if len(data) > limit:
        raise Unreadable(f"more than the {limit} bytes a record may have")
    return data.decode("utf-8", "replace")


def read_json(path: Path, limit: int = RECORD_LIMIT) -> Any:
    try:
        return json.loads(read_text(path, limit))
    except ValueError as exc:
        raise Unreadable(f"not JSON ({exc})")


def read_object(path: Path, limit: int = RECORD_LIMIT) -> dict:
    data = read_json(path, limit)
    if not isinstance(data, dict):
        raise Unreadable(f"a JSON {type(data).__name__}, not an object")
    return data


def lines(path: Path, max_lines: int, line_limit: int = LINE_LIMIT) -> Iterator[str]:
    """The first max_lines lines, each cut to line_limit bytes (the rest of a long line skipped)."""
    regular(path)
    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}")
    with stream:
        count = 0
        while count < max_lines:
            line = stream.readline(line_limit)
            if not line:
                return
            if not line.endswith(b"\n"):
                while True:  # skip the rest of an overlong line, a bounded chunk at a time
                    rest = stream.readline(line_limit)
                    if not rest or rest.endswith(b"\n"):
                        break
            count += 1
            yield line.decode("utf-8", "replace").rstrip("\r\n")


def tail_lines(path: Path, nbytes: int = 256 << 10) -> list:
    """The whole lines in the last nbytes of a file (the first, partial one dropped)."""
    info = regular(path)
    try:
        with open(path, "rb") as stream:
            if info.st_size > nbytes:
                stream.seek(info.st_size - nbytes)
            data = stream.read(nbytes)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}")
    found = data.decode("utf-8", "replace").splitlines()
    return found[1:] if info.st_size > nbytes else found


def lines_starting(path: Path, prefix: bytes, chunk: int = 4 << 20, longest: int = 8192) -> Iterator[str]:
    """Every line that starts with prefix, found with bytes.find in big blocks: a 1 GiB log is
    read at disk speed, and memory stays at one block (longer lines than `longest` are skipped)."""
    regular(path)
    needle = b"\n" + prefix
    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}")
    with stream:
        carry = b"\n"  # the file starts at a line start
        while True:
            block = stream.read(chunk)
            data = carry + block if block else carry + b"\n"
            cut = data.rfind(b"\n")  # lines up to here are whole; the rest waits for the next block
            start = data.find(needle, 0, cut + 1)
            while start >= 0:
                end = data.find(b"\n", start + 1)
                yield data[start + 1:end].decode("utf-8", "replace").rstrip("\r")
                start = data.find(needle, end, cut + 1)
            carry = data[cut:]
            if len(carry) > longest:  # the middle of an overlong line: no prefix can start here
                carry = b"x"
            if not block:
                return
