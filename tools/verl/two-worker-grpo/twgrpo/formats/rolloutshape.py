"""The rollout rows verl writes, judged by their shape: a file whose every line is
`{"input": "...", "output": "...", ..., "score": <number>, "step": <step>, ...}` as json.dumps
lays it out gets its row count and [min, max] score from a few passes of C code over its bytes
(a regular expression, counts, a translate), without a dict for each row; small files are
matched joined, a group at a time (shaped_files). Anything else is None, and the JSON reader
(checks/postflight/rollouts.py) judges it; the shape is drawn narrow enough that what it
accepts is a file the JSON reader would pass with the same rows and scores:

* UTF-8, no control character but the newline, and that only between rows; no blank line;
* within the JSON reader's parse-cost bound (bounded.cost: braces and brackets count heavily,
  even inside strings);
* strings delimited by unescaped quotes, their escapes only JSON's (checked after each escaped
  backslash and quote became one placeholder byte, which pairs them as a JSON reader does and
  which only a string value may hold);
* a non-empty input, an output, a score of at most 19 integer digits and a two-digit exponent
  (always finite), the step in its plain digits; other keys only with names that are none of
  these four and carry no escape (so none decodes to one of them), with a string, a number
  of the same bounded form, true, false or null (no nesting, so no depth to measure).
"""
from __future__ import annotations

import math
import re
from typing import List, Optional, Tuple

from . import bounded

# After the escaped quotes are out, every quote opens or closes a string; a raw newline ends the
# line, so no string holds one (a row cut by it is two lines the JSON reader names).
_TEXT = rb'"[^"\n]*+"'
_NUMBER = rb'-?+(?:0|[1-9]\d{0,18}+)(?:\.\d++)?+(?:[eE][+-]?+\d{1,2}+)?+'
_OTHER = rb'"(?!(?:input|output|score|step)")[^"\\\n\x01]*+": (?:' + _TEXT + rb'|' + _NUMBER + \
    rb'|true|false|null)'
_ROW = rb'\{"input": "[^"\n]++", "output": ' + _TEXT + rb', (?:' + _OTHER + rb', )*+"score": ' + \
    _NUMBER + rb', "step": (?:0|[1-9]\d{0,18}+)(?:, ' + _OTHER + rb')*+\}'
try:  # possessive quantifiers (Python 3.11's re): linear on any file
    _FILE: Optional["re.Pattern[bytes]"] = re.compile(rb'(?:' + _ROW + rb'\n)*+(?:' + _ROW + rb')?+')
    # One a row: a key named score or step carries no escape, so no string holds this text.
    _SCORE_STEP = re.compile(rb'"score": ([^,]*+), "step": ([^,}]*+)')
except re.error:  # Python 3.8-3.10: every file takes the JSON reader's way (slower, the same answer)
    _FILE = None
MATCHES = _FILE is not None  # whether this Python's re can match the shape
_PAIRED = re.compile(rb'\\[\\"]')  # an escaped backslash or quote: one scan, not two
# What an escaped backslash or quote becomes before the shape is matched: a control character,
# so a file holding one was refused already, and only a string value may hold it (outside one,
# or in a key, the pair is no JSON verl writes).
_ESCAPED = b"\x01"
_BAD_ESCAPE = re.compile(rb'\\(?:[^/bfnrtu]|u(?![0-9a-fA-F]{4}))')
_CONTROL = bytes(c for c in range(32) if c != 10)


def shaped_rows(data: bytes, step: int) -> Optional[Tuple[int, List[float]]]:
    """(rows, [min, max] score, or [] for no row) of a rollout file's bytes in the shape above;
    None for anything else (and always where re has no possessive quantifiers)."""
    held = _in_shape(data)
    return None if held is None else _tally(_SCORE_STEP.findall(held), step)


def shaped_files(files: List[bytes], steps: List[int]) -> List[Optional[Tuple[int, List[float]]]]:
    """shaped_rows of each file (its bytes, its step), the shape matched once over the files
    joined: a joined file ends at a newline or is empty, so every row stays one line of its own
    and no escape pairs across a join; each check is byte by byte, line by line, or a cost
    that adds up, so the joined bytes are in the shape only when each file is. Where they are
    not, each file is matched alone."""
    if not MATCHES:
        return [None] * len(files)
    joined = None
    if all(data.endswith(b"\n") or not data for data in files):
        joined = _in_shape(b"".join(files))
    if joined is None:
        return [shaped_rows(data, step) for data, step in zip(files, steps)]
    found = _SCORE_STEP.findall(joined)  # one a row, in order: each file's are its lines'
    tallies, at = [], 0
    for data, step in zip(files, steps):
        rows = data.count(b"\n")
        tallies.append(_tally(found[at:at + rows], step))
        at += rows
    return tallies


def _in_shape(data: bytes) -> Optional[bytes]:
    """data with its escaped backslashes and quotes made _ESCAPED, when it is in the shape."""
    if _FILE is None:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(data.translate(None, _CONTROL)) != len(data):
        return None
    if bounded.costs_more(data, bounded.MEMORY):  # the JSON reader refuses a row that costs this much
        return None
    if _PAIRED.search(data):  # pair the escapes left to right, as a JSON reader does
        data = data.replace(b"\\\\", _ESCAPED).replace(b'\\"', _ESCAPED)
    if b"\\" in data and _BAD_ESCAPE.search(data):
        return None
    return data if _FILE.fullmatch(data) is not None else None


def _tally(found: List[Tuple[bytes, bytes]], step: int) -> Optional[Tuple[int, List[float]]]:
    """(rows, [min, max] score) from each row's (score, step) texts; None if a row's step is
    not ``step``."""
    if not found:
        return 0, []
    pairs = set(found)
    if {mark for _, mark in pairs} != {b"%d" % step}:
        return None
    distinct = list(map(_score, {text for text, _ in pairs}))
    if 0.0 in distinct and len({math.copysign(1.0, v) for v in distinct if v == 0.0}) > 1:
        distinct = [_score(text) for text, _ in found]  # 0.0 and -0.0: the first read wins
    return len(found), [min(distinct), max(distinct)]


def _score(text: bytes) -> float:
    """The score as the JSON reader gives it: the integer -0 is 0, float("-0") is -0.0."""
    return 0.0 if text == b"-0" else float(text)
