"""A small YAML writer for manifests: mappings, lists, strings, numbers and booleans, block style.

Strings are written as JSON strings (valid YAML double-quoted scalars), or as a literal block
(`|-`) when they span lines, so a Driver command stays readable in the manifest. Standard
library only; the tests read the output back with a real YAML parser.
"""
from __future__ import annotations

import json
import re
from typing import List

PLAIN_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9._/-]*\Z")  # \Z: $ would let a final newline in
RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def key_text(key: str) -> str:
    return key if PLAIN_KEY.match(key) and key.lower() not in RESERVED else scalar(key)


def literal_ok(text: str) -> bool:
    """A literal block keeps text exactly: one line at least, no leading blank on the first line,
    printable characters, no trailing newline (written with `|-`)."""
    return ("\n" in text and not text.endswith("\n") and not text[:1].isspace()
            and all(c == "\n" or c.isprintable() for c in text)
            and all(line.strip() for line in text.splitlines()[:1]))


def lines(value: object, indent: int) -> List[str]:
    pad = " " * indent
    out: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += entry(f"{pad}{key_text(str(key))}:", item, indent)
    elif isinstance(value, list):
        for item in value:
            out += entry(f"{pad}-", item, indent, in_list=True)
    return out


def entry(head: str, item: object, indent: int, in_list: bool = False) -> List[str]:
    if isinstance(item, dict) and item:
        if in_list:  # "- key: value" with the rest of the mapping under it
            inner = lines(item, indent + 2)
            return [f"{head} {inner[0].lstrip()}", *inner[1:]]
        return [head, *lines(item, indent + 2)]
    if isinstance(item, list) and item:
        return [head, *lines(item, indent + 2)]
    if isinstance(item, (dict, list)):
        return [f"{head} {'{}' if isinstance(item, dict) else '[]'}"]
    if isinstance(item, str) and literal_ok(item):
        pad = " " * (indent + 2)
        return [f"{head} |-", *[f"{pad}{line}" if line else "" for line in item.split("\n")]]
    return [f"{head} {scalar(item)}"]


def dump(document: dict, comments: List[str] = ()) -> str:
    """The document as YAML text, after `# ` comment lines (a comment's own line breaks and
    control characters made visible, so no value in a comment can start a YAML line)."""
    head = [f"# {text if text.isprintable() else json.dumps(text)[1:-1]}".rstrip()
            for text in map(str, comments)]
    return "\n".join([*head, *lines(document, 0)]) + "\n"
