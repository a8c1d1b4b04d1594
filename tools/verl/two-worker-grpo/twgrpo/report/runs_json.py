"""make runs FORMAT=json: the listing for scripts, one object per run, the table's own rows.

The values are the table's (runs.py: the same glance, the same cuts), so the two always agree;
added are what a script needs that the table writes for people: the start as an ISO UTC time,
the duration in seconds and the bundle version.
"""
from __future__ import annotations

import json
import sys
from typing import Dict, List

KEYS = {"id": "run_id", "started": "start", "took": "duration", "profile": "profile",
        "verdict": "verdict", "lineage": "lineage", "bundle_version": "bundle"}


def as_object(row: Dict[str, str]) -> Dict[str, object]:
    out: Dict[str, object] = {name: row[key] for name, key in KEYS.items()}
    out["start"] = None if row["sort"] == "~" else row["sort"]
    out["duration_s"] = int(row["seconds"]) if row["seconds"] else None
    parent = row["lineage"].split(" -> ")[0]
    out["parent"] = parent[3:].rsplit("@", 1)[0] if parent.startswith("<- ") else None
    out["children"] = row["lineage"].split("-> ", 1)[1] if "-> " in row["lineage"] else ""
    return {k: (v if v not in ("—", "") or k in ("lineage", "children") else None) for k, v in out.items()}


def print_rows(rows: List[Dict[str, str]]) -> int:
    """A JSON array, one run per line, in the table's order (by start, then RUN_ID)."""
    write = sys.stdout.write
    write("[")
    for index, row in enumerate(rows):
        write(("\n" if index == 0 else ",\n") + json.dumps(as_object(row), sort_keys=True, ensure_ascii=False))
    write("\n]\n" if rows else "]\n")
    return 0
