"""A run's place in its resume chain, for make runs and the report: its parent (the run and
step it resumed from), its children (runs that resumed from it), how long it really lasted
(to its last sign of life), what it trained itself and what it inherited, and the parent's
scalars to draw before its own.

Bounded: run.json and FAILED are small reads, driver.log is read by its launcher lines or its
last 256 KiB, at most MAX_RUNS sibling folders and MAX_CHAIN ancestors are looked at.
"""
from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..formats import bounded, tfevents
from ..run import heartbeat
from ..run.humane import parse_time
from ..run.profile_keys import NAME as RUN_ID
from ..run.runverdict import failed_fields
from .timeline import LAUNCHER_PREFIX, BadLine, phase_line, phase_timeline

MAX_RUNS = 5000
MAX_CHAIN = 100


def run_record(run_dir: Path) -> Dict[str, Any]:
    try:
        return bounded.read_object(Path(run_dir) / "run.json", 1 << 20)
    except bounded.Unreadable:
        return {}


def parent_of(run: Dict[str, Any]) -> Optional[Tuple[str, int]]:
    """(parent RUN_ID, step) from a run.json's resume record, None for a fresh run."""
    resume = run.get("resume")
    if not isinstance(resume, dict):
        return None
    parent, step = resume.get("from_run_id"), resume.get("step")
    if not isinstance(parent, str) or not RUN_ID.match(parent) or isinstance(step, bool) \
            or not isinstance(step, int):
        return None
    return parent, step


def children_of(runs_root: Path, run_id: str) -> List[Tuple[str, int]]:
    """Runs beside this one that resumed from it: (RUN_ID, step), by RUN_ID."""
    found = []
    try:
        entries = sorted(Path(runs_root).iterdir())[:MAX_RUNS]
    except OSError:
        return []
    for entry in entries:
        if entry.name == run_id or entry.is_symlink() or not entry.is_dir():
            continue
        parent = parent_of(run_record(entry))
        if parent and parent[0] == run_id:
            found.append((entry.name, parent[1]))
    return found


def _launcher_times(run_dir: Path) -> List[datetime]:
    """Every start and end of a launcher phase in the last 256 KiB of driver.log."""
    try:
        tail = bounded.tail_lines(Path(run_dir) / "driver.log", 256 << 10, LAUNCHER_PREFIX)
    except bounded.Unreadable:
        return []
    times = []
    started: Dict[str, datetime] = {}
    for line in tail:
        try:
            parsed = phase_line(line)
        except BadLine:  # the report names them (RPT-E021)
            continue
        if parsed is None:
            continue
        name, start, _, seconds = parsed
        if start is not None:
            started[name] = start
            times.append(start)
        elif name in started and seconds is not None:
            times.append(started[name] + timedelta(seconds=seconds))
    return times


PARENT_TAIL = 64 << 10
# from_run_id, then (sorted keys) the snapshot the resume phase made, when there is one, then step
_PARENT = re.compile(rb'\n    "from_run_id": "([A-Za-z0-9][A-Za-z0-9._-]{0,127})",\n'
                     rb'(?:    "snapshot": "[^"\n]{0,4096}",\n)?    "step": (\d{1,9})\n  \}')


def parent_glance(run_dir: Path) -> Optional[Tuple[str, int]]:
    """(parent, step) from the last PARENT_TAIL bytes of run.json, where the writer (indent 2,
    sorted keys) ends the resume record; make runs reads no more of a run.json than that."""
    try:
        data = "\n".join(bounded.tail_lines(Path(run_dir) / "run.json", PARENT_TAIL)).encode()
    except bounded.Unreadable:
        return None
    match = _PARENT.search(b"\n" + data)
    return (match.group(1).decode(), int(match.group(2))) if match else None


