"""Reading what a run left behind without trusting it: regular files only, never more than a
limit, so a FIFO, /dev/zero behind a symlink or a 50 GiB "record" cannot hang or exhaust us.

JSON is parsed only after its nesting depth was measured on the raw bytes (json.loads recurses,
and `[[[[...` 200,000 deep would end in RecursionError), with integers of at most 19 digits (a
5000-digit or 10**400 "number" is refused, never turned into a float that overflows).
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Optional, Tuple, Union

RECORD_LIMIT = 16 << 20  # the bundle's JSON records are kilobytes; 64 nodes stay far below this
LINE_LIMIT = 1 << 20     # longer lines are cut (and read past) rather than held whole
MAX_DEPTH = 32           # nesting levels of a JSON text; the bundle's records use fewer than 8
MAX_INT_DIGITS = 19      # a JSON integer's digits: every count, size and step fits in 64 bits
MEMORY = 64 << 20        # what reading one JSON text may cost, estimated from its bytes (cost())

_ESCAPE = re.compile(rb"\\.", re.S)
_QUOTED = re.compile(rb'"[^"]*"')
_OPENERS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')


class Unreadable(Exception):
    """The file is missing, not a regular file, too large, or not what it should be."""


def ascii_digits(text: str) -> bool:
    """True for '0'..'9' only: str.isdigit() also accepts '²' and '١', which int() rejects or
    reads as another number than the name shows."""
    return bool(text) and text.isascii() and text.isdigit()


def open_regular(path: Union[str, Path]) -> Tuple[BinaryIO, os.stat_result]:
    """(stream, its fstat) of a regular file. Opened with O_NONBLOCK and checked with fstat on
    the open descriptor, so a FIFO or device (a symlink to /dev/zero, say) in its place never
    blocks, not even if it was swapped in after a stat. OSError otherwise."""
    fd, info = open_fd(path)
    try:
        return os.fdopen(fd, "rb"), info
    except BaseException:
        os.close(fd)
        raise


def open_fd(path: Union[str, Path]) -> Tuple[int, os.stat_result]:
    """open_regular's descriptor, for the caller to close."""
    fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return fd, info
    except BaseException:
        os.close(fd)
        raise


def open_checked(path: Path) -> Tuple[BinaryIO, os.stat_result]:
    """open_regular, its failures as Unreadable ('missing', 'not a regular file', ...)."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        raise Unreadable("missing")
    except OSError as exc:
        if exc.errno == errno.EINVAL and exc.strerror == "not a regular file":
            raise Unreadable("not a regular file")
        raise Unreadable(f"cannot read: {exc.strerror or exc}")


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


def first_names(folder: Path, prefix: str, most: int) -> List[str]:
    """first_entries's names alone (no path object for each of a folder's many files)."""
    found: List[str] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.startswith(prefix):
                    found.append(entry.name)
                    if len(found) >= most:
                        break
    except OSError:
        return []
    return found


def first_entries(folder: Path, prefix: str, most: int) -> List[Path]:
    """At most `most` entries of a folder whose names start with prefix, in the order the folder
    lists them: a folder of millions of files costs `most` entries, never a sorted list of all."""
    found: List[Path] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.startswith(prefix):
                    found.append(Path(entry.path))
                    if len(found) >= most:
                        break
    except OSError:
        return []
    return found


def files_under(folder: Path, prefix: str, most: int,
                looked_at: int = 1 << 16) -> Tuple[List[Path], bool]:
    """(at most `most` files under a folder, sub-folders too, whose names start with prefix;
    True when every name was looked at), having looked at no more than `looked_at` names."""
    found: List[Path] = []
    stack, seen = [str(folder)], 0
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.name.startswith(prefix):
                        found.append(Path(entry.path))
                    if len(found) >= most or seen >= looked_at:
                        return found, False
        except OSError:
            continue
    return found, True


def read_bytes(path: Path, limit: int = RECORD_LIMIT) -> bytes:
    """The whole of a regular file of at most limit bytes (the size is checked before reading)."""
    stream, info = open_checked(path)
    with stream:
        if info.st_size > limit:
            raise Unreadable(f"{info.st_size} bytes, more than the {limit} a record may have")
        try:
            data = stream.read(limit + 1)
        except OSError as exc:
            raise Unreadable(f"cannot read: {exc.strerror}")
    if len(data) > limit:
        raise Unreadable(f"more than the {limit} bytes a record may have")
    return data


def read_text(path: Path, limit: int = RECORD_LIMIT) -> str:
    return read_bytes(path, limit).decode("utf-8", "replace")


def depth(data: bytes, most: int = MAX_DEPTH, openers: Optional[int] = None) -> int:
    """The nesting depth of a JSON text, measured on its bytes without recursion: escapes and
    then strings are dropped, every bracket becomes [ or ], and each pass removes the innermost
    pairs. Returns most + 1 when it is deeper than most; -1 when the brackets do not pair up.
    openers: data's count of [ and {, where the caller has it (a pass over data each)."""
    if openers is None:
        openers = data.count(b"[") + data.count(b"{")
    if openers <= most:
        return openers  # no deeper than the count of openers (json.loads judges the rest)
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    quoted = data.translate(_OPENERS, _NOT_STRUCTURE)  # '"', '[' and ']' only: a small text
    if quoted.count(b'"') % 2 == 0:
        # Every string ends: two quotes side by side are then a string without brackets or the
        # gap between two strings, and dropping them first leaves every other quote's pairing
        # and every bracket outside strings as they were. Most strings hold no bracket: a 19 MB
        # record is measured in 40 ms, not 115. (An odd count leaves a string open to the end,
        # whose brackets count: not dropped there.)
        quoted = quoted.replace(b'""', b"")
    brackets = _QUOTED.sub(b"", quoted).replace(b'"', b"")
    for level in range(most):
        if not brackets:
            return level
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return -1
        brackets = shorter
    return most + 1 if brackets else most


