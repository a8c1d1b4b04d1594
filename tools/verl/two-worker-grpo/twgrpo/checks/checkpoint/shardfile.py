"""One checkpoint file's verdict, as a worker process of the shard check finds it
(shards.py): whole files read in one call from a descriptor opened without blocking, the next
file's read begun while one is judged; a big file's layout, then its entries' CRCs in slices.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ...formats import torchzip

Problem = Optional[Tuple[str, str]]  # None, or (missing | damaged | layout, what is wrong)


def problem(path: Path, crc: bool = True) -> Tuple[Problem, Optional[list]]:
    """The verdict on one file, and its CRC spans when crc is False and its layout is good."""
    try:
        summary = torchzip.check(path, crc=crc)
    except (OSError, torchzip.Damaged, torchzip.NotTorchSave) as exc:
        return problem_of(exc), None
    return None, summary.get("spans")


def problem_of(exc: Exception) -> Tuple[str, str]:
    if isinstance(exc, FileNotFoundError):
        return "missing", "missing"
    if isinstance(exc, torchzip.Damaged):
        return "damaged", str(exc)
    if isinstance(exc, torchzip.NotTorchSave):
        return "layout", f"not a torch.save archive: {exc}"
    return "damaged", f"unreadable ({getattr(exc, 'strerror', None) or exc})"


def batch(paths: Sequence[str]) -> List[Tuple[Problem, int]]:
    """Each file's problem and size (0 when it could not be opened), in order. The next file is
    opened, and the kernel asked to start reading it, while this one is checked: a cold read
    overlaps the check. A small file is read in one call, from the descriptor already open."""
    found: List[Tuple[Problem, int]] = []
    upcoming = opened(paths[0]) if paths else (None, None)
    try:
        for index in range(len(paths)):
            fd, size = upcoming
            upcoming = (None, None)
            if index + 1 < len(paths):
                upcoming = opened(paths[index + 1])
                if upcoming[0] is not None:
                    prefetch(upcoming[0])
            if fd is None:
                found.append((problem_of(size), 0))
                continue
            try:
                found.append((small(fd, size) if size <= torchzip.IN_MEMORY else
                              problem(Path(paths[index]))[0], size))
            finally:
                os.close(fd)
    finally:
        if upcoming[0] is not None:
            os.close(upcoming[0])
    return found


OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def opened(path: str) -> Tuple[Optional[int], Any]:
    """(descriptor, size) of a regular file, or (None, the OSError that refused it): opened
    with O_NONBLOCK and checked with fstat, as bounded.open_regular does, so a FIFO or device
    in its place is refused, never waited on."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        return None, exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except OSError as exc:
        os.close(fd)
        return None, exc
    return fd, info.st_size


def small(fd: int, size: int) -> Problem:
    """The verdict on a file of at most IN_MEMORY bytes, open as fd: read whole, then judged."""
    try:
        data = os.read(fd, size)
        while len(data) < size:  # a read may return less; the file may also have shrunk
            more = os.read(fd, size - len(data))
            if not more:
                break
            data += more
        torchzip.check_bytes(data)
    except (OSError, torchzip.Damaged, torchzip.NotTorchSave) as exc:
        return problem_of(exc)
    return None


def prefetch(fd: int) -> None:
    """Ask the kernel to start reading an open regular file into the page cache, and return at
    once (posix_fadvise WILLNEED); only a hint: any error is left alone."""
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass


def layout(path: str) -> Tuple[Problem, Optional[list]]:
    return problem(Path(path), crc=False)


def spans(path: str, spans: list) -> Problem:
    try:
        torchzip.check_spans(path, spans)
    except torchzip.Damaged as exc:
        return "damaged", str(exc)
    except OSError as exc:
        return "damaged", f"unreadable ({exc.strerror or exc})"
    return None
