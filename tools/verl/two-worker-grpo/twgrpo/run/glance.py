"""A glance at a record for `make runs`: a few top-level fields at a cost that stays near the
floor whatever the record's size, so 5,000 runs list in seconds and a 2,000-node run's
preflight.json is read right.

A record of at most WHOLE bytes is read whole (bounded and typed like every record). A larger one
is searched, never parsed, where the bundle's writer (indent 2, sorted keys) puts a top-level
field on a line of its own: `\\n  "status": "passed",`. Its two ends (HEAD and TAIL bytes) come
first, as every field the listing needs sits there in a small record; a field found in neither
is then looked for in the middle, a chunk at a time (memory stays at one CHUNK), up to `limit`
bytes (the run's record budget, run/budget.py, runrecord.size): wherever sorted keys put it, at any record size.
A field in none of it is None; a record over the limit is Unreadable (the report says the same),
and so is a larger one that does not open and close as a JSON object does (cut short, or bytes
after its end), as a whole reading refuses it.
A field whose value is an object is found as {} (present; its fields are not read).
Indent 2 makes the search exact: a string value holds no raw newline, and a nested field is
indented further, so `\\n  "name": ` can only be a top-level field.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Sequence

from ..formats import bounded
from . import typed

WHOLE = 16 << 10  # read and parsed whole up to this size (a one-node preflight.json is 8 KiB)
HEAD = 8 << 10    # larger records: their ends are searched first, never parsed
TAIL = 64 << 10
FIRST_CHUNK = 64 << 10  # then the middle, a chunk at a time, the first small (a field lies
CHUNK = 1 << 20         # near the head more often than not), each next twice as large up to this
_SCALAR = rb'("(?:[^"\\\n]|\\.){0,256}"|-?\d{1,19}|true|false|null)'
OVERLAP = 1024    # longer than any match (a field's name, its value of at most 256 characters)
ENDS = 64  # a larger record's last bytes, which must close it as a JSON object closes


def _pattern(field: str) -> "re.Pattern[bytes]":
    """`status` or `profile.name` (the first field of the object `profile`), as the writer lays
    them out at indent 2 and 4."""
    outer, _, inner = field.partition(".")
    if not inner:  # an object's opening brace counts too: the field is there (run.json's resume)
        return re.compile(rb'\n  "' + outer.encode() + rb'": (?:' + _SCALAR + rb',?\n|(\{)\n)')
    return re.compile(rb'\n  "' + outer.encode() + rb'": \{\n    "' + inner.encode() + rb'": '
                      + _SCALAR + rb',?\n')


def _nested(data: Any, field: str) -> Any:
    for part in field.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _search(data: bytes, wanted: List[str], found: Dict[str, Any]) -> None:
    for name in list(wanted):
        match = _pattern(name).search(data)
        if match:  # an object is found as {}: present, its fields not read
            found[name] = {} if match.group(1) is None else bounded.loads(match.group(1))
            wanted.remove(name)


def _read_at(stream: BinaryIO, offset: int, size: int) -> bytes:
    stream.seek(offset)
    return stream.read(size)


def _search_large(stream: BinaryIO, size: int, names: Sequence[str]) -> Dict[str, Any]:
    """Fields of a record larger than WHOLE: its ends, then its middle chunk by chunk. Each
    window starts one byte early, so a field on the window's first line is seen after its
    newline."""
    found: Dict[str, Any] = {}
    wanted = list(names)
    tail_at = max(HEAD, size - TAIL)  # never before the head, never a negative offset
    head = _read_at(stream, 0, HEAD)
    if not head.lstrip().startswith(b"{") or not _read_at(stream, size - ENDS, ENDS).rstrip().endswith(b"}"):
        # as a whole reading refuses it: the views tell one verdict on a record cut short
        raise bounded.Unreadable("not whole: it does not end as a record ends (cut short?)")
    _search(head, wanted, found)
    if wanted:
        _search(_read_at(stream, tail_at - 1, size - tail_at + 1), wanted, found)
    at, chunk = HEAD - OVERLAP, FIRST_CHUNK
    while wanted and at < tail_at:
        _search(_read_at(stream, at, min(chunk, tail_at + OVERLAP - at)), wanted, found)
        at += chunk - OVERLAP
        chunk = min(2 * chunk, CHUNK)
    return found


def fields(path: Path, names: Sequence[str], specs: Dict[str, Any],
           limit: int) -> Dict[str, Any]:
    """{name: value or None} of a record's top-level (or first-nested) fields, each held to its
    spec in specs (typed.py); bounded.Unreadable if the file cannot be read at all or is larger
    than limit (the record budget of the run whose folder holds it: runrecord.size)."""
    stream, info = bounded.open_checked(Path(path))
    with stream:
        if info.st_size > limit:
            raise bounded.Unreadable(f"{info.st_size} bytes, more than the {limit} a record "
                                     "may have")
        try:
            if info.st_size <= WHOLE:
                whole: Optional[bytes] = stream.read(WHOLE + 1)
            else:
                whole, found = None, _search_large(stream, info.st_size, names)
        except OSError as exc:
            raise bounded.Unreadable(f"cannot read: {exc.strerror}")
    if whole is not None:
        try:
            record = bounded.loads(whole)
        except ValueError as exc:
            raise bounded.Unreadable(f"not JSON ({exc})")
        if not isinstance(record, dict):
            raise bounded.Unreadable(f"a JSON {type(record).__name__}, not an object")
        found = {name: _nested(record, name) for name in names}
    problems: typed.Problems = typed.Problems()
    return {name: typed.conform(found.get(name), specs.get(name, typed.ANY), name, problems)
            if found.get(name) is not None else None for name in names}


def intact(path: Path, limit: int) -> None:
    """bounded.Unreadable unless the record looks whole: parsed as fields() parses it up to
    WHOLE bytes; larger, it must open and close as one JSON object does (whitespace around
    it aside), which a record cut short by a full disk or a copy does not (fields() checks
    that for every larger record it reads)."""
    fields(path, (), {}, limit)
