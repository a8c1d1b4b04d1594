"""A run's verdict from its latest records: SUCCESS only while the latest postflight passed.

One function, so that every reader (report, runs) judges a run the same way. The markers
SUCCESS and FAILED say what happened when they were written; verification.json is rewritten by
every postflight, so it is the latest word, and a marker that disagrees with it is a conflict.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ..formats import bounded

PHASE_RECORDS = (("inputs", "inputs.json"), ("preflight", "preflight.json"),
                 ("postflight", "verification.json"))


SUPERSEDED = "SUCCESS.superseded-"  # where a failing re-run moves an earlier SUCCESS (runfolder)


@dataclasses.dataclass
class Verdict:
    status: str          # SUCCESS, FAILED, INCOMPLETE, PREEMPTED or RUNNING
    summary: str         # one line for people
    conflicts: List[str] = dataclasses.field(default_factory=list)
    superseded: List[str] = dataclasses.field(default_factory=list)  # earlier SUCCESS markers


def superseded_markers(run_dir: Path) -> List[str]:
    """Earlier SUCCESS markers a failing re-run moved aside, oldest first (at most 20 named)."""
    try:
        names = sorted(p.name for p in Path(run_dir).glob(SUPERSEDED + "*"))
    except OSError:
        return []
    return names[:20]


def failed_fields(run_dir: Path) -> Optional[Dict[str, str]]:
    """FAILED's key=value lines, or None when there is no FAILED."""
    try:
        text = bounded.read_text(run_dir / "FAILED", 64 << 10)
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else {"problem": str(exc)}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def success_text(run_dir: Path) -> Optional[str]:
    try:
        return bounded.read_text(run_dir / "SUCCESS", 64 << 10).strip() or "(empty)"
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else f"({exc})"


def record_status(run_dir: Path, name: str) -> Optional[str]:
    """passed, failed, unreadable, or None when the record does not exist."""
    try:
        record = bounded.read_object(run_dir / name)
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else "unreadable"
    status = record.get("status")
    return status if status in ("passed", "failed") else "unreadable"


def latest_verdict(run_dir: Path, status_of: Callable[[Path, str], Optional[str]] = None) -> Verdict:
    """status_of reads a record's status (default record_status: the whole record; make runs
    passes a glance at its ends)."""
    verdict = _judge(run_dir, status_of or record_status)
    verdict.superseded = superseded_markers(run_dir)
    return _stopped_or_running(run_dir, verdict)


def _stopped_or_running(run_dir: Path, verdict: Verdict) -> Verdict:
    """PREEMPTED or RUNNING where the run stopped early or still beats (run/preemption.py)."""
    from . import preemption
    return preemption.refine(run_dir, verdict, failed_fields(run_dir),
                             success_text(run_dir) is not None)


def _judge(run_dir: Path, status_of: Callable[[Path, str], Optional[str]]) -> Verdict:
    success, failed = success_text(run_dir), failed_fields(run_dir)
    statuses = {phase: status_of(run_dir, name) for phase, name in PHASE_RECORDS}
    post = statuses["postflight"]
    conflicts = []
    if success is not None and failed is not None:
        conflicts.append("both SUCCESS and FAILED exist; FAILED wins")
    if failed is not None:
        where = failed.get("phase", "?")
        signal = failed.get("signal", "")
        text = (f"FAILED in phase {where} (exit status {failed.get('exit_status', '?')}"
                f"{', signal ' + signal if signal and signal != 'none' else ''}, "
                f"{failed.get('time', 'time unknown')})")
        if "problem" in failed:
            text = f"FAILED (the marker is {failed['problem']})"
        if post == "passed":
            conflicts.append("a later postflight passed, but FAILED stays: a run that failed once "
                             "is not turned into a success")
        return Verdict("FAILED", text, conflicts)
    if post == "failed":
        if success is not None:
            conflicts.append(f"SUCCESS (written {success}) is superseded by the latest postflight, "
                             "which failed")
        return Verdict("FAILED", "FAILED: the latest postflight found problems", conflicts)
    if success is not None and post == "passed":
        missing = [p for p in ("inputs", "preflight") if statuses[p] != "passed"]
        return Verdict("SUCCESS", "SUCCESS: every check of every phase passed" if not missing else
                       f"SUCCESS: postflight passed (no passing {' or '.join(missing)} record)",
                       conflicts)
    if success is not None:
        conflicts.append(f"SUCCESS exists but verification.json is {post or 'missing'}")
        return Verdict("INCOMPLETE", "UNPROVEN: SUCCESS without a readable verification.json; "
                       "run make postflight to judge again", conflicts)
    if post == "passed":
        return Verdict("INCOMPLETE", "postflight passed but SUCCESS is missing; run make postflight "
                       "to write it", conflicts)
    failing = [phase for phase, status in statuses.items() if status == "failed"]
    if failing:
        return Verdict("FAILED", f"FAILED: phase {failing[0]} failed (no FAILED marker: the "
                       "launcher was stopped before it could write one)", conflicts)
    return Verdict("INCOMPLETE", "no SUCCESS or FAILED yet: the run is going on, or it stopped "
                   "without a trace", conflicts)
