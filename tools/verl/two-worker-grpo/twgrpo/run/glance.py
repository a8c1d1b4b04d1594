"""A glance at a record for `make runs`: a few top-level fields, at a bounded cost per record
whatever its size, so 5,000 runs list in seconds.

A record of at most WHOLE bytes is read whole (bounded and typed like every record). A larger one
is read only at its two ends, HEAD and TAIL bytes, where the bundle's writer (indent 2, sorted
keys) puts a top-level field on a line of its own: `\\n  "status": "passed",`. A field found in
neither end is None; the report and postflight read the whole record and judge it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Sequence

from ..formats import bounded
from . import typed

WHOLE = 16 << 10  # read and parsed whole up to this size (a one-node preflight.json is 8 KiB)
HEAD = 8 << 10    # larger records: only their ends are searched, never parsed
TAIL = 64 << 10
_SCALAR = rb'("(?:[^"\\\n]|\\.){0,256}"|-?\d{1,19}|true|false|null)'


def _pattern(field: str) -> "re.Pattern[bytes]":
    """`status` or `profile.name` (the first field of the object `profile`), as the writer lays
    them out at indent 2 and 4."""
    outer, _, inner = field.partition(".")
    if not inner:
        return re.compile(rb'\n  "' + outer.encode() + rb'": ' + _SCALAR + rb',?\n')
    return re.compile(rb'\n  "' + outer.encode() + rb'": \{\n    "' + inner.encode() + rb'": '
                      + _SCALAR + rb',?\n')


def _nested(data: Any, field: str) -> Any:
    for part in field.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def fields(path: Path, names: Sequence[str], specs: Dict[str, Any]) -> Dict[str, Any]:
    """{name: value or None} of a record's top-level (or first-nested) fields, each held to its
    spec in specs (typed.py); bounded.Unreadable if the file cannot be read at all."""
    stream, info = bounded.open_checked(Path(path))
    with stream:
        try:
            if info.st_size <= WHOLE:
                ends = [stream.read(WHOLE + 1)]
            else:
                head = stream.read(HEAD)
                stream.seek(info.st_size - TAIL)
                ends = [head, stream.read(TAIL)]
        except OSError as exc:
            raise bounded.Unreadable(f"cannot read: {exc.strerror}")
    found: Dict[str, Any] = {}
    if len(ends) == 1:
        try:
            record = bounded.loads(ends[0])
        except ValueError as exc:
            raise bounded.Unreadable(f"not JSON ({exc})")
        if not isinstance(record, dict):
            raise bounded.Unreadable(f"a JSON {type(record).__name__}, not an object")
        found = {name: _nested(record, name) for name in names}
    else:
        for name in names:
            pattern = _pattern(name)
            for end in ends:
                match = pattern.search(end)
                if match:
                    found[name] = bounded.loads(match.group(1))
                    break
    problems: typed.Problems = typed.Problems()
    return {name: typed.conform(found.get(name), specs.get(name, typed.ANY), name, problems)
            if found.get(name) is not None else None for name in names}