def last_sign_of_life(run_dir: Path) -> Optional[datetime]:
    """The latest of: driver.log's last phase line, FAILED's time, the last heartbeat. Only
    when none exists, the newest modification time of driver.log, training.log or run.json."""
    run_dir = Path(run_dir)
    times = _launcher_times(run_dir)
    failed = failed_fields(run_dir) or {}
    stamp = parse_time(failed.get("time"))
    if stamp:
        times.append(stamp)
    beat = heartbeat.last_beat(run_dir)
    if beat is not None:
        times.append(datetime.fromtimestamp(beat, timezone.utc))
    if times:
        return max(times)
    for name in ("driver.log", "training.log", "run.json"):
        try:
            times.append(datetime.fromtimestamp(bounded.regular(run_dir / name).st_mtime, timezone.utc))
        except bounded.Unreadable:
            continue
    return max(times) if times else None


def lifetime(run_dir: Path, run: Dict[str, Any]) -> Optional[float]:
    """Seconds from run.json's start to the last sign of life."""
    start, end = parse_time(run.get("started_at")), last_sign_of_life(run_dir)
    if not start or not end or end < start:
        return None
    return (end - start).total_seconds()


def training_seconds(run_dir: Path) -> Optional[float]:
    """How long the training phase ran: its own end line, or to the last sign of life when it
    was stopped (FAILED's time, the last heartbeat)."""
    phase = phase_timeline(Path(run_dir), []).get("training")
    if phase is None or not phase.started:
        return None
    if phase.seconds is not None:
        return float(phase.seconds)
    begin, end = parse_time(phase.started), last_sign_of_life(run_dir)
    return (end - begin).total_seconds() if begin and end and end >= begin else None


@dataclasses.dataclass
class Lineage:
    parent: Optional[Tuple[str, int]]      # (RUN_ID, step it resumed at)
    chain: List[str]                       # every ancestor, oldest first
    children: List[Tuple[str, int]]
    target: Optional[int]
    trained: Optional[Tuple[int, int]]     # (first, last) step this run trained itself
    own_training_s: Optional[float]
    chain_training_s: Optional[float]      # the ancestors' training, all together
    chain_missing: List[str]               # ancestors whose training time is unknown

    @property
    def inherited(self) -> int:
        return self.parent[1] if self.parent else 0


def _int(value: Any) -> Optional[int]:
    try:
        return int(str(value))
    except ValueError:
        return None


def lineage(run_dir: Path, run: Dict[str, Any], last_step: Optional[int] = None) -> Lineage:
    """The run's lineage; last_step: the last step it logged (charts), for a stopped run."""
    run_dir = Path(run_dir)
    parent = parent_of(run)
    resume = run.get("resume") if isinstance(run.get("resume"), dict) else {}
    chain = [c for c in resume.get("chain", []) if isinstance(c, str) and RUN_ID.match(c)][-MAX_CHAIN:]
    values = run.get("profile", {}).get("values", {}) if isinstance(run.get("profile"), dict) else {}
    target = _int(values.get("TARGET_STEPS")) if isinstance(values, dict) else None
    first = parent[1] + 1 if parent else 1
    last = last_step if last_step is not None else target
    total, missing = 0.0, []
    for ancestor in chain:
        seconds = training_seconds(run_dir.parent / ancestor)
        if seconds is None:
            missing.append(ancestor)
        else:
            total += seconds
    return Lineage(parent, chain, children_of(run_dir.parent, run_dir.name), target,
                   (first, last) if last is not None and last >= first else None,
                   training_seconds(run_dir), total if chain else None, missing)


def inherited_series(run_dir: Path, lin: Lineage, tags: List[str]) -> Dict[str, List[Tuple[int, float]]]:
    """The parent chain's points at steps up to the resume step, per tag, nearest parent
    winning (each ancestor up to the step its child resumed at)."""
    if not lin.parent:
        return {}
    out: Dict[str, Dict[int, float]] = {}
    limit = lin.parent[1]
    for ancestor in reversed(lin.chain):  # the parent first: its steps win
        folder = Path(run_dir).parent / ancestor / "tensorboard"
        if not folder.is_dir():
            continue
        scalars = tfevents.load_scalars(folder, keep=tuple(tags))
        for tag in tags:
            for step, value in scalars.values.get(tag, {}).items():
                if step <= limit:
                    out.setdefault(tag, {}).setdefault(step, value)
    return {tag: sorted(points.items()) for tag, points in out.items()}
