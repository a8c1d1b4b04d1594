"""The checkpoint check's progress: files and bytes done, the rate and the time left, on a
terminal as one line rewritten in place, in a job's log as whole lines, less often as the check
goes on (shards.py).
"""
from __future__ import annotations

import time
from typing import Optional, TextIO


LOG_EVERY = 30.0  # seconds between progress lines in a log (a check shorter than this prints none)
LOG_DOUBLING = 10  # lines a log gets at one spacing before the spacing doubles
LOG_LINES = 100  # lines a log gets at most, the last included: a day's check prints about 80


class Progress:
    """Files and bytes done (of total, None where the files were not stated first), rate,
    time left: on a terminal one line rewritten at most twice a
    second; elsewhere (a job's log) a whole line every LOG_EVERY seconds, the first after
    LOG_EVERY seconds, twice that after LOG_DOUBLING lines and so on, and a last one at the end
    when any was printed, so a log of a long check stays short (LOG_LINES at most)."""

    def __init__(self, stream: TextIO, files: int, total: Optional[int], clock=time.monotonic) -> None:
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
        if self.total is None:  # the files' sizes not known ahead: the time left by files
            left = (self.files - self.done_files) * elapsed / self.done_files if self.done_files else 0
            return (f"checkpoint: {self.done_files}/{self.files} files, {_gib(self.done_bytes)} GiB, "
                    f"{rate / (1 << 20):.0f} MiB/s, {left:.0f} s left")
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