TEXT_COST, CONTAINER_COST, VALUE_COST = 3, 200, 56  # cost()'s bytes per byte, bracket, value


def cost(data: bytes) -> int:
    """An estimate of the memory json.loads needs for data, from its bytes alone: the text three
    times over (bytes, str, the strings parsed), a small dict for every bracket, and a value for
    every comma and colon (inside strings too: there it errs upward). A 4 MiB record of
    `[{},{},...]` costs some 250 MiB to parse, one of long strings 12 MiB."""
    return _cost(data, data.count(b"[") + data.count(b"{"))


def _cost(data: bytes, containers: int) -> int:
    values = data.count(b",") + data.count(b":") + 1
    return TEXT_COST * len(data) + CONTAINER_COST * containers + VALUE_COST * values


def costs_more(data: bytes, memory: int) -> bool:
    """cost(data) > memory, without counting where no text of data's length could cost that
    much (a byte is at most text, a bracket and a value): a small rollout file, 100,000 times."""
    return (len(data) + 1) * (TEXT_COST + CONTAINER_COST + VALUE_COST) > memory and cost(data) > memory


def parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most "
                         f"{MAX_INT_DIGITS} are read)")
    return int(text)


def loads(data: Union[bytes, str], max_depth: int = MAX_DEPTH, memory: int = MEMORY) -> Any:
    """JSON from text or bytes, bounded: ValueError if it is not JSON, nests deeper than
    max_depth, would cost more than `memory` bytes to hold (cost()), or holds an integer longer
    than MAX_INT_DIGITS."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    openers = raw.count(b"[") + raw.count(b"{")  # for the cost and the depth: counted once
    estimate = _cost(raw, openers)
    if estimate > memory:
        raise ValueError(f"{len(raw)} bytes holding about {estimate >> 20} MiB of values, more "
                         f"than the {memory >> 20} MiB a record may take to read")
    levels = depth(raw, max_depth, openers)
    if levels > max_depth:
        raise ValueError(f"nested more than {max_depth} levels deep")
    if levels < 0:
        raise ValueError("its brackets do not pair up")
    text = data if isinstance(data, str) else data.decode("utf-8")
    return json.loads(text, parse_int=parse_int)


def read_json(path: Path, limit: int = RECORD_LIMIT, memory: int = MEMORY) -> Any:
    data = read_bytes(path, limit)
    try:
        return loads(data, memory=memory)
    except ValueError as exc:  # bad UTF-8 too
        raise Unreadable(f"not JSON ({exc})")


def read_object(path: Path, limit: int = RECORD_LIMIT, memory: int = MEMORY) -> dict:
    data = read_json(path, limit, memory)
    if not isinstance(data, dict):
        raise Unreadable(f"a JSON {type(data).__name__}, not an object")
    return data


def lines(path: Path, max_lines: int, line_limit: int = LINE_LIMIT) -> Iterator[str]:
    """The first max_lines lines, each cut to line_limit bytes (the rest of a long line skipped)."""
    stream, _ = open_checked(path)
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


def tail_lines(path: Path, nbytes: int = 256 << 10, prefix: bytes = b"") -> list:
    """The whole lines in the last nbytes of a file (the first, partial one dropped); with a
    prefix, only the lines that start with it (found with bytes.find, not line by line)."""
    stream, info = open_checked(path)
    try:
        with stream:
            if info.st_size > nbytes:
                stream.seek(info.st_size - nbytes)
            data = stream.read(nbytes)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror}")
    if info.st_size > nbytes:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    if not prefix:
        return data.decode("utf-8", "replace").splitlines()
    found, start, needle = [], 0, b"\n" + prefix
    data = b"\n" + data
    while True:
        start = data.find(needle, start)
        if start < 0:
            return found
        end = data.find(b"\n", start + 1)
        found.append(data[start + 1:end if end >= 0 else len(data)].decode("utf-8", "replace").rstrip("\r"))
        start = start + 1


def lines_starting(path: Path, prefix: bytes, chunk: int = 4 << 20, longest: int = 8192) -> Iterator[str]:
    """Every line that starts with prefix, found with bytes.find in big blocks: a 1 GiB log is
    read at disk speed, and memory stays at one block (longer lines than `longest` are skipped)."""
    needle = b"\n" + prefix
    stream, _ = open_checked(path)
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
