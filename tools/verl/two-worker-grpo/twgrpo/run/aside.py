"""A JSON record written by a child process while this one goes on: postflight's
actor-placement.json (7.9 MB at 16,384 ranks, a fifth of a second of JSON) is written while
this process writes verification.json.

The child is forked, so it holds the record without it being sent; it writes it as write_json
does (whole, fsynced, renamed into place) and ends with os._exit, so it never runs this
process's exit handlers nor flushes the output this process has buffered. wait() reaps it.
Where no child could start, or it did not end with 0 (a write that failed, a signal), the
record is written here, so a failure is raised here, as write_json raises it. A process that
runs threads of a library's own (Ray's gRPC) forks none: one of them could hold a lock the child
then waits for (postflight --fan-out passes no items).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Optional

from .records import write_json

FORK_FROM = 4096  # items (ranks) from which a child writes: below, a fork costs more than it saves


class Aside:
    """write_json(path, data), begun in a child process when data holds ``items`` or more."""

    def __init__(self, path: Path, data: Any, items: int) -> None:
        self.path, self.data = Path(path), data
        self.child: Optional[int] = _forked(self.path, data) if items >= FORK_FROM else None

    def wait(self) -> None:
        """Return once the record is written: by the child, or here where it could not."""
        child, self.child = self.child, None
        if child is not None:
            _, status = os.waitpid(child, 0)
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                return
        write_json(self.path, self.data)


def _forked(path: Path, data: Any) -> Optional[int]:
    """The child's pid, or None where none could start. The child writes and ends, always
    through os._exit."""
    fork = getattr(os, "fork", None)
    if fork is None:
        return None
    try:
        with warnings.catch_warnings():  # 3.12 warns of fork beside threads: the child only writes
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = fork()
    except OSError:
        return None
    if pid:
        return pid
    code = 1
    try:
        write_json(path, data)
        code = 0
    finally:
        os._exit(code)  # never back into the parent's code, whatever happened
