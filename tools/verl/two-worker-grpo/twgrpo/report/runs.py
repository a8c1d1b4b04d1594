"""make runs: every run on the volume, one line each: RUN_ID, start, duration, profile, verdict.

Cheap per run, whatever the volume holds: run.json, the markers, the records' status and the
last 256 KiB of driver.log (the last sign of life: lineage.py), never a whole log; a
resumed run names its parent and step (<- parent@K), a parent its children (-> child).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Dict, List, Optional

from ..formats import bounded
from ..run.findings import UsageError
from ..run.humane import duration, parse_time, printable, when
from ..run.profile import NAME as RUN_ID
from . import lineage
from ..run.runpaths import run_dir
from ..run.runverdict import latest_verdict


def run_row(run_dir: Path) -> Dict[str, str]:
    try:
        run = bounded.read_object(run_dir / "run.json")
    except bounded.Unreadable as exc:
        run = {"problem": f"run.json {exc}"}
    profile = run.get("profile", {})
    start = parse_time(run.get("started_at"))
    took: Optional[float] = lineage.lifetime(run_dir, run)  # to the last sign of life
    verdict = latest_verdict(run_dir)
    return {"run_id": run_dir.name if RUN_ID.match(run_dir.name) else repr(run_dir.name),
            "start": when(run.get("started_at")) if start else "—",
            "sort": start.isoformat() if start else "~",
            "duration": duration(took) if took is not None else "—",
            "profile": str(profile.get("name", "?")) if isinstance(profile, dict) else "?",
            "verdict": verdict.status + _resumable(verdict) + (" (conflict)" if verdict.conflicts else ""),
            "lineage": _parent(run)}


def _resumable(verdict) -> str:
    """' (resumable from step K)' for a PREEMPTED run (its summary names K)."""
    match = re.search(r"resumable from step (\d+)", verdict.summary)
    return f" (resumable from step {match.group(1)})" if verdict.status == "PREEMPTED" and match else ""


def _parent(run) -> str:
    parent = lineage.parent_of(run)
    return f"<- {parent[0]}@{parent[1]}" if parent else ""


def _children(rows: List[Dict[str, str]]) -> None:
    """Each parent's row names the runs that resumed from it ('-> child')."""
    by_id = {r["run_id"]: r for r in rows}
    for row in rows:
        if row["lineage"].startswith("<- "):
            parent = by_id.get(row["lineage"][3:].rsplit("@", 1)[0])
            if parent is not None:
                parent["children"].append(row["run_id"])
    for row in rows:
        kids = row.pop("children")
        if kids:
            more = f" +{len(kids) - 2}" if len(kids) > 2 else ""
            row["lineage"] = " ".join(filter(None, [row["lineage"], "-> " + ", ".join(kids[:2]) + more]))


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
    for row in rows:
        row["children"] = []  # type: ignore[assignment]
    _children(rows)
    header = {"run_id": "RUN_ID", "start": "STARTED", "duration": "TOOK", "profile": "PROFILE",
              "verdict": "VERDICT", "lineage": "LINEAGE"}
    keys = list(header)
    widths = {k: max(len(r[k]) for r in [header, *rows]) for k in keys}
    for row in [header, *rows]:
        print(printable("  ".join(row[k].ljust(widths[k]) for k in keys).rstrip()))
    print(f"runs: {len(rows)} under {root}; make report RUN_ID=<run> for one of them")
    return 0
