"""Postflight's long reads begun in worker processes: while this process scans the training log,
workers read the TensorBoard event files and the rollout files of a long run (a 100,000-step
run's scalars and rollouts take a core-second each, one after the other without them), and a
large run's preflight.json (19 MB at 2,048 nodes: a third of a second of JSON).

Only where a file is read changes, never what is found: a Task no worker has begun when its
answer is asked for is taken back and run here, and so is the task of a lost worker. The
workers are the shard check's when it started some (checkpoint/ahead.py), else processes of
their own, started only for a long run or a large event file.
"""
from __future__ import annotations

from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from typing import Any, Callable, List, Optional

from ..checkpoint import ahead
from ...formats import pools

OWN_WORKERS_STEPS = 1024  # a run of at least this many steps starts workers of its own
OWN_WORKERS_BYTES = 8 << 20  # ... and so do event files (or a preflight.json) of this many bytes

Submit = Callable[..., Any]  # pool.submit: a Future, or None where no worker takes it


class Task:
    """fn(*args) handed to a worker through submit (None: run here when asked)."""

    def __init__(self, submit: Optional[Submit], fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args, self.has, self.value = fn, args, False, None
        self.taken_back = False  # run here because no worker had begun it
        self.future = None
        self.hand(submit)

    def hand(self, submit: Optional[Submit]) -> None:
        """Hand it to a worker through submit, unless it is handed or answered already."""
        if submit is not None and self.future is None and not self.has:
            self.future = submit(self.fn, *self.args)

    def handed(self) -> bool:
        return self.future is not None

    def take(self, wait: bool = True) -> bool:
        """True once the answer is in .value: the worker's, or fn(*args) run here when no
        worker has begun it or its worker was lost; False only when wait is False and a worker
        is still on it. An exception of fn itself is raised here, as if it ran here."""
        if self.has:
            return True
        future = self.future
        if future is not None and not future.cancel():  # a worker has begun it
            if not wait and not future.done():
                return False
            try:
                self.value, self.has = future.result(), True
            except (BrokenProcessPool, CancelledError):
                pass
        if not self.has:
            self.value, self.has = self.fn(*self.args), True
        self.future = None
        return True

    def take_back(self) -> bool:
        """Run it here now if no worker has begun it (True); False when one has, or it is
        answered already."""
        if self.has or (self.future is not None and not self.future.cancel()):
            return False
        self.future, self.taken_back = None, True
        self.value, self.has = self.fn(*self.args), True
        return True

    def answer(self) -> Any:
        self.take()
        return self.value


def answers(tasks: List[Task]) -> List[Any]:
    """Every task's answer, in order: first the tasks no worker has begun are run here, from
    the last (workers take them from the first, so the ones before a begun task are begun);
    those answered already are passed over."""
    for task in reversed(tasks):
        if not task.has and not task.take_back():
            break
    return [task.answer() for task in tasks]


class Workers:
    """Worker processes of postflight's own (none of the shard check's were started)."""

    def __init__(self, count: int) -> None:
        self.pool: Optional[ProcessPoolExecutor] = ProcessPoolExecutor(max_workers=count)
        self.handed: List[Any] = []  # the futures handed out (pools.stop cancels them on 3.8)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A Future, or None when the workers are closed or lost (the task then runs here)."""
        if self.pool is None:
            return None
        try:
            future = self.pool.submit(fn, *args)
        except RuntimeError:  # BrokenProcessPool (a worker died), or a pool shut down
            return None
        self.handed.append(future)
        return future

    def close(self) -> None:
        """Stop the workers: what they have not begun is dropped (Task then runs it here)."""
        if self.pool is not None:
            pools.stop(self.pool, self.handed)
            self.pool = None


def own_workers(steps: int, file_bytes: int, jobs: int) -> Optional[Workers]:
    """Workers for a run of ``steps`` steps whose event files in all, or preflight.json, hold
    ``file_bytes``, with ``jobs`` tasks; None for a short, small run, a one-core box, or where
    processes cannot start."""
    if steps < OWN_WORKERS_STEPS and file_bytes < OWN_WORKERS_BYTES:
        return None
    count = ahead.workers(jobs)
    if count < 1:
        return None
    try:  # they fork at the first task, handed out before this process reads the log
        return Workers(count)
    except (OSError, ImportError, NotImplementedError):
        return None
