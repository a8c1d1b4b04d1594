"""Checkpoint shards checked in parallel: worker processes bounded by cores and memory, the
largest files first, and a big file's entries split across workers too (a 1-rank checkpoint is
two files of 5 and 10 GB), with a progress line on a terminal, rewritten in place, and in a job's
log (not a terminal) a whole line every LOG_EVERY seconds once the check has run that long,
less often as it goes on (at most LOG_LINES lines).

Each file gets the same verdict as checkpoint.shard_problem gives it alone. A big file is
checked in two steps: its layout and data.pkl (torchzip.check without CRCs), then its entries'
CRCs in slices of about SLICE bytes, each slice a task of its own.
"""
from __future__ import annotations

import os
import stat
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Dict, List, Optional, Sequence, TextIO, Tuple

from ...formats import torchzip

Problem = Optional[Tuple[str, str]]  # None, or (missing | damaged | layout, what is wrong)
SLICE = 256 << 20  # bytes of CRC work in one task of a split file
BATCH = 64 << 20  # small files are checked in batches of about this many bytes ...
BATCH_FILES = 64  # ... or this many files, whichever comes first
WORKER_MEMORY = 512 << 20  # what one worker may need: a chunk, data.pkl, the fast path's bound
SERIAL_BELOW = 32 << 20  # less than this in all: no processes are started


def problem(path: Path, crc: bool = True) -> Tuple[Problem, Optional[list]]:
    """The verdict on one file, and its CRC spans when crc is False and its layout is good."""
    try:
        summary = torchzip.check(path, crc=crc)
    except FileNotFoundError:
        return ("missing", "missing"), None
    except torchzip.Damaged as exc:
        return ("damaged", str(exc)), None
    except torchzip.NotTorchSave as exc:
        return ("layout", f"not a torch.save archive: {exc}"), None
    except OSError as exc:
        return ("damaged", f"unreadable ({exc.strerror or exc})"), None
    return None, summary.get("spans")


def _batch(paths: Sequence[str]) -> List[Problem]:
    found = []
    for index, path in enumerate(paths):
        if index + 1 < len(paths):  # the disk reads the next file while this one is checked
            _prefetch(paths[index + 1])
        found.append(problem(Path(path))[0])
    return found


def _prefetch(path: str) -> None:
    """Ask the kernel to start reading a regular file into the page cache, and return at once
    (posix_fadvise WILLNEED); only a hint: anything else, or any error, is left alone."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(handle)


def _layout(path: str) -> Tuple[Problem, Optional[list]]:
    return problem(Path(path), crc=False)


def _spans(path: str, spans: list) -> Problem:
    try:
        torchzip.check_spans(path, spans)
    except torchzip.Damaged as exc:
        return "damaged", str(exc)
    except OSError as exc:
        return "damaged", f"unreadable ({exc.strerror or exc})"
    return None


def workers(jobs: int) -> int:
    """Processes to use: one a core, as many as the available memory allows, at most one a job."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, jobs, _available_memory() // WORKER_MEMORY))


def _available_memory() -> int:
    try:
        with open("/proc/meminfo", "rb") as stream:
            for line in stream:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 2 * WORKER_MEMORY


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def check_files(paths: Sequence[Path], jobs: Optional[int] = None,
                progress: Optional[TextIO] = None) -> Dict[Path, Problem]:
    """Each path's problem (None when whole), checked in parallel where it pays."""
    sizes = {p: _size(p) for p in paths}
    total = sum(sizes.values())
    meter = Progress(progress if progress is not None else sys.stderr, len(sizes), total)
    count = jobs or workers(max(1, len(sizes)))
    if count > 1 and total >= SERIAL_BELOW:
        try:
            return _parallel(sizes, count, meter)
        except (OSError, ImportError, NotImplementedError, BrokenProcessPool):
            # no worker processes here (no /dev/shm, a sandbox) or one was killed: check alone
            meter = Progress(meter.stream, len(sizes), total)
    results = {}
    for path in sizes:
        results[path] = problem(path)[0]
        meter.advance(1, sizes[path])
    meter.close()
    return results


