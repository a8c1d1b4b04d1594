"""The garbage collector's pace while a subcommand runs.

CPython collects its youngest generation after every 700 new container objects, and now and
then walks every object alive. A view of a 16,384-rank run holds about a million objects that
live to its end (the log's evidence, placement rows, shard verdicts), so that pace walks them
again and again: a fifth of postflight's time on such a run. The verifier makes few reference
cycles, so it collects after YOUNG new objects instead: at most that many cycles wait for a
collection, a bound in memory (tens of MiB at worst), never a leak.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

YOUNG = 100_000


@contextmanager
def paced() -> Iterator[None]:
    """Collections at most every YOUNG new objects inside; the pace before, after."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], YOUNG), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
