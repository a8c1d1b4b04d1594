"""The run's phases for the report: each launcher phase's start, duration and exit status from
driver.log's own lines, joined with the phase records (inputs.json, preflight.json, ...) and
FAILED.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..formats import bounded
from ..run.findings import Finding, finding
from ..run.humane import parse_time
from ..run.runverdict import failed_fields

LAUNCHER_PREFIX = b"run-two-worker-grpo-v1: phase "
LAUNCHER_LINE = re.compile(r"^run-two-worker-grpo-v1: phase ([a-z]+) (started (\S+)|ended with "
                           r"status (\d+) after (\d+) s)$")


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
    phases: Dict[str, Phase] = {}
    try:
        for line in bounded.lines_starting(run_dir / "driver.log", LAUNCHER_PREFIX):
            match = LAUNCHER_LINE.match(line)
            if not match:
                continue
            phase = phases.setdefault(match.group(1), Phase(match.group(1)))
            if match.group(3):
                phase.started, phase.status = match.group(3), "running"
            else:
                phase.exit_status, phase.seconds = int(match.group(4)), int(match.group(5))
                phase.status = "passed" if phase.exit_status == 0 else f"exit {phase.exit_status}"
    except bounded.Unreadable as exc:
        problems.append(finding("RPT-E003", "driver.log", f"{exc}: no phase timeline"))
        return phases
    if not phases:
        problems.append(finding("RPT-E003", "driver.log", "holds no 'phase ... started' line"))
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
