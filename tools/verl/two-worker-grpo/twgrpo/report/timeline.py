"""The run's phases for the report: each launcher phase's start, duration and exit status from
driver.log's own lines, joined with the phase records (inputs.json, preflight.json, ...) and
FAILED.
"""
from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..formats import bounded
from ..run.findings import Finding, finding
from ..run.humane import parse_time
from ..run.runverdict import failed_fields
from ..run.typed import utc_time
from ..run.runfolder import NAME, RunFolder

LAUNCHER_PREFIX = b"run-two-worker-grpo-v1: phase "
LAUNCHER_LINE = re.compile(r"^run-two-worker-grpo-v1: phase ([a-z]+) (started (\S+)|ended with "
                           r"status (\d+) after (\d+) s)$", re.ASCII)
PHASES = ("resume", "inputs", "preflight", "training", "postflight")  # what the launcher runs
MAX_SECONDS = 10 ** 9  # a phase's duration, in seconds (about 31 years)
_NAME_AT = len(LAUNCHER_PREFIX)


class BadLine(ValueError):
    """A launcher phase line whose phase, time or number is not what the launcher writes."""


def phase_line(line: str) -> Optional[Tuple[str, Optional[datetime], Optional[int], Optional[int]]]:
    """(phase, start, exit status, seconds) of a launcher phase line, None for another line;
    BadLine if it is one but malformed: an unknown phase, a start not in UTC or outside the years
    2000..2199, an exit status over 255 or a duration over MAX_SECONDS."""
    match = LAUNCHER_LINE.match(line)
    if not match:
        if line.startswith(LAUNCHER_PREFIX.decode()):
            raise BadLine("not a 'started <time>' or 'ended with status N after S s' line")
        return None
    name = match.group(1)
    if name not in PHASES:
        raise BadLine(f"unknown phase {name[:40]!r}")
    if match.group(3):
        start = utc_time(match.group(3))
        if start is None:
            raise BadLine(f"start {match.group(3)[:40]!r} is not a UTC time (…Z) of 2000..2199")
        return name, start, None, None
    status, seconds = match.group(4), match.group(5)
    if len(status) > 3 or int(status) > 255 or len(seconds) > 10 or int(seconds) > MAX_SECONDS:
        raise BadLine(f"exit status {status[:20]} or {seconds[:20]} s is out of range")
    return name, None, int(status), int(seconds)


def _bad_lines(count: int, first: str) -> Finding:
    shown = first if len(first) <= 160 else first[:157] + "..."
    return finding("RPT-E021", NAME.driver_log, f"{count} launcher phase line(s) are malformed and "
                   f"were left out; the first: {shown}")


@dataclasses.dataclass
class Phase:
    name: str
    status: str = "not run"      # passed, failed, running, not run, or exit N for training
    started: str = ""
    seconds: Optional[int] = None
    exit_status: Optional[int] = None
    checks: int = 0
    failed_checks: List[str] = dataclasses.field(default_factory=list)
    checked_at: str = ""


def phase_timeline(run_dir: Path, problems: List[Finding]) -> Dict[str, Phase]:
    """Each launcher phase's start, duration and exit status, from driver.log's own lines."""
    phases: Dict[str, Phase] = {}  # only the launcher's own PHASES: bounded whatever the log says
    bad, first = 0, ""
    try:
        for line in bounded.lines_starting(RunFolder(run_dir).driver_log, LAUNCHER_PREFIX):
            if line[_NAME_AT:line.find(" ", _NAME_AT)] not in PHASES:  # cheap: no regex, no raise
                bad, first = bad + 1, first or f"unknown phase: {line}"
                continue
            try:
                parsed = phase_line(line)
            except BadLine as exc:
                bad, first = bad + 1, first or f"{exc}: {line}"
                continue
            if parsed is None:
                continue
            name, start, status, seconds = parsed
            phase = phases.setdefault(name, Phase(name))
            if start is not None:
                phase.started, phase.status = start.strftime("%Y-%m-%dT%H:%M:%SZ"), "running"
            else:
                phase.exit_status, phase.seconds = status, seconds
                phase.status = "passed" if phase.exit_status == 0 else f"exit {phase.exit_status}"
    except bounded.Unreadable as exc:
        problems.append(finding("RPT-E003", NAME.driver_log, f"{exc}: no phase timeline"))
        return phases
    if bad:
        problems.append(_bad_lines(bad, first))
    if not phases:
        problems.append(finding("RPT-E003", NAME.driver_log, "holds no 'phase ... started' line"))
    return phases


def phases_of(run_dir: Path, records: Dict[str, Dict[str, Any]],
              problems: List[Finding]) -> List[Phase]:
    timeline = phase_timeline(run_dir, problems)
    failed = failed_fields(run_dir) or {}
    result = []
    names = ("resume",) * ("resume" in timeline) + ("inputs", "preflight", "training", "postflight")
    for name in names:
        phase = timeline.get(name, Phase(name))
        record = records.get(name, {})
        checks = record.get("checks") if isinstance(record.get("checks"), list) else []
        if record:
            phase.checks = len(checks)
            phase.failed_checks = [str(c.get("name")) for c in checks
                                   if isinstance(c, dict) and c.get("status") == "failed"]
            phase.checked_at = str(record.get("checked_at", ""))
            if record.get("status") in ("passed", "failed"):
                phase.status = record["status"]  # the latest record is the latest word
        if phase.status == "running" and failed.get("phase") == name:
            phase.status = f"stopped (exit {failed.get('exit_status', '?')})"
            phase.seconds = _seconds_until(phase.started, failed.get("time"))
        result.append(phase)
    return result


def _seconds_until(started: str, end: Optional[str]) -> Optional[int]:
    """A stopped phase's duration: from its start line to FAILED's time."""
    begin, stop = parse_time(started), parse_time(end)
    return int((stop - begin).total_seconds()) if begin and stop and stop >= begin else None
