"""Checkpoint shards checked in parallel: worker processes bounded by cores and memory, the
largest files first, and a big file's entries split across workers too (a 1-rank checkpoint is
two files of 5 and 10 GB), with a progress line on a terminal, rewritten in place, and in a job's
log (not a terminal) a whole line every progress.LOG_EVERY seconds once the check has run that long,
less often as it goes on (at most LOG_LINES lines).

Each file gets the same verdict as checkpoint.shard_problem gives it alone (shardfile.py judges
one file in a worker). A big file is checked in two steps: its layout and data.pkl
(torchzip.check without CRCs), then its entries' CRCs in slices of about SLICE bytes, each slice
a task of its own.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from ...formats import pools
from . import shardfile
from .progress import Progress
from .shardfile import Problem, problem  # problem: checkpoint.py's too

__all__ = ["Problem", "Parallel", "Progress", "check_files", "estimates", "file_size", "problem",
           "workers"]

SLICE = 256 << 20  # bytes of CRC work in one task of a split file
BATCH = 64 << 20  # small files are checked in batches of about this many bytes ...
BATCH_FILES = 512  # ... or this many files, whichever comes first (a task costs ~0.3 ms)
WORKER_MEMORY = 512 << 20  # what one worker may need: a chunk, data.pkl, the fast path's bound
SERIAL_BELOW = 32 << 20  # less than this in all: no processes are started
# More files than this, checked ahead (ahead.py), are not stated first: a stat is 2 us and
# 49,152 shards' took a tenth of a second of the one process every check waits for, while the
# workers fstat each file anyway. Their batches are planned from a few files' sizes (SAMPLES).
STAT_ALL = 4096
SAMPLES = 8


def workers(jobs: int) -> int:
    """Processes to use: one a core, as many as the available memory allows, at most one a job."""
    return max(1, min(pools.cores(), jobs, _available_memory() // WORKER_MEMORY))


def _available_memory() -> int:
    try:
        with open("/proc/meminfo", "rb") as stream:
            for line in stream:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 2 * WORKER_MEMORY


def file_size(path: Any) -> int:
    """The file's size by stat, 0 when it cannot be had (the check then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def check_files(paths: Sequence[Any], jobs: Optional[int] = None, progress: Optional[TextIO] = None,
                sizes: Optional[Dict[Any, int]] = None) -> Dict[Any, Problem]:
    """Each path's problem (None when whole), checked in parallel where it pays; the paths
    (str or Path) are the keys. ``sizes``, when given, gets each whole file's size."""
    stated = {p: file_size(p) for p in paths}
    total = sum(stated.values())
    meter = Progress(progress if progress is not None else sys.stderr, len(stated), total)
    count = jobs or workers(max(1, len(stated)))
    found: Optional[Dict[Any, Tuple[Problem, int]]] = None
    if count > 1 and total >= SERIAL_BELOW:
        try:
            found = _parallel(stated, count, meter)
        except (OSError, ImportError, NotImplementedError, BrokenProcessPool):
            # no worker processes here (no /dev/shm, a sandbox) or one was killed: check alone
            meter = Progress(meter.stream, len(stated), total)
    if found is None:
        found = {}
        for part in _batches(list(stated), stated):
            for path, verdict in zip(part, shardfile.batch([str(p) for p in part])):
                found[path] = verdict
                meter.advance(1, stated[path])
        meter.close()
    if sizes is not None:
        sizes.update((path, size) for path, (problem, size) in found.items() if problem is None)
    return {path: found[path][0] for path in stated}


def _batches(order: List[Any], sizes: Dict[Any, int]) -> List[List[Any]]:
    """The paths in order, in batches of at most BATCH_FILES files or about BATCH bytes: a
    batch is one task, so its cost of a few hundred microseconds is paid once for many files."""
    batches: List[List[Any]] = []
    batch: List[Any] = []
    batch_bytes = 0  # kept as it grows: summing the batch for every path is quadratic
    for path in order:
        if batch and (len(batch) >= BATCH_FILES or batch_bytes + sizes[path] > BATCH):
            batches.append(batch)
            batch, batch_bytes = [], 0
        batch.append(path)
        batch_bytes += sizes[path]
    return batches + [batch] if batch else batches


def _parallel(sizes: Dict[Any, int], count: int, meter: "Progress") -> Dict[Any, Tuple[Problem, int]]:
    run = Parallel(count)
    run.hand_files(sizes, meter)
    return run.collect()


