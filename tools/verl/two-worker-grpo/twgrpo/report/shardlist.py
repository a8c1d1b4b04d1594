"""The report's checkpoint table: one row per saved step and kind of shard, so a run of 16,000
ranks is a few rows ('.../model_world_size_16384_rank_{0..16383}.pt', bytes, '16384 verified'),
with the names looked at bounded by the run's budget (run/budget.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..formats import bounded
from ..run import budget
from ..run.findings import Finding, finding
from ..run.runfolder import RunFolder

SHARD_NAMES_PER_RANK = 8  # names in a checkpoint's actor/ looked at (3 shards a rank)
RANK = re.compile(r"^(?P<kind>.+_world_size_\d+)_rank_(?P<rank>\d{1,9})\.pt$")


def checkpoint_shards(run_dir: Path, evidence: Dict[str, Any], problems: List[Finding],
                      size: budget.Size = budget.Size()) -> List[Tuple[str, Optional[int], str]]:
    """One row per checkpoint step and kind of shard ('.../model_world_size_16_rank_{0..15}.pt'):
    its files' bytes together and how many postflight verified, so 16,000 ranks are a few rows.
    Names looked at: the run's budget (steps x ranks x SHARD_NAMES_PER_RANK); past it, RPT-E022."""
    verified = evidence.get("checkpoint", {}).get("shards", {})  # typed: Map(int)
    groups: Dict[str, Dict[str, Any]] = {}
    most = SHARD_NAMES_PER_RANK * size.ranks + 64
    cut = False
    for step_dir in bounded.first_entries(RunFolder(run_dir).checkpoints, "global_step_", size.steps + 2):
        # Names, not paths: a Path made relative costs tens of microseconds on Python 3.12 (its
        # 49,152 shards at 16,384 ranks took 6 s there), a string a fraction of one.
        actor = step_dir / "actor"
        folder, shown = str(actor), str(actor.relative_to(run_dir))
        names = bounded.first_names(actor, "", most + 1)
        cut = cut or len(names) > most
        for name in names[:most]:
            if not name.endswith(".pt") or name == ".pt":  # Path.suffix: a dot file has none
                continue
            rel = f"{shown}/{name}"
            match = RANK.match(name)
            key = f"{shown}/{match.group('kind')}_rank_{{…}}.pt" if match else rel
            group = groups.setdefault(key, {"files": 0, "bytes": 0, "ranks": [], "states": {}})
            group["files"] += 1
            if match and len(group["ranks"]) < 1 << 20:
                group["ranks"].append(int(match.group("rank")))
            if rel in verified:
                group["bytes"] += verified[rel]
                state = "verified"
            else:
                try:
                    group["bytes"] += bounded.regular(f"{folder}/{name}").st_size
                    state = "not verified"
                except bounded.Unreadable as exc:
                    state = str(exc)
            group["states"][state] = group["states"].get(state, 0) + 1
    if cut:
        problems.append(finding("RPT-E022", "checkpoints/", f"more than {most} files in a "
                                f"checkpoint's actor/ folder ({size.ranks} ranks x "
                                f"{SHARD_NAMES_PER_RANK} and 64 more): the first {most} are summed"))
    rows = []
    for key in sorted(groups):
        group = groups[key]
        span = _span(group["ranks"])
        name = key.replace("{…}", span) if span else key
        states = ", ".join(f"{count} {state}" for state, count in sorted(group["states"].items()))
        rows.append((name, group["bytes"], states if group["files"] > 1 else
                     next(iter(group["states"]))))
    return rows


def _span(ranks: List[int]) -> str:
    """'{0..15}' for consecutive ranks; '{0..3,5..15}' (at most 8 ranges, then '…')."""
    if not ranks:
        return ""
    ranks = sorted(set(ranks))
    if len(ranks) == 1:
        return str(ranks[0])
    runs, start = [], ranks[0]
    for before, after in zip(ranks, ranks[1:] + [None]):
        if after != before + 1:
            runs.append(f"{start}..{before}" if before > start else str(start))
            start = after
    return "{" + ",".join(runs[:8]) + (",…" if len(runs) > 8 else "") + "}"
