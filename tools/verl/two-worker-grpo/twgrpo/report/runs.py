"""make runs: every run on the volume, one line each: RUN_ID, start, duration, profile, verdict.

Cheap per run, whatever the volume holds: a glance at each record's ends (run/glance.py), the
markers, and the last TAIL bytes of driver.log (the last sign of life: lineage.py), never a whole
large record; a run that claims SUCCESS has driver.log read back from its end to the line that
training ended (runverdict.ended_from_the_end: whole only where there is none). Every column is
cut to a fixed width, so one odd run cannot widen the listing. A resumed run names its parent
and step (<- parent@K), a parent its children (-> child); a PREEMPTED run the step it can be
resumed from.
"""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Dict, List, Optional

from ..formats import bounded
from ..run import glance, heartbeat, runid, runrecord, typed
from ..run.findings import UsageError
from ..run.humane import duration, printable, when
from . import lineage, runs_json
from ..run.runfolder import runs_dir
from ..run.runverdict import latest_verdict

TAIL = 256 << 10  # of driver.log searched for the last phases' lines (bytes.find, not parsed)
WIDTHS = {"run_id": 128, "start": 23, "duration": 14, "profile": 40, "verdict": 48, "lineage": 96}
BUNDLE = ("bundle_version", "bundle_sums_sha256")  # bundle-<12 hex>; before it was recorded: the sums
BAD_BEAT = "RES-W051"  # the verdict column's note on a heartbeat.json that is no heartbeat
HEADER = {"run_id": "RUN_ID", "start": "STARTED", "duration": "TOOK", "profile": "PROFILE",
          "verdict": "VERDICT", "lineage": "LINEAGE"}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def glance_status(folder: Path, name: str) -> Optional[str]:
    """A phase record's status from a glance at its ends (runverdict.record_status's words)."""
    try:
        status = glance.fields(folder / name, ("status",), {"status": str},
                               runrecord.size(folder).record_bytes)["status"]
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
    name = folder.name if runid.is_run_id(folder.name) else repr(folder.name)
    problem = _unreadable_folder(folder)
    if problem:
        return {"run_id": name, "start": "—", "sort": "~", "duration": "—", "profile": "?",
                "verdict": f"UNREADABLE ({problem}: the folder cannot be listed)", "lineage": ""}
    try:
        run = runrecord.glance_fields(folder, ("started_at", "profile.name") + BUNDLE,
                                      {"started_at": typed.UTC, "profile.name": str, **dict.fromkeys(BUNDLE, str)})
    except (bounded.Unreadable, ValueError):
        run = dict.fromkeys(("started_at", "profile.name") + BUNDLE)
    start = typed.utc_time(run["started_at"])
    took: Optional[float] = lineage.lifetime(folder, run)  # to the last sign of life
    verdict = latest_verdict(folder, glance_status)
    parent = runrecord.parent_glance(folder)
    return {"run_id": name,
            "start": when(run["started_at"]) if start else "—",
            "sort": start.isoformat() if start else "~",
            "duration": duration(took) if took is not None else "—",
            "profile": run["profile.name"] if run["profile.name"] is not None else "?",
            "verdict": verdict.status + _resumable(verdict) + (" (conflict)" if verdict.conflicts else "")
            + "".join(f" ({f.id})" for f in verdict.findings)
            + (f" ({BAD_BEAT} heartbeat.json is no heartbeat)" if heartbeat.problem(folder) else ""),
            "lineage": f"<- {parent[0]}@{parent[1]}" if parent else "",
            "seconds": "" if took is None else f"{took:.0f}",  # runs_json.py: not in the table
            "bundle": run["bundle_version"] or (run["bundle_sums_sha256"] or "")[:12]}


def _resumable(verdict) -> str:
    """' (resumable from step K)' for a PREEMPTED run (its summary names K)."""
    match = re.search(r"resumable from step (\d+)", verdict.summary)
    return f" (resumable from step {match.group(1)})" if verdict.status == "PREEMPTED" and match else ""


def _children(rows: List[Dict[str, str]]) -> None:
    """Each parent's row names the runs that resumed from it ('-> child')."""
    by_id = {r["run_id"]: r for r in rows}
    kids: Dict[str, List[str]] = {}
    for row in rows:
        if row["lineage"].startswith("<- "):
            parent = row["lineage"][3:].rsplit("@", 1)[0]
            if parent in by_id:
                kids.setdefault(parent, []).append(row["run_id"])
    for parent, children in kids.items():
        more = f" +{len(children) - 2}" if len(children) > 2 else ""
        row = by_id[parent]
        row["lineage"] = " ".join(filter(None, [row["lineage"], "-> " + ", ".join(children[:2]) + more]))


def run(storage_root: Path, fmt: str = "text") -> int:
    """Every run under storage_root, one line each (fmt json: one object per run and line)."""
    root = runs_dir(storage_root)
    if not storage_root.is_dir():
        raise UsageError(f"PREP_ROOT {storage_root} is not a directory: set PREP_ROOT= to "
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
    _children(rows)
    rows = [{key: _cut(row[key], WIDTHS.get(key, 64)) for key in row} for row in rows]
    if fmt == "json":
        return runs_json.print_rows(rows)
    keys = list(HEADER)
    widths = {k: max(len(r[k]) for r in [HEADER, *rows]) for k in keys}
    for row in [HEADER, *rows]:
        print(printable("  ".join(row[k].ljust(widths[k]) for k in keys).rstrip()))
    print(f"runs: {len(rows)} under {root}; make report RUN_ID=<run> for one of them")
    return 0
