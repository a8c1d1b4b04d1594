"""The block-YAML subset verl's trainer config files are written in, read without PyYAML.

Mappings by indentation (``key: value``, ``key:`` then a deeper block), sequences of scalars
or one-line pairs (``- item``, ``- key: value`` as in verl's defaults lists), plain, single- and
double-quoted scalars, ``{}``/``[]`` and one-line flow lists of scalars, ``#`` comments. Anything
else (anchors, block scalars, deeper mappings inside sequences, tabs) raises YamlError: the
caller is told the file is outside the subset, never given a guess.
Scalars: null/~ -> None, true/false -> bool, integers and floats as numbers, the rest as text.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

MAX_BYTES = 4 * 1024 * 1024  # verl's largest config file is under 20 KiB
KEY = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s'"#\[\]{},:][^:#]*?)\s*:(?:\s+|$)(.*)$""")
INT = re.compile(r"^[-+]?[0-9]+$")
FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


class YamlError(ValueError):
    """The text is not in the subset; the message names the line."""


def strip_comment(text: str) -> str:
    """The line without a trailing ' #...' comment outside quotes."""
    quote = ""
    for at, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or text[at - 1] in " \t"):
            return text[:at].rstrip()
    return text.rstrip()


def _unquote(text: str, line: int) -> str:
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'":
            raise YamlError(f"line {line}: unclosed quote")
        return text[1:-1].replace("''", "'")
    if len(text) < 2 or text[-1] != '"':
        raise YamlError(f"line {line}: unclosed quote")
    body = text[1:-1]
    if "\\" in body:
        body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    return body


def scalar(text: str, line: int) -> Any:
    """One value as YAML 1.2's core schema reads it (the subset's part of it)."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        return _unquote(text, line)
    if text in ("", "null", "Null", "NULL", "~"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if INT.match(text):
        return int(text)
    if FLOAT.match(text) and any(c.isdigit() for c in text):
        return float(text)
    if text[0] in "&*!|>" or text.startswith("- "):
        raise YamlError(f"line {line}: {text[:40]!r} is outside the subset this reader knows")
    return text


def _value(text: str, line: int) -> Any:
    """A value on the key's own line: a scalar, {} or a flow list of scalars."""
    if text == "{}":
        return {}
    if text.startswith("{"):
        raise YamlError(f"line {line}: flow mappings other than {{}} are outside the subset")
    if text.startswith("["):
        if not text.endswith("]") or "[" in text[1:] or "{" in text:
            raise YamlError(f"line {line}: only flat flow lists are in the subset")
        inner = text[1:-1].strip()
        return [scalar(item, line) for item in inner.split(",")] if inner else []
    return scalar(text, line)


def _lines(text: str) -> List[Tuple[int, int, str]]:
    """(line number, indent, content) of every line that holds something."""
    kept = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"line {number}: a tab in the indentation")
        content = strip_comment(raw.strip())
        if content in ("", "---"):
            continue
        kept.append((number, len(raw) - len(raw.lstrip(" ")), content))
    return kept


def loads(text: str) -> Dict[str, Any]:
    """The top-level mapping of text; YamlError outside the subset."""
    lines = _lines(text)
    if not lines:
        return {}
    value, at = _block(lines, 0, lines[0][1])
    if at != len(lines):
        raise YamlError(f"line {lines[at][0]}: indentation does not match any open block")
    if not isinstance(value, dict):
        raise YamlError("the document is not a mapping")
    return value


def _block(lines: List[Tuple[int, int, str]], at: int, indent: int) -> Tuple[Any, int]:
    """The mapping or sequence whose lines start at `at` with exactly `indent` spaces."""
    if lines[at][2].startswith("- ") or lines[at][2] == "-":
        items: List[Any] = []
        while at < len(lines) and lines[at][1] == indent and lines[at][2][:1] == "-":
            number, _, content = lines[at]
            item = content[1:].strip()
            pair = KEY.match(item) if not item.startswith(("'", '"')) else None
            at += 1
            if pair and at < len(lines) and lines[at][1] > indent:
                raise YamlError(f"line {number}: only one-line mappings inside sequences are in "
                                "the subset")
            if pair:  # verl's defaults lists: `- actor@actor_rollout_ref.actor: dp_actor`
                items.append({pair.group(1).strip(): _value(pair.group(2).strip(), number)})
            else:
                items.append(_value(item, number) if item else None)
        return items, at
    mapping: Dict[str, Any] = {}
    while at < len(lines) and lines[at][1] == indent:
        number, _, content = lines[at]
        match = KEY.match(content)
        if not match:
            raise YamlError(f"line {number}: not 'key: value': {content[:60]!r}")
        key = match.group(1).strip()
        key = _unquote(key, number) if key[:1] in ("'", '"') else key
        if key in mapping:
            raise YamlError(f"line {number}: {key} appears twice")
        rest = match.group(2).strip()
        at += 1
        nested = at < len(lines) and (lines[at][1] > indent or (
            lines[at][1] == indent and lines[at][2][:1] == "-" and not rest))
        if rest:
            mapping[key] = _value(rest, number)
        elif nested:
            mapping[key], at = _block(lines, at, lines[at][1])
        else:
            mapping[key] = None
        if rest and at < len(lines) and lines[at][1] > indent:
            raise YamlError(f"line {lines[at][0]}: a deeper line after a value")
    return mapping, at


def load(path) -> Dict[str, Any]:
    """The file's top-level mapping; OSError when unreadable, YamlError outside the subset."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise YamlError(f"larger than {MAX_BYTES} bytes")
    try:
        return loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise YamlError(f"not UTF-8 text: {exc.reason}")
