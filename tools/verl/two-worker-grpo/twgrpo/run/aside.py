"""A JSON record written by a child process while this one goes on: postflight's
actor-placement.json (7.9 MB at 16,384 ranks, a fifth of a second of JSON) is written while
the checks after rank placement and verification.json run.

This process makes the temporary file beside the record, then forks; the child holds the
record without it being sent, fills the file (fsynced, as write_json does) and ends with
os._exit, so it never runs this process's exit handlers nor flushes what this process has
buffered. wait() reaps it and puts the file in place, as write_json would; where no child could
start (none is forked while SIGCHLD is ignored: the kernel would reap it and free its pid), or
it did not end with 0 (a failed write, a signal, the OOM killer), its file is removed and the
record written here, so a failure is raised here as write_json raises it. cancel() stops a
child that is not waited for (postflight ended on an error or ^C): nothing is put in place and
no file is left behind. A SIGTERM runs no cleanup: the temporary file stays, as a record's
does when any writer is killed while it writes.
A process that runs threads of a library's own (Ray's gRPC) forks none: one of them could hold
a lock the child then waits for (postflight --fan-out passes no items).
"""
from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path
from typing import Any, Optional, Tuple

from .records import discard, fill, install, json_text, temporary_beside, write_json

FORK_FROM = 4096  # items (ranks) from which a child writes: below, a fork costs more than it saves


class Aside:
    """write_json(path, data), begun in a child process when data holds ``items`` or more."""

    def __init__(self, path: Path, data: Any, items: int) -> None:
        self.path, self.data = Path(path), data
        self.child: Optional[int] = None
        self.temporary: Optional[str] = None
        if items >= FORK_FROM:
            self.child, self.temporary = _forked(self.path, data)

    def wait(self) -> None:
        """Return once the record is in place: the child's file, or one written here."""
        if self._reaped() and self.temporary is not None:
            install(self.temporary, self.path)
            self.temporary = None
            return
        discard(self.temporary)
        self.temporary = None
        write_json(self.path, self.data)

    def cancel(self) -> None:
        """Stop the child, if it was not waited for, and remove its file; nothing is written."""
        if self.child is not None:
            try:
                os.kill(self.child, signal.SIGKILL)  # not yet reaped: the pid is still ours
            except OSError:
                pass
        self._reaped()
        discard(self.temporary)
        self.temporary = None

    def _reaped(self) -> bool:
        """Whether the child ended with 0 (its file filled); False without a child. The pid is
        let go only once waitpid returned, so an interrupted wait leaves it to cancel()."""
        if self.child is None:
            return False
        try:
            _, status = os.waitpid(self.child, 0)
        except ChildProcessError:  # reaped by another: how it ended is unknown
            self.child = None
            return False
        self.child = None
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _forked(path: Path, data: Any) -> Tuple[Optional[int], Optional[str]]:
    """The child's pid and the temporary file it fills, or (None, None) where none could start
    (the record is then written here, where the same failure is reported)."""
    fork = getattr(os, "fork", None)
    if fork is None or signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        return None, None  # with SIGCHLD ignored the kernel reaps the child, and its pid is free
    try:
        fd, temporary = temporary_beside(path)
    except OSError:
        return None, None
    try:
        with warnings.catch_warnings():  # 3.12 warns of fork beside threads: the child only writes
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = fork()
    except OSError:
        os.close(fd)
        discard(temporary)
        return None, None
    if pid == 0:
        code = 1
        try:
            fill(fd, json_text(data))
            code = 0
        finally:
            os._exit(code)  # never back into the parent's code, whatever happened
    os.close(fd)
    return pid, temporary

