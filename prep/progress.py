"""One line on a running run, from its folder on PREP_ROOT: phase, step k of N, s/step, ETA and
the heartbeat's age (make logs FOLLOW=1, make submit while it follows).

It reads what the launcher writes as it goes: driver.log's `phase NAME started` lines, verl's
metrics lines in training.log (`step:N - ...`, the same lines the watchdog counts, with verl's
own `timing_s/step` when present), heartbeat.json, and the run's target from run.json. Each
read continues where the last one stopped (bounded per call), so following a long run costs
what it adds, not what it holds.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import List, Optional, Tuple

from twgrpo.checks.watch.stall import LogFollower, step_of
from twgrpo.formats import bounded
from twgrpo.run import heartbeat
from twgrpo.run import runrecord
from twgrpo.run.runfolder import RunFolder
from twgrpo.run.runverdict import latest_verdict

PHASE = re.compile(r"^run-two-worker-grpo-v1: phase ([a-z]+) (started|ended with status \d+)")
TIMING = re.compile(r"\btiming_s/step:([0-9]+(?:\.[0-9]+)?)")


class Progress:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.driver = LogFollower(RunFolder(self.run_dir).driver_log)
        self.training = LogFollower(RunFolder(self.run_dir).training_log)
        self.phase = ""
        self.target: Optional[int] = None
        self.steps: List[Tuple[int, float]] = []  # (step, when this reader first saw it)
        self.timing: Optional[float] = None        # verl's own seconds for the last step

    def _target(self) -> Optional[int]:
        if self.target is None:
            try:
                self.target = int(runrecord.profile_values(self.run_dir)["TARGET_STEPS"])
            except (KeyError, TypeError, ValueError):
                return None
        return self.target

    def _lines(self, follower: LogFollower) -> List[str]:
        """New lines of a regular file only (a FIFO or device in its place would block)."""
        try:
            bounded.regular(follower.path)
        except bounded.Unreadable:
            return []
        return follower.lines()

    def _read(self, now: float) -> None:
        for line in self._lines(self.driver):
            match = PHASE.match(line)
            if match:
                self.phase = match.group(1) if match.group(2) == "started" else \
                    f"{match.group(1)} ended"
        for line in self._lines(self.training):
            step = step_of(line)
            if step is not None and (not self.steps or step > self.steps[-1][0]):
                self.steps.append((step, now))
                timing = TIMING.search(line)
                self.timing = float(timing.group(1)) if timing else self.timing

    def seconds_per_step(self) -> Optional[float]:
        """verl's timing_s/step, else the pace this reader saw (from the second step seen on:
        the first one seen holds the model load, or the time before following began)."""
        if self.timing:
            return self.timing
        if len(self.steps) >= 2:
            (first, at), (last, now) = self.steps[0], self.steps[-1]
            return (now - at) / (last - first)
        return None

    def line(self, now: Optional[float] = None) -> str:
        """'phase training · step 3 of 10 · 4.2 s/step · ETA 29 s · heartbeat 2 s ago'."""
        now = time.time() if now is None else now
        self._read(now)
        parts = [f"phase {self.phase or '(not started)'}"]
        target = self._target()
        if self.steps:
            step = self.steps[-1][0]
            parts.append(f"step {step} of {target or '?'}")
            pace = self.seconds_per_step()
            if pace is not None:
                parts.append(f"{pace:.1f} s/step")
                if target and target > step:
                    parts.append(f"ETA {duration(pace * (target - step))}")
        elif target:
            parts.append(f"step 0 of {target}")
        beat = heartbeat.read(self.run_dir)
        if beat:
            age = max(0, int(now - float(beat["beat_epoch"])))
            parts.append(f"heartbeat {age} s ago" + (" (ended)" if beat.get("state") == "ended" else ""))
        return " · ".join(parts)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def ended(run_dir: Path) -> bool:
    """The run has a verdict marker, or its launcher is gone (heartbeat ended or lost)."""
    return any((Path(run_dir) / name).exists() for name in ("SUCCESS", "FAILED")) or \
        heartbeat.liveness(Path(run_dir)) in ("ended", "lost")


def watch(run_dir: Path, say, poll_s: float = 2.0, quiet_s: float = 30.0) -> int:
    """Follow a run from its folder alone (a run started by KubeRay or Slurm: no job server to
    ask): the progress line when it changes, then the verdict. 0 only for SUCCESS."""
    progress, said, said_at = Progress(run_dir), "", 0.0
    while True:
        over = ended(run_dir)
        line = progress.line()
        if line.split(" · heartbeat")[0] != said.split(" · heartbeat")[0] or \
                time.monotonic() - said_at >= quiet_s or over:
            say(line)
            said, said_at = line, time.monotonic()
        if over:
            time.sleep(min(poll_s, 1.0))  # the launcher writes its marker, then ends the beat
            verdict = latest_verdict(Path(run_dir))
            say(verdict.summary + ("" if verdict.status == "SUCCESS" else
                                   f" (make report RUN_ID={Path(run_dir).name})"))
            return 0 if verdict.status == "SUCCESS" else 1
        time.sleep(poll_s)