class Parallel:
    """The files checked by ``count`` worker processes: made (the workers fork here) with
    ``first``, other tasks (objects with hand(submit), postflight/readahead.Task) handed to the
    workers before any file; then every file handed over at once (hand_files), and the verdicts
    collected by collect(), which may run in another thread (checks/checkpoint/ahead.py)."""

    def __init__(self, count: int, first: Sequence[Any] = ()) -> None:
        self.sizes: Dict[Any, int] = {}  # each file's size, where stated before
        self.paths: List[Any] = []
        self.meter: Optional[Progress] = None
        self.pending: Dict[Future, Tuple[str, list]] = {}
        self.pool = ProcessPoolExecutor(max_workers=count)
        self.count = count
        try:
            for task in first:
                task.hand(self.pool.submit)
        except BaseException:
            pools.stop(self.pool, wait=False)
            raise

    def hand_files(self, sizes: Dict[Any, int], meter: "Progress") -> None:
        """Hand the workers every file, largest first (the long poles start early); a file
        larger than a worker's share is checked in slices by several."""
        self.sizes, self.paths, self.meter = sizes, list(sizes), meter
        order = sorted(sizes, key=lambda p: -sizes[p])
        split_at = max(SLICE, sum(sizes.values()) // (self.count * 4))
        split = [path for path in order if sizes[path] > split_at]
        self._hand(split, _batches(order[len(split):], sizes))

    def hand_unstated(self, paths: Sequence[Any], meter: "Progress") -> None:
        """Hand the workers every file, in order, none stated first: batches of about BATCH
        bytes as the nearest file sampled before each has it (estimates()), no file split."""
        self.paths, self.meter = list(paths), meter
        batches = _batches(list(range(len(self.paths))), estimates(self.paths))
        self._hand([], [[self.paths[at] for at in batch] for batch in batches])

    def _hand(self, split: List[Any], batches: List[List[Any]]) -> None:
        """Each split file's layout task, then each batch's: no worker outlives a failed hand."""
        try:
            for path in split:
                self.pending[self.pool.submit(shardfile.layout, str(path))] = ("layout", [path])
            for batch in batches:
                self.pending[self.pool.submit(shardfile.batch, [str(p) for p in batch])] = ("batch", batch)
        except BaseException:
            pools.stop(self.pool, list(self.pending), wait=False)
            raise

    def collect(self) -> Dict[Any, Tuple[Problem, int]]:
        """Every file's verdict and size, as the workers found them."""
        return self.complete(self.collect_workers())

    def complete(self, found: Dict[Any, Tuple[Problem, int]]) -> Dict[Any, Tuple[Problem, int]]:
        """Every file's verdict and size: found's, and for a file no one answered for (each
        is in one task, so none should be), the check run here; never a pass by default."""
        missing = [path for path in self.paths if path not in found]
        if missing:
            found = {**found, **self.check_here(missing)}
        return {path: found[path] for path in self.paths}

    def collect_workers(self) -> Dict[Any, Tuple[Problem, int]]:
        """The verdicts of the files the workers checked: all but those take_back() took."""
        try:
            return self._collect()
        finally:
            pools.stop(self.pool)

    def take_back(self) -> Dict[Any, Tuple[Problem, int]]:
        """Check here, from the last, the batches no worker has begun, until one has (the rest
        are begun too: they are handed out in order); their verdicts. For the thread that waits
        while another collects: a core that would idle checks files instead."""
        found: Dict[Any, Tuple[Problem, int]] = {}
        for future, (kind, paths) in reversed(list(self.pending.items())):  # a copy: the collector pops
            if kind != "batch":
                continue
            if not future.cancel():
                break
            checked = self.check_here(paths)
            found.update(checked)
            self.meter.advance(len(paths), sum(size for _, size in checked.values()))
        return found

    @staticmethod
    def check_here(paths: Sequence[Any]) -> Dict[Any, Tuple[Problem, int]]:
        """Each file's verdict and size, checked in this process."""
        return dict(zip(paths, shardfile.batch([str(p) for p in paths])))

    def _collect(self) -> Dict[Any, Tuple[Problem, int]]:
        sizes, meter, pending, pool = self.sizes, self.meter, self.pending, self.pool
        results: Dict[Any, Tuple[Problem, int]] = {}
        slices_left: Dict[Any, int] = {}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                kind, paths = pending.pop(future)
                if future.cancelled():  # taken back: checked by take_back()'s caller
                    continue
                if kind == "batch":
                    verdicts = future.result()
                    for path, found in zip(paths, verdicts):
                        results[path] = found
                    meter.advance(len(paths), sum(size for _, size in verdicts))
                elif kind == "layout":
                    path = paths[0]
                    found, spans = future.result()
                    results[path] = (found, sizes[path])
                    if found is not None or not spans:
                        meter.advance(1, sizes[path])
                        continue
                    slices = _slices(spans)
                    slices_left[path] = len(slices)
                    for part in slices:
                        pending[pool.submit(shardfile.spans, str(path), part)] = ("span", [path, part])
                else:
                    path, part = paths
                    found = future.result()
                    if found is not None and results[path][0] is None:
                        results[path] = (found, sizes[path])
                    slices_left[path] -= 1
                    meter.advance(0 if slices_left[path] else 1, sum(s[2] for s in part))
        meter.close()
        return results


def estimates(paths: Sequence[Any]) -> List[int]:
    """Each file's size as the nearest of SAMPLES files spread over the list, at or before it,
    has it (a rank's shards of one kind lie together and are alike): for planning only, a
    verdict never depends on it."""
    step = max(-(-len(paths) // SAMPLES), 1)
    sampled = [file_size(paths[at]) for at in range(0, len(paths), step)]
    return [sampled[at // step] for at in range(len(paths))]


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
