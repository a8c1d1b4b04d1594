"""The run's own JSON records, read bounded and typed.

Every record (run.json, preflight.json, inputs.json, verification.json, actor-placement.json,
resume.json, the manifests) is read by formats/bounded.py: a regular file only, a size cap, a
nesting cap, integers of at most 19 digits. What a reader then uses is held to a schema here:
``conform(value, spec, where, problems)`` keeps what has the right type and range and drops the
rest, one plain sentence per dropped field in ``problems`` (for the check or the page section
that needed it to turn into a finding). A spec is:

    str, bool, int, float   that type (int: not a bool, |n| < 2**63; float: any number)
    UTC                     a time in UTC, '2026-12-02T13:09:38Z' or '...+00:00', year 2000..2199
    [spec]                  a list (at most `most` items are kept: MAX_ITEMS, or the run's
                            budget, run/budget.py) of items of spec
    {key: spec, ...}        an object whose named fields, where present, have their spec; other
                            fields are kept as they are (nothing uses them)
    Map(spec)               an object whose every value has spec (at most `most`)
    Need(spec)              (a field of an object spec) without it the object is dropped
    ANY                     anything
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..formats import bounded
from .runfolder import NAME

MAX_ITEMS = 4096      # items of a list or an object a reader keeps
MAX_PROBLEMS = 20     # problems told per record (the rest are counted)
ANY = object()
UTC = object()
_UTC = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,6})?(Z|\+00:00)", re.ASCII)
YEARS = (2000, 2199)


class Map:
    def __init__(self, spec: Any):
        self.spec = spec


class Need:
    """A field an object cannot do without: when it is missing or does not fit, the whole
    object is dropped (a worker without a hostname cannot place a rank)."""

    def __init__(self, spec: Any):
        self.spec = spec


def utc_time(stamp: Any) -> Optional[datetime]:
    """A UTC time written by the bundle ('...Z' or '...+00:00'), else None: no other zone, no
    year outside 2000..2199 (so a duration added to it can never overflow)."""
    if not isinstance(stamp, str) or len(stamp) > 40:
        return None
    match = _UTC.fullmatch(stamp.strip())
    if not match or not YEARS[0] <= int(match.group(1)) <= YEARS[1]:
        return None
    try:
        parsed = datetime(*(int(match.group(i)) for i in range(1, 7)), tzinfo=timezone.utc)
    except ValueError:  # 2026-13-45
        return None
    return parsed.replace(microsecond=int((match.group(7) or ".0")[1:].ljust(6, "0")))


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def _wanted(spec: Any) -> str:
    names = {str: "text", bool: "true/false", int: "a whole number", float: "a number",
             UTC: "a UTC time (…Z)"}
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, (dict, Map)):
        return "an object"
    return names.get(spec, "something else")


def shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, (list, dict)) else kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fits(value: Any, spec: Any) -> bool:
    if spec is ANY:
        return True
    if spec is UTC:
        return utc_time(value) is not None
    if spec is bool:
        return isinstance(value, bool)
    if spec is int:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2 ** 63
    if spec is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec is str:
        return isinstance(value, str)
    return isinstance(value, list) if isinstance(spec, list) else isinstance(value, dict)


class Problems(list):
    """The first MAX_PROBLEMS problems, and how many there were."""
    count = 0

    def append(self, text: str) -> None:
        self.count += 1
        if len(self) < MAX_PROBLEMS:
            super().append(text)


def conform(value: Any, spec: Any, where: str, problems: List[str], most: int = MAX_ITEMS) -> Any:
    """value held to spec (see the module's docstring); None when it does not fit at all. most:
    the items of a list or object kept (a run's budget: run/budget.Size.items)."""
    if not _fits(value, spec):
        problems.append(f"{where} is {shown(value)}, not {_wanted(spec)}")
        return None
    if isinstance(spec, list):
        kept = []
        for number, item in enumerate(value[:most]):
            item = conform(item, spec[0], f"{where}[{number}]", problems, most)
            if item is not None:
                kept.append(item)
        if len(value) > most:
            problems.append(f"{where} has {len(value)} items; the first {most} are read")
        return kept
    if isinstance(spec, Map):
        kept_map = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= most:
                problems.append(f"{where} has {len(value)} fields; the first {most} are read")
                break
            item = conform(item, spec.spec, f"{where}.{key}", problems, most)
            if item is not None:
                kept_map[key] = item
        return kept_map
    if isinstance(spec, dict):
        result = dict(value)
        for key, sub in spec.items():
            needed = isinstance(sub, Need)
            sub = sub.spec if needed else sub
            name = f"{where}.{key}" if where else key
            if key in result:
                item = conform(result[key], sub, name, problems, most)
                if item is None:
                    del result[key]
                else:
                    result[key] = item
            if needed and key not in result:
                if key not in value:
                    problems.append(f"{name} is missing")
                return None
        return result
    return value


def read_record(path: Path, spec: Any, problems: List[str], limit: int = bounded.RECORD_LIMIT,
                memory: int = bounded.MEMORY, most: int = MAX_ITEMS) -> Dict[str, Any]:
    """A record held to spec (an object spec); bounded.Unreadable if it cannot be read at all
    or is not a JSON object. Fields that do not fit are dropped and told in problems. limit,
    memory and most: the run's budget (run/budget.py) where the reader knows the run's size."""
    data = bounded.read_object(Path(path), limit, memory)
    return conform(data, spec, "", problems, most)


# --- the records' schemas: the fields some reader uses ---------------------------------------

FINDING = {"id": str, "obj": str, "message": str, "hint": str, "level": str}
CHECK = {"name": str, "status": str, "findings": [FINDING]}
PHASE = {"status": str, "checked_at": UTC, "checks": [CHECK]}
WORKER = {"ordinal": int, "hostname": str, "node_ip": str, "node_id": str, "is_head": bool,
          "gpu_count": int, "gpu_names": [str], "driver": [str], "mount_source": str}
GPU = {"index": int, "name": str, "driver": str, "bus_id": str, "memory_mib": int}
NODE = {"node_id": str, "gpu_query": {"gpus": [GPU], "error": str}}
PREFLIGHT = {**PHASE, "workers": [WORKER], "nodes": [NODE]}
ACTOR = {"rank": int, "node_id": str, "node_ip": str, "hostname": str, "pid": int,
         "cuda_dev": ANY, "connected_peer_ranks": int, "nccl_transport": str,
         "rdma_disabled": bool}
PLACEMENT = {"status": str, "actors": [ACTOR]}
# What postflight's rank placement needs of preflight.json (checks/placement/placement.py).
PLACED_WORKER = {"hostname": Need(str), "node_id": Need(str), "node_ip": Need(str)}
PLACING_PREFLIGHT = {"status": str, "workers": [PLACED_WORKER]}
VERIFICATION = {**PHASE, "evidence": {"checkpoint": {"shards": Map(int), "path": str}}}
RUN = {"run_id": str, "started_at": UTC, "driver_host": str, "driver_pid": int,
       "driver_start_ticks": int, "driver_boot_id": str,
       "storage_root": str, "training_command": [str], "image": str,
       "profile": {"name": str, "path": str, "values": Map(str)}}
SCHEMAS = {NAME.run_json: RUN, NAME.inputs_json: PHASE, NAME.preflight_json: PREFLIGHT,
           NAME.verification_json: VERIFICATION, NAME.actor_placement_json: PLACEMENT,
           NAME.resume_json: PHASE}
