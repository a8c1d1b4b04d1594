"""Which mount holds a path, from /proc/self/mountinfo (no findmnt needed)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_for(path: Path, mountinfo: str = "/proc/self/mountinfo") -> Optional[Dict[str, str]]:
    """The mount whose mount point is the longest prefix of ``path`` (symlinks resolved)."""
    target = os.path.realpath(str(path))
    best = None
    try:
        with open(mountinfo, encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        parts, tail = left.split(), right.split()
        if len(parts) < 6 or len(tail) < 2:
            continue
        point = _unescape(parts[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        # Later lines are mounted on top of earlier ones at the same point: >= keeps the last.
        if inside and (best is None or len(point) >= len(best["target"])):
            best = {"target": point, "root": _unescape(parts[3]), "options": parts[5],
                    "fstype": tail[0], "source": _unescape(tail[1]),
                    "super_options": tail[2] if len(tail) > 2 else ""}
    return best
