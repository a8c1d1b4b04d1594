"""make runs: every run on the volume, one line each: RUN_ID, start, duration, profile, verdict.

Cheap per run, whatever the volume holds: a glance at each record's ends (run/glance.py), the
markers, and the last TAIL bytes of driver.log (where the last phase's end is), never a whole
log or a whole large record. Every column is cut to a fixed width, so one odd run cannot widen
the listing.
"""
from __future__ import annotations

import argparse
import errno
import os
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional

from ..formats import bounded
from ..run import glance, typed
from ..run.findings import UsageError
from ..run.humane import duration, printable, when
from ..run.profile import NAME as RUN_ID
from .timeline import LAUNCHER_PREFIX, BadLine, phase_line
from ..run.runpaths import run_dir
from ..run.runverdict import latest_verdict

TAIL = 256 << 10  # of driver.log searched for the last phases' lines (bytes.find, not parsed)
WIDTHS = {"run_id": 128, "start": 23, "duration": 14, "profile": 40, "verdict": 48}
HEADER = {"run_id": "RUN_ID", "start": "STARTED", "duration": "TOOK", "profile": "PROFILE",
          "verdict": "VERDICT"}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _end_time(run_dir: Path):
    """When the launcher's last phase ended, from the tail of driver.log."""
    try:
        tail = bounded.tail_lines(run_dir / "driver.log", TAIL, LAUNCHER_PREFIX)
    except bounded.Unreadable:
        return None
    started = {}
    end = None
    for line in tail:
        try:
            parsed = phase_line(line)
        except BadLine:  # the report names them (RPT-E021); the listing leaves them out
            continue
        name, start, _, seconds = parsed
        if start is not None:
            started[name] = start
        elif name in started:
            end = started[name] + timedelta(seconds=seconds)
    return end


def glance_status(folder: Path, name: str) -> Optional[str]:
    """A phase record's status from a glance at its ends (runverdict.record_status's words)."""
    try:
        status = glance.fields(folder / name, ("status",), {"status": str})["status"]
    except bounded.Unreadable as exc:
        return None if str(exc) == "missing" else "unreadable"
    except ValueError:
        return "unreadable"
    return status if status in ("passed", "failed") else "unreadable"


def _unreadable_folder(folder: Path) -> Optional[str]:
    """Why the folder itself cannot be listed (permissions), or None."""
    try:
        with os.scandir(folder) as listing:
            next(listing, None)
    except OSError as exc:
        return "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else \
            (exc.strerror or str(exc)).lower()
    return None


def run_row(folder: Path) -> Dict[str, str]:
    name = folder.name if RUN_ID.match(folder.name) else repr(folder.name)
    problem = _unreadable_folder(folder)
    if problem:
        return {"run_id": name, "start": "—", "sort": "~", "duration": "—", "profile": "?",
                "verdict": f"UNREADABLE ({problem}: the folder cannot be listed)"}
    try:
        run = glance.fields(folder / "run.json", ("started_at", "profile.name"),
                            {"started_at": typed.UTC, "profile.name": str})
    except (bounded.Unreadable, ValueError):
        run = {"started_at": None, "profile.name": None}
    start = typed.utc_time(run["started_at"])
    end = _end_time(folder)
    took: Optional[float] = (end - start).total_seconds() if start and end and end >= start else None
    verdict = latest_verdict(folder, glance_status)
    return {"run_id": name,
            "start": when(run["started_at"]) if start else "—",
            "sort": start.isoformat() if start else "~",
            "duration": duration(took) if took is not None else "—",
            "profile": run["profile.name"] if run["profile.name"] is not None else "?",
            "verdict": verdict.status + (" (conflict)" if verdict.conflicts else "")}


def main(args: argparse.Namespace) -> int:
    root = run_dir(args.storage_root, "x").parent
    if not args.storage_root.is_dir():
        raise UsageError(f"PREP_ROOT {args.storage_root} is not a directory: set PREP_ROOT= to "
                         "the shared volume's mount path on this box")
    if not root.is_dir():
        print(f"runs: no run yet under {root}")
        return 0
    rows: List[Dict[str, str]] = []
    with os.scandir(root) as listing:
        for entry in listing:
            if entry.is_dir(follow_symlinks=False):
                row = run_row(Path(entry.path))
                rows.append({key: _cut(row[key], WIDTHS.get(key, 64)) for key in row})
    rows.sort(key=lambda r: (r["sort"], r["run_id"]))
    keys = list(HEADER)
    widths = {k: max(len(r[k]) for r in [HEADER, *rows]) for k in keys}
    for row in [HEADER, *rows]:
        print(printable("  ".join(row[k].ljust(widths[k]) for k in keys).rstrip()))
    print(f"runs: {len(rows)} under {root}; make report RUN_ID=<run> for one of them")
    return 0
