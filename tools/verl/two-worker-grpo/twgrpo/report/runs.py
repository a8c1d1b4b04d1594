"""make runs: every run on the volume, one line each: RUN_ID, start, duration, profile, verdict.

Cheap per run, whatever the volume holds: run.json, the markers, the records' status and the
last 256 KiB of driver.log (where the last phase's end is), never a whole log.
"""
from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional

from ..formats import bounded
from ..run.findings import UsageError
from ..run.humane import duration, parse_time, printable, when
from ..run.profile import NAME as RUN_ID
from .timeline import LAUNCHER_LINE
from ..run.runpaths import run_dir
from ..run.runverdict import latest_verdict


def _end_time(run_dir: Path):
    """When the launcher's last phase ended, from the tail of driver.log."""
    try:
        tail = bounded.tail_lines(run_dir / "driver.log")
    except bounded.Unreadable:
        return None
    started: Dict[str, str] = {}
    end = None
    for line in tail:
        match = LAUNCHER_LINE.match(line)
        if match and match.group(3):
            started[match.group(1)] = match.group(3)
        elif match and match.group(1) in started:
            begin = parse_time(started[match.group(1)])
            if begin:
                end = begin + timedelta(seconds=int(match.group(5)))
    return end


def run_row(run_dir: Path) -> Dict[str, str]:
    try:
        run = bounded.read_object(run_dir / "run.json")
    except bounded.Unreadable as exc:
        run = {"problem": f"run.json {exc}"}
    profile = run.get("profile", {})
    start = parse_time(run.get("started_at"))
    end = _end_time(run_dir)
    took: Optional[float] = (end - start).total_seconds() if start and end and end >= start else None
    verdict = latest_verdict(run_dir)
    return {"run_id": run_dir.name if RUN_ID.match(run_dir.name) else repr(run_dir.name),
            "start": when(run.get("started_at")) if start else "—",
            "sort": start.isoformat() if start else "~",
            "duration": duration(took) if took is not None else "—",
            "profile": str(profile.get("name", "?")) if isinstance(profile, dict) else "?",
            "verdict": verdict.status + (" (conflict)" if verdict.conflicts else "")}


def main(args: argparse.Namespace) -> int:
    root = run_dir(args.storage_root, "x").parent
    if not args.storage_root.is_dir():
        raise UsageError(f"PREP_ROOT {args.storage_root} is not a directory: set PREP_ROOT= to "
                         "the shared volume's mount path on this box")
    if not root.is_dir():
        print(f"runs: no run yet under {root}")
        return 0
    rows: List[Dict[str, str]] = [run_row(path) for path in root.iterdir()
                                  if path.is_dir() and not path.is_symlink()]
    rows.sort(key=lambda r: (r["sort"], r["run_id"]))
    header = {"run_id": "RUN_ID", "start": "STARTED", "duration": "TOOK", "profile": "PROFILE",
              "verdict": "VERDICT"}
    keys = list(header)
    widths = {k: max(len(r[k]) for r in [header, *rows]) for k in keys}
    for row in [header, *rows]:
        print(printable("  ".join(row[k].ljust(widths[k]) for k in keys).rstrip()))
    print(f"runs: {len(rows)} under {root}; make report RUN_ID=<run> for one of them")
    return 0
