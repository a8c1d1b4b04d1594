"""Records as JSON text in json.dumps(indent=2, sort_keys=True)'s layout, at C speed for large
records: Python's JSON encoder is pure Python as soon as it indents (a 16,384-rank
actor-placement.json took 0.2 s of a 2 s postflight), its C encoder only writes one line.

A list or object of at most LONG items is laid out exactly as indent=2 lays it out; each item
of a longer one goes on a line of its own, written whole by the C encoder ("key": {...} on one
line). The record's own top-level object is always laid out, however many keys it has, so the
glance (run/glance.py) finds its fields where indent=2 puts them: `\\n  "status": "passed",`,
an object's `\\n  "resume": {` and its first field on the next line. Readers parse the same
value.
"""
from __future__ import annotations

import json
from json import encoder
from typing import Any, Callable

LONG = 256  # items above which each item of a list or object is written on one line

_KEY = encoder.c_encode_basestring or encoder.py_encode_basestring  # a key, as json writes it


def _one_line_encoder() -> Callable[[Any], str]:
    """json.dumps(value, sort_keys=True, ensure_ascii=False, default=str) of one item: the C
    encoder called directly (JSONEncoder.encode makes a new one each call, a third of the cost
    at 50,000 items), or encode() where the C encoder is missing."""
    if encoder.c_make_encoder is None:
        return json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode
    made = encoder.c_make_encoder({}, str, _KEY, None, ": ", ", ", True, False, True)
    return lambda value: "".join(made(value, 0))


def dumps(value: Any) -> str:
    """json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str), with the
    items of a list or object longer than LONG written one a line."""
    return _layout(value, "\n", _one_line_encoder(), top=True)


def _layout(value: Any, newline: str, one_line: Callable[[Any], str], top: bool = False) -> str:
    inner = newline + "  "
    if isinstance(value, dict) and value:
        if not all(isinstance(key, str) for key in value):  # json's key conversions: its own layout
            return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False,
                              default=str).replace("\n", newline)
        keys = sorted(value)
        if len(keys) > LONG and not top:
            parts = [f"{_KEY(key)}: {one_line(value[key])}" for key in keys]
        else:
            parts = [f"{_KEY(key)}: {_layout(value[key], inner, one_line)}" for key in keys]
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if isinstance(value, (list, tuple)) and value:
        if len(value) > LONG:
            parts = [one_line(item) for item in value]
        else:
            parts = [_layout(item, inner, one_line) for item in value]
        return "[" + inner + ("," + inner).join(parts) + newline + "]"
    return one_line(value)
