"""Numbers, sizes, durations and topologies written for people, not for round-tripping.

TensorBoard stores float32, so the learning rate 1e-6 comes back as 9.999999974752427e-07:
four significant digits give back what the profile said.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any, List, Optional, Sequence

from .typed import shown, utc_time


_TERMINAL_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """A line safe for a terminal: control characters (escape sequences too) shown as U+FFFD."""
    return _TERMINAL_CONTROL.sub("\ufffd", text)


def clipped(value: Any, most: int = 300) -> str:
    """A value for a message: a string as it is up to ``most`` characters, then its length; any
    other value as typed.shown gives it (a record's text is bounded by its budget, not by this)."""
    if not isinstance(value, str):
        return shown(value)
    return repr(value) if len(value) <= most else f"{value[:most]!r}... ({len(value):,} characters)"


def number(value: Any, digits: int = 4) -> str:
    """1e-06, 0.3833, 53, 94,091,471,668; NaN and inf spelled out; None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.{digits}g}"


def plural(count: int, word: str, many: str = "") -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


def duration(seconds: Optional[float]) -> str:
    """53 s, 4 min 05 s, 2 h 03 min."""
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def size(count: Optional[int]) -> str:
    """1.4 MiB; bytes below 1 KiB as they are."""
    if count is None:
        return "—"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def topology(nodes: Any, gpus_per_node: Any, gpu_model: Any = "*") -> str:
    """'1 node x 1 GPU (any model)', '2 nodes x 2 GPUs (NVIDIA A100-SXM4-80GB), world size 4'."""
    try:
        nodes, gpus = int(nodes), int(gpus_per_node)
    except (TypeError, ValueError):
        return f"{nodes} nodes x {gpus_per_node} GPUs"
    model = "any model" if gpu_model in ("*", "", None) else str(gpu_model)
    text = f"{plural(nodes, 'node')} x {plural(gpus, 'GPU')} ({model})"
    return text if nodes * gpus == 1 else f"{text}, world size {nodes * gpus}"


def when(stamp: Any) -> str:
    """An ISO time as '2026-12-02 13:09:38 UTC'; anything else as it is."""
    parsed = parse_time(stamp)
    if parsed is None:
        if not stamp:
            return "—"
        text = stamp[:64] if isinstance(stamp, str) else "?"
        return text if len(text) < 64 else text[:61] + "..."
    return f"{parsed:%Y-%m-%d %H:%M:%S} UTC"


def parse_time(stamp: Any) -> Optional[datetime]:
    """A UTC time as the bundle writes it (typed.utc_time: 'Z' or '+00:00', years 2000..2199)."""
    return utc_time(stamp)


def short_hash(value: Any, keep: int = 12) -> str:
    text = str(value or "")
    return text[:keep] if len(text) > keep else text or "—"


def first_of(names: Sequence[str], shown: int = 16) -> str:
    """a, b, c and 4,081 more: the first ``shown`` of names, and how many are left unsaid, so a
    message stays short at thousands of nodes."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more:,} more" if more > 0 else "")


def repeats(values: Sequence[Any], shown: int = 16) -> str:
    """8+8+7 for a few values; past ``shown``, each run of equal values once with its length:
    8 (x4096) + 1."""
    if len(values) <= shown:
        return "+".join(map(str, values))
    runs: List[List[Any]] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    text = [f"{value} (x{count})" if count > 1 else str(value) for value, count in runs[:shown]]
    return " + ".join(text) + (f" + {len(runs) - shown:,} more runs" if len(runs) > shown else "")
