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
        return next((f.hint for f in self.shown if f.hint), "")

    @property
    def level(self) -> str:
        return level(self.id)


def level(fid: str) -> str:
    """A finding id's level: -W ids warn, every other fails its phase."""
    return "warning" if "-W" in fid else "error"


def grouped(items: Iterable[Tuple[str, Any]], totals: Optional[Dict[Key, int]] = None,
            shown: int = SHOWN) -> List[Group]:
    """items, (where, finding) in order, as groups in the order of their first finding. totals
    gives every group's count where the reader kept only the first findings (the report): a
    group none of whose findings was kept is there too, with none shown."""
    groups: Dict[Key, Group] = {}
    for where, found in items:
        group = groups.get((where, found.id))
        if group is None:
            group = groups[where, found.id] = Group(where, found.id, [], 0)
        group.total += 1
        if len(group.shown) < shown:
            group.shown.append(found)
    for key, total in (totals or {}).items():
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key[0], key[1], [], 0)
        group.total = max(group.total, total)
    return list(groups.values())
