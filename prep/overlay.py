"""make rayjob's overlay: a small YAML (or JSON) fragment merged into the RayJob's pod templates.

The fragment is a pod template piece (`spec: {tolerations: [...]}`), merged into the head's and
every worker group's template; a fragment whose top-level keys are only `head` and `workers`
gives each its own piece. Merging: mappings merge key by key, lists are appended to (tolerations,
volumes, env), except `containers`, whose entries merge into the container of the same name (an
entry without a name: the Ray container), and a scalar replaces the generated one.

The parser takes a strict subset of YAML, enough for pod specs, and refuses the rest with the line
number: block mappings and sequences by indentation (spaces), `key: value`, `- item`,
`- key: value`, plain, 'single' and "double" quoted scalars, true/false/null, integers and
decimals, `#` comments, and JSON flow values (`[...]`, `{...}`) on one line. No anchors,
aliases, tags, block scalars (| >) or several documents. A file that is JSON is read as JSON.
Standard library only; bounded: at most MAX_BYTES and MAX_DEPTH levels.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, List, Tuple

from prep import bundle_layout  # noqa: F401  (importing it puts the bundle's twgrpo on the path)
from twgrpo.formats.yamlsubset import strip_comment  # noqa: E402  (the one comment rule)

MAX_BYTES = 256 << 10
MAX_DEPTH = 32
KEY = re.compile(r"^([A-Za-z0-9_./-]+|\"[^\"]*\"|'[^']*'):(\s+(.*))?\Z")
INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)\Z")
FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")
REFUSED = ("&", "*", "!", "|", ">", "%", "@", "`")


class OverlayError(ValueError):
    """One line: where in the fragment, and what is not taken."""


def _scalar(text: str, line: int) -> Any:
    if text == "":
        return None
    if text[0] in "[{":
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise OverlayError(f"line {line}: a flow value must be JSON on one line ({exc})") from None
    if text[0] == '"':
        try:
            return json.loads(text)
        except ValueError:
            raise OverlayError(f"line {line}: a malformed \"double-quoted\" string") from None
    if text[0] == "'":
        if len(text) < 2 or not text.endswith("'"):
            raise OverlayError(f"line {line}: a malformed 'single-quoted' string")
        return text[1:-1].replace("''", "'")
    if text[0] in REFUSED:
        raise OverlayError(f"line {line}: {text[0]!r} (anchors, aliases, tags, block scalars) is "
                           "not taken: write the value out")
    if text in ("true", "false"):
        return text == "true"
    if text in ("null", "~"):
        return None
    if INT.match(text):
        return int(text)
    if FLOAT.match(text):
        return float(text)
    return text


def _lines(text: str) -> List[Tuple[int, int, str]]:
    """(line number, indent, content) of every line that holds something."""
    out = []
    for number, raw in enumerate(text.split("\n"), 1):
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise OverlayError(f"line {number}: indent with spaces, not tabs")
        content = strip_comment(raw.strip())
        if content in ("---", "..."):
            if out:
                raise OverlayError(f"line {number}: one document only")
            continue
        if content:
            out.append((number, len(raw) - len(raw.lstrip()), content))
    return out


def _block(lines, i: int, indent: int, depth: int) -> Tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise OverlayError(f"line {lines[i][0]}: nested deeper than {MAX_DEPTH} levels")
    if lines[i][2].startswith("- ") or lines[i][2] == "-":
        return _sequence(lines, i, indent, depth)
    return _mapping(lines, i, indent, depth)


def _value(lines, i: int, indent: int, rest: str, depth: int) -> Tuple[Any, int]:
    """A key's or item's value: inline, or the block on the lines below (deeper indent)."""
    if rest:
        return _scalar(rest, lines[i][0]), i + 1
    if i + 1 < len(lines) and (lines[i + 1][1] > indent or
                               (lines[i + 1][1] == indent and lines[i + 1][2].startswith("- "))):
        return _block(lines, i + 1, lines[i + 1][1], depth + 1)
    return None, i + 1


def _mapping(lines, i: int, indent: int, depth: int) -> Tuple[dict, int]:
    out: dict = {}
    while i < len(lines) and lines[i][1] == indent and not lines[i][2].startswith("- "):
        number, _, content = lines[i]
        match = KEY.match(content)
        if not match:
            raise OverlayError(f"line {number}: expected 'key: value', got {content[:60]!r}")
        key = _scalar(match.group(1), number) if match.group(1)[0] in "\"'" else match.group(1)
        if key in out:
            raise OverlayError(f"line {number}: {key!r} is given twice")
        out[key], i = _value(lines, i, indent, match.group(3) or "", depth)
    if i < len(lines) and lines[i][1] > indent:
        raise OverlayError(f"line {lines[i][0]}: indented more than the key above it holds")
    return out, i


def _sequence(lines, i: int, indent: int, depth: int) -> Tuple[list, int]:
    out: list = []
    while i < len(lines) and lines[i][1] == indent and (lines[i][2].startswith("- ")
                                                         or lines[i][2] == "-"):
        number, _, content = lines[i]
        rest = content[2:].strip()
        if KEY.match(rest):
            inner = indent + 2 + (len(content[2:]) - len(content[2:].lstrip()))
            lines[i] = (number, inner, rest)  # "- key: v" opens a mapping at the item's column
            item, i = _mapping(lines, i, inner, depth + 1)
        else:
            item, i = _value(lines, i, indent, rest, depth)
        out.append(item)
    return out, i


def depth(value: Any) -> int:
    """How deeply value nests (iteratively: no recursion on hostile input)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack += [(v, level + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, level + 1) for v in item]
    return deepest


