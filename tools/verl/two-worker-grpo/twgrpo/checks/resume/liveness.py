"""The resume phase's liveness check: a run whose heartbeat is fresh is never resumed, whatever
markers it has (a hand-written FAILED included); a run whose heartbeat ran out (lost) needs no
hand-written marker to be resumed (run/heartbeat.py)."""
from __future__ import annotations

from typing import List

from ...run import heartbeat
from ...run.runfolder import RunFolder
from ...run.findings import Finding, finding


def check_heartbeat(ctx) -> List[Finding]:
    ctx.earlier_record()
    folder = ctx.earlier_dir
    state = heartbeat.liveness(folder)
    ctx.evidence["earlier_heartbeat"] = state
    if state == "alive":
        return [finding("RES-E050", str(RunFolder(folder).heartbeat_json), "its launcher is alive: "
                        f"{heartbeat.describe(folder)}")]
    return []


def lost(ctx) -> bool:
    """True when the earlier run has no marker but its heartbeat ran out or its launcher
    vanished: it may be resumed without a hand-written FAILED (evidence says so)."""
    folder = ctx.earlier_dir
    state = heartbeat.liveness(folder)
    if state not in ("lost", "ended"):
        return False
    why = ("no heartbeat for longer than its lease" if state == "lost" else
           "its launcher ended without a verdict")
    ctx.evidence["earlier_lost"] = {"lost": f"{why}: {heartbeat.describe(folder)}"}
    return True
