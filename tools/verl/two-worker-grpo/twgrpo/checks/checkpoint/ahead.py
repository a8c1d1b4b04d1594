"""The shard check started ahead: postflight starts it before its first check, so worker
processes read the checkpoint (and a short run's rollouts, postflight/rollouts.py) while this
process reads the log and the records; the checkpoint check then takes their verdicts. A
16,384-rank run has 49,152 shards: their check and the rest of postflight each take a
core-second, one after the other without this.

More than shards.STAT_ALL files (49,152 shards at 16,384 ranks) are handed to the workers
without a stat of each here first: the workers fork at once and take postflight's first tasks
(startreads.py) while this process goes on, and each file's size comes back with its verdict.

When the check is asked for, the batches no worker has begun yet are checked by this
process (shards.Parallel.take_back) while the workers finish theirs: on two cores the asking
process would otherwise wait idle.

Only when the files are read changes, never a verdict: the workers run shards.Parallel, as
shards.check_files does, and anything that keeps them from answering (no worker processes, one
killed, other paths asked for) leaves the check to shards.check_files when it is asked for. The
progress line stays quiet until then: the other checks print their lines meanwhile.
"""
from __future__ import annotations

import io
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, Optional, Sequence, TextIO, Tuple

from . import shards

Problem = shards.Problem


class Ahead:
    """shards.check_files(paths), begun now in ``count`` worker processes; check_files()
    answers it. With count < 1 or little to read nothing starts, and check_files() checks.
    ``first``: tasks handed to the workers before the shards (shards.Parallel), where they start."""

    def __init__(self, paths: Sequence[Any], count: int, first: Sequence[Any] = ()) -> None:
        self.paths = list(paths)
        self.found: Optional[Dict[Any, Tuple[Problem, int]]] = None
        self.failed: Optional[BaseException] = None
        self.run: Optional[shards.Parallel] = None
        self.thread: Optional[threading.Thread] = None
        if count < 1:
            return
        sizes: Optional[Dict[Any, int]] = None  # more than STAT_ALL files: none stated first
        if len(self.paths) <= shards.STAT_ALL:
            sizes = {p: shards.file_size(p) for p in self.paths}
            if sum(sizes.values()) < shards.SERIAL_BELOW:
                return
        self.run = _started(count, first)
        if self.run is None:
            return  # no worker processes here: checked alone when asked for
        try:
            if sizes is None:
                self.meter = shards.Progress(io.StringIO(), len(self.paths), None)
                self.run.hand_unstated(self.paths, self.meter)
            else:
                self.meter = shards.Progress(io.StringIO(), len(sizes), sum(sizes.values()))
                self.run.hand_files(sizes, self.meter)
        except (OSError, ImportError, NotImplementedError, RuntimeError):
            self.run = None  # a worker lost: checked alone when asked (first's tasks run here too)
            return
        self.thread = threading.Thread(target=self._collect, name="shards-ahead", daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        try:
            self.found = self.run.collect_workers() if self.run is not None else None
        except BaseException as exc:  # BrokenProcessPool and the like: checked again when asked
            self.failed = exc

    def submit(self, fn: Callable[..., Any], *args: Any) -> Optional[Future]:
        """fn(*args) in one of the workers, after the shards; None where none were started or
        they are done (the caller then runs it itself)."""
        if self.run is None:
            return None
        try:
            return self.run.pool.submit(fn, *args)
        except RuntimeError:  # the pool has shut down: every shard was checked already
            return None

    def check_files(self, paths: Sequence[Any], sizes: Optional[Dict[Any, int]] = None,
                    progress: Optional[TextIO] = None) -> Dict[Any, Problem]:
        """shards.check_files's answer: the workers' verdicts when these are the paths they
        were given and they all answered, else the check run now."""
        if self.thread is None or list(paths) != self.paths:
            return shards.check_files(paths, progress=progress, sizes=sizes)
        stream = progress if progress is not None else sys.stderr
        self.meter.stream, self.meter.on = stream, bool(getattr(stream, "isatty", lambda: False)())
        taken = self.run.take_back()  # what no worker has begun yet is checked here meanwhile
        self.thread.join()
        if self.found is None:
            return shards.check_files(paths, progress=progress, sizes=sizes)
        found = self.run.complete({**self.found, **taken})
        if sizes is not None:
            sizes.update((path, size) for path, (problem, size) in found.items() if problem is None)
        return {path: found[path][0] for path in self.paths}


def _started(count: int, first: Sequence[Any]) -> Optional[shards.Parallel]:
    """The workers, forked here in the main thread before the collecting thread exists, with
    first's tasks handed to them; None where no worker process can start."""
    for stream in (sys.stdout, sys.stderr):  # a worker flushes what it inherits when it ends
        stream.flush()
    try:
        return shards.Parallel(count, first)
    except (OSError, ImportError, NotImplementedError):
        return None


def workers(files: int) -> int:
    """Worker processes for a check started ahead: one core is left to this process."""
    return shards.workers(files) - 1