def parse(text: str) -> Any:
    """The fragment's value, at most MAX_DEPTH deep; OverlayError for anything outside the subset."""
    value = _parse(text)
    if depth(value) > MAX_DEPTH:
        raise OverlayError(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _parse(text: str) -> Any:
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise OverlayError(f"larger than {MAX_BYTES >> 10} KiB")
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise OverlayError(f"not JSON ({exc})") from None
    lines = _lines(text)
    if not lines:
        return {}
    if lines[0][1] != 0:
        raise OverlayError(f"line {lines[0][0]}: the first line must not be indented")
    value, i = _block(lines, 0, 0, 0)
    if i < len(lines):
        raise OverlayError(f"line {lines[i][0]}: does not fit the structure above it")
    return value


def merge(base: Any, extra: Any, path: str = "") -> Any:
    """extra merged into a copy of base (the rules in this module's docstring)."""
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for key, value in extra.items():
            out[key] = merge(base[key], value, f"{path}/{key}") if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(extra, list):
        if path.endswith("/containers"):
            return _merge_containers(base, extra, path)
        return base + copy.deepcopy(extra)
    if isinstance(base, (dict, list)) or isinstance(extra, (dict, list)):
        raise OverlayError(f"{path or '/'}: a {type(extra).__name__} cannot replace a "
                           f"{type(base).__name__}")
    return copy.deepcopy(extra)


def _merge_containers(base: list, extra: list, path: str) -> list:
    out = [dict(c) for c in base]
    for item in extra:
        if not isinstance(item, dict):
            raise OverlayError(f"{path}: a container is a mapping")
        name = item.get("name", out[0].get("name") if out else None)
        match = [n for n, c in enumerate(out) if c.get("name") == name]
        if match:
            out[match[0]] = merge(out[match[0]], item, f"{path}/{name}")
        else:
            out.append(copy.deepcopy(item))
    return out


def pieces(document: Any) -> Tuple[dict, dict]:
    """(head piece, workers piece) of a parsed overlay."""
    if not isinstance(document, dict):
        raise OverlayError("the overlay must be a mapping (a pod template piece, or head:/workers:)")
    if document and set(document) <= {"head", "workers"}:
        head, workers = document.get("head") or {}, document.get("workers") or {}
        if not isinstance(head, dict) or not isinstance(workers, dict):
            raise OverlayError("head: and workers: each hold a pod template piece (a mapping)")
        return head, workers
    return document, document