def _parallel(sizes: Dict[Path, int], count: int, meter: "Progress") -> Dict[Path, Problem]:
    order = sorted(sizes, key=lambda p: -sizes[p])  # largest first: the long poles start early
    split_at = max(SLICE, sum(sizes.values()) // (count * 4))
    results: Dict[Path, Problem] = {}
    pending: Dict[Future, Tuple[str, list]] = {}
    slices_left: Dict[Path, int] = {}
    with ProcessPoolExecutor(max_workers=count) as pool:
        batch: List[Path] = []
        batch_bytes = 0  # kept as it grows: summing the batch for every path is quadratic
        for path in order + [None]:
            if path is not None and sizes[path] > split_at:
                pending[pool.submit(_layout, str(path))] = ("layout", [path])
                continue
            if batch and (path is None or len(batch) >= BATCH_FILES or
                          batch_bytes + sizes[path] > BATCH):
                pending[pool.submit(_batch, [str(p) for p in batch])] = ("batch", batch)
                batch, batch_bytes = [], 0
            if path is not None:
                batch.append(path)
                batch_bytes += sizes[path]
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                kind, paths = pending.pop(future)
                if kind == "batch":
                    for path, found in zip(paths, future.result()):
                        results[path] = found
                    meter.advance(len(paths), sum(sizes[p] for p in paths))
                elif kind == "layout":
                    path = paths[0]
                    found, spans = future.result()
                    if found is not None or not spans:
                        results[path] = found
                        meter.advance(1, sizes[path])
                        continue
                    results[path] = None
                    slices = _slices(spans)
                    slices_left[path] = len(slices)
                    for part in slices:
                        pending[pool.submit(_spans, str(path), part)] = ("span", [path, part])
                else:
                    path, part = paths
                    found = future.result()
                    if found is not None and results.get(path) is None:
                        results[path] = found
                    slices_left[path] -= 1
                    meter.advance(0 if slices_left[path] else 1, sum(s[2] for s in part))
    meter.close()
    return {path: results.get(path) for path in sizes}


def _slices(spans: list) -> List[list]:
    """Spans grouped into runs of about SLICE bytes, in file order. An entry's CRC is one
    sequential pass, so an entry is never cut: the largest entry bounds the longest task."""
    parts, part, size = [], [], 0
    for span in spans:
        part.append(span)
        size += span[2]
        if size >= SLICE:
            parts.append(part)
            part, size = [], 0
    if part:
        parts.append(part)
    return parts


LOG_EVERY = 30.0  # seconds between progress lines in a log (a check shorter than this prints none)
LOG_DOUBLING = 10  # lines a log gets at one spacing before the spacing doubles
LOG_LINES = 100  # lines a log gets at most, the last included: a day's check prints about 80


class Progress:
    """Files and bytes done, rate, time left: on a terminal one line rewritten at most twice a
    second; elsewhere (a job's log) a whole line every LOG_EVERY seconds, the first after
    LOG_EVERY seconds, twice that after LOG_DOUBLING lines and so on, and a last one at the end
    when any was printed, so a log of a long check stays short (LOG_LINES at most)."""

    def __init__(self, stream: TextIO, files: int, total: int, clock=time.monotonic) -> None:
        self.stream, self.files, self.total, self.clock = stream, files, total, clock
        self.on = bool(getattr(stream, "isatty", lambda: False)())
        self.done_files = self.done_bytes = 0
        self.started = self.shown = clock()
        self.width = 0
        self.logged = 0

    def advance(self, files: int, nbytes: int) -> None:
        self.done_files += files
        self.done_bytes += nbytes
        now = self.clock()
        if self.on and (now - self.shown >= 0.5 or self.done_files == self.files):
            self.shown = now
            self._show(now)
        elif (not self.on and self.logged < LOG_LINES - 1
              and now - self.shown >= LOG_EVERY * 2 ** (self.logged // LOG_DOUBLING)):
            self.shown = now
            self._log(now)

    def _text(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-6)
        rate = self.done_bytes / elapsed
        left = (self.total - self.done_bytes) / rate if rate else 0
        return (f"checkpoint: {self.done_files}/{self.files} files, {_gib(self.done_bytes)} of "
                f"{_gib(self.total)} GiB, {rate / (1 << 20):.0f} MiB/s, {left:.0f} s left")

    def _show(self, now: float) -> None:
        text = self._text(now)
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def _log(self, now: float) -> None:
        self.stream.write(f"{self._text(now)} ({now - self.started:.0f} s so far)\n")
        self.stream.flush()
        self.logged += 1

    def close(self) -> None:
        if self.on and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
        elif self.logged:
            self._log(self.clock())


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.2f}"
