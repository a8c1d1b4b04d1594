"""A run's verdict from its latest records: SUCCESS only while the records prove it.

One function, so that every reader (make runs, report, postflight, audit, submit, logs) judges a
run the same way (tests/py/functional/test_one_verdict_property.py holds them to it on real runs' folders).
The markers SUCCESS and FAILED say what happened when they were written; verification.json is rewritten by
every postflight, so it is the latest word, and a marker that disagrees with it is a conflict.
A SUCCESS marker alone proves nothing (anyone can write one): SUCCESS stands only beside the
launcher's record of every phase (inputs and preflight passed, driver.log's line that training
ended with status 0, a resume record for a resumed run) and a verification.json holding every
postflight check, each passed. A folder whose records do not add up is UNPROVEN.

A resumed run (run.json names its lineage) whose resume.json is missing or did not pass is
UNPROVEN whether or not SUCCESS exists: the lineage it trained from cannot be proven, and every
view (runs, report, postflight, audit, submit) says so with the same finding, POST-E066.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ..formats import bounded
from . import glance, runrecord, typed
from .findings import Finding, finding
from .runfolder import NAME, RunFolder

# Every check postflight runs, in its order (tests/py/unit/test_run_verdict.py holds it equal to
# checks.postflight.CHECKS): a verification.json without all of them passed proves no SUCCESS.
POSTFLIGHT_CHECKS = ("training-log", "fatal-markers", "completion-markers", "resolved-command",
                     "inputs-record", "inputs-unchanged", "launcher-records", "rank-placement", "tensorboard-scalars",
                     "validation", "rollouts", "checkpoint", "resume", "fatal-causes",
                     "scalars-finite", "reward-sanity", "stall")
PHASE_PREFIX = b"run-two-worker-grpo-v1: phase "
PHASE_LINE = re.compile(r"^run-two-worker-grpo-v1: phase ([a-z]+) ended with status (\d+) after ")
LAST_TAIL = 16 << 20  # the most of driver.log's end held at once (make runs); past it, streamed

PHASE_RECORDS = (("inputs", NAME.inputs_json), ("preflight", NAME.preflight_json),
                 ("postflight", NAME.verification_json))


SUPERSEDED = "SUCCESS.superseded-"  # where a failing re-run moves an earlier SUCCESS (runfolder)


@dataclasses.dataclass
class Verdict:
    status: str          # SUCCESS, FAILED, UNPROVEN, INCOMPLETE, PREEMPTED or RUNNING
    summary: str         # one line for people
    conflicts: List[str] = dataclasses.field(default_factory=list)
    superseded: List[str] = dataclasses.field(default_factory=list)  # earlier SUCCESS markers
    findings: List[Finding] = dataclasses.field(default_factory=list)  # why it is UNPROVEN


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
        text = bounded.read_text(RunFolder(run_dir).failed, 64 << 10)
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else {"problem": str(exc)}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def success_text(run_dir: Path) -> Optional[str]:
    try:
        return bounded.read_text(RunFolder(run_dir).success, 64 << 10).strip() or "(empty)"
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else f"({exc})"


def record_status(run_dir: Path, name: str) -> Optional[str]:
    """passed, failed, unreadable, or None when the record does not exist (read within the
    run's record budget, run/budget.py, as the report reads it)."""
    size = runrecord.size(run_dir)
    try:
        record = bounded.read_object(run_dir / name, size.record_bytes, size.record_memory)
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else "unreadable"
    status = record.get("status")
    return status if status in ("passed", "failed") else "unreadable"


def latest_verdict(run_dir: Path, status_of: Callable[[Path, str], Optional[str]] = None,
                   whole: Optional[bool] = None) -> Verdict:
    """status_of reads a record's status (default record_status: the whole record; make runs
    passes a glance at its ends). whole: the proof of a SUCCESS is read from whole records
    (default: when status_of is not given); otherwise from their ends only (make runs)."""
    verdict = _judge(run_dir, status_of or record_status, status_of is None if whole is None else whole)
    verdict.superseded = superseded_markers(run_dir)
    return _stopped_or_running(run_dir, verdict)


def _stopped_or_running(run_dir: Path, verdict: Verdict) -> Verdict:
    """PREEMPTED or RUNNING where the run stopped early or still beats (run/preemption.py)."""
    from . import preemption
    # A SUCCESS a failing re-run moved aside was still the launcher's verdict: the run ended.
    ended_with_verdict = success_text(run_dir) is not None or bool(verdict.superseded)
    return preemption.refine(run_dir, verdict, failed_fields(run_dir), ended_with_verdict)


def _judge(run_dir: Path, status_of: Callable[[Path, str], Optional[str]], whole: bool) -> Verdict:
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
    lost = resume_record_finding(run_dir, status_of, whole)
    if lost is not None and (success is not None or post == "passed"):
        # before the SUCCESS rules, so that a postflight that passes cannot make it a SUCCESS
        return Verdict("UNPROVEN", f"UNPROVEN: {lost.message}", conflicts, findings=[lost])
    if success is not None and post == "passed":
        gaps = proof_gaps(run_dir, statuses, status_of, whole)
        if gaps:
            return Verdict("UNPROVEN", "UNPROVEN: SUCCESS exists but the records do not prove it: "
                           + "; ".join(gaps), conflicts)
        return Verdict("SUCCESS", "SUCCESS: every check of every phase passed", conflicts)
    if success is not None:
        conflicts.append(f"SUCCESS exists but verification.json is {post or 'missing'}")
        return Verdict("INCOMPLETE", "INCOMPLETE: SUCCESS without a readable verification.json; "
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


def phase_statuses(run_dir: Path, tail: Optional[int] = None) -> Dict[str, int]:
    """Each phase's exit status as the launcher wrote it in driver.log (the last line wins);
    with tail, only the last tail bytes are read (the launcher's last lines: make runs)."""
    found: Dict[str, int] = {}
    path = RunFolder(run_dir).driver_log
    try:
        lines = bounded.tail_lines(path, tail, PHASE_PREFIX) if tail else \
            bounded.lines_starting(path, PHASE_PREFIX)
        for line in lines:
            match = PHASE_LINE.match(line)
            if match and len(match.group(2)) <= 3:
                found[match.group(1)] = int(match.group(2))
    except bounded.Unreadable:
        return {}
    return found


def ended_from_the_end(run_dir: Path) -> Dict[str, int]:
    """phase_statuses from the end of driver.log back to training's line (make runs): a growing
    tail, from glance.TAIL, for a healthy run's is followed only by postflight's output, however
    long that is (a node's failed slice is a line of it); past LAST_TAIL bytes without one, the
    whole file, streamed, as the report reads it."""
    try:
        size = os.stat(RunFolder(run_dir).driver_log).st_size
    except OSError:
        size = 0  # phase_statuses says what it finds, or nothing
    tail = glance.TAIL
    while True:
        ended = phase_statuses(run_dir, tail)
        if "training" in ended or tail >= size:
            return ended
        if tail >= LAST_TAIL:
            return phase_statuses(run_dir)
        tail *= 4


def postflight_gaps(run_dir: Path, whole: bool = True) -> List[str]:
    """Postflight checks verification.json lacks or did not pass (a partial list proves less).
    whole=False (make runs) reads only the record's passed_checks line, at one of its ends, of a
    record larger than the glance reads whole (glance.WHOLE); a smaller one's checks list."""
    path = RunFolder(run_dir).verification_json
    try:
        if whole or _read_whole_by_a_glance(path):  # then its checks, as every view takes them
            size = runrecord.size(run_dir)
            checks = bounded.read_object(path, size.record_bytes, size.record_memory).get("checks")
            passed = {c.get("name") for c in checks if isinstance(c, dict) and
                      c.get("status") == "passed"} if isinstance(checks, list) else set()
        else:
            listed = glance.fields(path, ("passed_checks",), {"passed_checks": str},
                                   runrecord.size(run_dir).record_bytes)["passed_checks"]
            passed = set((listed or "").split(","))
    except (bounded.Unreadable, ValueError) as exc:
        return [f"verification.json is {exc}"]
    lacking = [name for name in POSTFLIGHT_CHECKS if name not in passed]
    if lacking:
        return [f"verification.json lacks passing checks {', '.join(lacking)} (run make "
                "postflight to judge the run again)"]
    return []


def _read_whole_by_a_glance(path: Path) -> bool:
    try:
        return os.stat(path).st_size <= glance.WHOLE
    except OSError:
        return False


def proof_gaps(run_dir: Path, statuses: Dict[str, Optional[str]],
               status_of: Callable[[Path, str], Optional[str]] = record_status,
               whole: bool = True) -> List[str]:
    """What the launcher's records lack for SUCCESS; empty when every phase is proven."""
    gaps = [f"{name} is {statuses[phase] or 'missing'}, not passed"
            for phase, name in PHASE_RECORDS[:2] if statuses[phase] != "passed"]
    ended = phase_statuses(run_dir) if whole else ended_from_the_end(run_dir)
    if ended.get("training") != 0:
        gaps.append("driver.log has no line of the launcher saying training ended with status 0"
                    if "training" not in ended else
                    f"driver.log says training ended with status {ended['training']}")
    lost = resume_record_finding(run_dir, status_of, whole)
    if lost is not None:
        gaps.append(lost.message)
    problem = run_record_problem(run_dir, whole)
    if problem:
        gaps.append(problem)
    return gaps + postflight_gaps(run_dir, whole)


def run_record_problem(run_dir: Path, whole: bool = True) -> Optional[str]:
    """Why run.json, present, cannot be read as a record (the profile the run was judged with
    and its lineage live there); None when it reads or does not exist. whole=False (make runs)
    parses it up to glance.WHOLE and checks a larger one's ends only (glance.intact): a record
    cut short is caught by both; damage inside a large one only by the whole reading."""
    size = runrecord.size(run_dir)
    try:
        if whole:
            runrecord.read(run_dir, size.record_bytes, size.record_memory)
        else:
            runrecord.intact(run_dir)
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else f"run.json is {exc}"
    return None


def resume_record_finding(run_dir: Path, status_of: Callable[[Path, str], Optional[str]] = None,
                          whole: bool = True) -> Optional[Finding]:
    """POST-E066 when the run was resumed (run.json names a lineage, or resume.json exists)
    but resume.json is missing or did not pass; None otherwise. The same answer for a whole
    reading and a glance (make runs), so no view can call such a run a SUCCESS."""
    try:
        resume = (status_of or record_status)(run_dir, NAME.resume_json)
    except KeyError:  # a reader that knows only the phase records
        resume = record_status(run_dir, NAME.resume_json)
    if resume == "passed" or (resume is None and not resumed(run_dir, whole)):
        return None
    return finding("POST-E066", str(RunFolder(run_dir).resume_json),
                   f"run.json names the run this one resumed from, but resume.json is "
                   f"{resume or 'missing'}, not passed: the checkpoint it started from cannot be "
                   "proven")


def resumed(run_dir: Path, whole: bool = True) -> bool:
    """run.json names a lineage. whole=False (make runs) glances at the record (glance.py), which
    finds the resume object at any record size."""
    try:
        if whole:  # within the run's record budget, as the glance reads it
            size = runrecord.size(run_dir)
            return runrecord.read(run_dir, size.record_bytes, size.record_memory).get("resume") \
                is not None
        return runrecord.glance_fields(run_dir, ("resume",), {"resume": typed.ANY})["resume"] \
            is not None
    except (bounded.Unreadable, ValueError):
        return False
