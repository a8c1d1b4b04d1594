"""Parquet footer facts for checks, with the standard library: reading needs only the footer
(FileMetaData, thrift compact): row count, row groups, the top-level column names and every
field's path. Parquet is written on the prep box (prep/volume/parquetwrite.py), not here.
"""
from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from . import thrift as t
from .bounded import open_regular

MAGIC = b"PAR1"


class ParquetError(ValueError):
    pass


@dataclasses.dataclass
class Footer:
    num_rows: int
    row_group_rows: List[int]
    columns: List[str]
    created_by: Optional[str]
    # Every schema element below the root as a dotted path ("reward_model.ground_truth",
    # "prompt.list.element.role"): nested fields, whatever a writer names its list levels.
    paths: List[str] = dataclasses.field(default_factory=list)


def read_footer(path: Union[str, Path]) -> Footer:
    with open_regular(path)[0] as stream:  # a FIFO or device is refused, never waited on
        size = stream.seek(0, 2)
        if size < 12:
            raise ParquetError(f"{size} bytes is too short for parquet")
        stream.seek(0)
        head = stream.read(4)
        stream.seek(size - 8)
        tail = stream.read(8)
        if head != MAGIC or tail[4:] != MAGIC:
            raise ParquetError("no PAR1 magic at both ends (truncated or not parquet)")
        length = struct.unpack("<I", tail[:4])[0]
        if length <= 0 or length > size - 12:
            raise ParquetError(f"footer length {length} does not fit a {size}-byte file")
        stream.seek(size - 8 - length)
        raw = stream.read(length)
    try:
        meta, _ = t.read_struct(raw)
    except t.ThriftError as exc:
        raise ParquetError(f"footer does not decode: {exc}") from None
    if not isinstance(meta.get(3), int) or not isinstance(meta.get(2), list):
        raise ParquetError("footer lacks num_rows or schema")
    groups = [g.get(3, 0) for g in meta.get(4, []) if isinstance(g, dict)]
    created = meta.get(6)
    return Footer(meta[3], groups, _top_level_names(meta[2]),
                  created.decode("utf-8", "replace") if isinstance(created, bytes) else None,
                  _paths(meta[2]))


def _paths(schema: List[Dict[int, Any]]) -> List[str]:
    """Dotted paths of every element under the root, in schema (depth-first) order."""
    paths: List[str] = []
    stack: List[Tuple[str, int]] = []  # (path of an open group, children still to come)
    for element in schema[1:]:
        if not isinstance(element, dict):
            raise ParquetError("a schema element is not a struct")
        while stack and stack[-1][1] == 0:
            stack.pop()
        name = element.get(4, b"")
        name = name.decode("utf-8", "replace") if isinstance(name, bytes) else ""
        path = f"{stack[-1][0]}.{name}" if stack else name
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1] - 1)
        paths.append(path)
        children = element.get(5, 0) or 0
        if children:
            stack.append((path, children))
    return paths


def _top_level_names(schema: List[Dict[int, Any]]) -> List[str]:
    if not schema:
        return []
    names, index = [], 1

    def skip(i: int) -> int:  # index after element i and all of its descendants
        children = schema[i].get(5, 0) or 0
        i += 1
        for _ in range(children):
            i = skip(i)
        return i

    for _ in range(schema[0].get(5, 0) or 0):
        if index >= len(schema):
            raise ParquetError("schema is shorter than its root says")
        names.append(schema[index].get(4, b"").decode("utf-8", "replace"))
        index = skip(index)
    return names
