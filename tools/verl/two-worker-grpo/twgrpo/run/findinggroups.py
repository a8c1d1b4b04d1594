"""Findings of one id, told once. A fault shared by every rank raises one finding per rank: at
16,384 ranks a job log that printed each with its hint would be 5 MB that nobody reads. So each
group (a check or phase, and a finding id) shows its first few findings and its hint once, and
counts the rest; the phase's JSON record and --format json keep every one.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional, Tuple

SHOWN = 10  # findings of one group printed in a job log or drawn on the report's page

Key = Tuple[str, str]  # (check or phase, finding id)


@dataclasses.dataclass
class Group:
    where: str
    id: str
    shown: List[Any]  # the group's first findings, in the order they were raised
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.shown)

    @property
    def hint(self) -> str:
        return self.shown[0].hint if self.shown else ""


def grouped(items: Iterable[Tuple[str, Any]], totals: Optional[Dict[Key, int]] = None,
            shown: int = SHOWN) -> List[Group]:
    """items, (where, finding) in order, as groups in the order of their first finding. totals
    gives a group's full count where the reader kept only its first findings (the report)."""
    groups: Dict[Key, Group] = {}
    for where, found in items:
        group = groups.get((where, found.id))
        if group is None:
            group = groups[where, found.id] = Group(where, found.id, [], 0)
        group.total += 1
        if len(group.shown) < shown:
            group.shown.append(found)
    for key, group in groups.items():
        group.total = max(group.total, (totals or {}).get(key, 0))
    return list(groups.values())


def more_line(group: Group, where_all: str) -> str:
    """The line that stands for a group's findings not shown, naming where all of them are."""
    return f"... and {group.more:,} more ({group.id}) like these: {where_all} has all {group.total:,}"
