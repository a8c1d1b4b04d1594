"""Parquet, written with the standard library on the prep box (prepare-inputs, generate-inputs
and the tests); the bundle only reads footers (twgrpo/formats/parquet.py). One row group,
uncompressed PLAIN pages and only required fields (strings, int64, structs, lists of structs):
enough for verl's GSM8K rows, and byte-for-byte reproducible, so generated inputs can be pinned
by hash. pyarrow reads back what it writes (tests/py/unit/test_parquet.py).
"""
from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

from twgrpo.formats import thrift as t
from twgrpo.formats.parquet import MAGIC

from .thriftwrite import encode_struct, write_varint

# Parquet enums used here.
INT64, BYTE_ARRAY = 2, 6
REQUIRED, REPEATED = 0, 2
UTF8, LIST_CT = 0, 3
PLAIN, RLE = 0, 3
UNCOMPRESSED = 0
DATA_PAGE = 0
CREATED_BY = "twgrpo parquet writer 1"

# A field spec is "string", "int64", ("struct", [(name, spec), ...]) or ("list", [(name, spec)...])
# (a list of structs with those fields).
Spec = Union[str, Tuple[str, Sequence[Tuple[str, Any]]]]


@dataclasses.dataclass
class _Leaf:
    path: List[str]
    kind: str
    max_rep: int
    max_def: int
    reps: List[int] = dataclasses.field(default_factory=list)
    defs: List[int] = dataclasses.field(default_factory=list)
    values: List[Any] = dataclasses.field(default_factory=list)


def _schema_elements(fields: Sequence[Tuple[str, Spec]], out: list, leaves: list,
                     path: List[str], rep: int, dfn: int) -> None:
    for name, spec in fields:
        if spec in ("string", "int64"):
            out.append([(1, t.I32, INT64 if spec == "int64" else BYTE_ARRAY), (3, t.I32, REQUIRED),
                        (4, t.BINARY, name), (6, t.I32, UTF8 if spec == "string" else None)])
            leaves.append(_Leaf(path + [name], spec, rep, dfn))
        elif spec[0] == "struct":
            out.append([(3, t.I32, REQUIRED), (4, t.BINARY, name), (5, t.I32, len(spec[1]))])
            _schema_elements(spec[1], out, leaves, path + [name], rep, dfn)
        elif spec[0] == "list":
            out.append([(3, t.I32, REQUIRED), (4, t.BINARY, name), (5, t.I32, 1),
                        (6, t.I32, LIST_CT)])
            out.append([(3, t.I32, REPEATED), (4, t.BINARY, "list"), (5, t.I32, 1)])
            out.append([(3, t.I32, REQUIRED), (4, t.BINARY, "element"), (5, t.I32, len(spec[1]))])
            _schema_elements(spec[1], out, leaves, path + [name, "list", "element"], rep + 1,
                             dfn + 1)
        else:
            raise ValueError(f"unsupported parquet field spec {spec!r}")


def _shred(value: Any, spec: Spec, leaves: List[_Leaf], index: int, rep: int, dfn: int) -> int:
    """Append one value's levels to its leaves; return the index of the next leaf."""
    if spec in ("string", "int64"):
        leaf = leaves[index]
        if spec == "string" and not isinstance(value, str):
            raise ValueError(f"{'.'.join(leaf.path)}: expected a string, got {value!r}")
        if spec == "int64" and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{'.'.join(leaf.path)}: expected an integer, got {value!r}")
        leaf.reps.append(rep)
        leaf.defs.append(dfn)
        leaf.values.append(value)
        return index + 1
    kind, fields = spec
    if kind == "struct":
        for name, child in fields:
            index = _shred(value[name], child, leaves, index, rep, dfn)
        return index
    # A list of structs: its leaves sit one repetition and one definition level deeper.
    count = _count_leaves(fields)
    if not value:
        for leaf in leaves[index:index + count]:
            leaf.reps.append(rep)
            leaf.defs.append(dfn)
        return index + count
    list_rep = leaves[index].max_rep
    for i, item in enumerate(value):
        _shred(item, ("struct", fields), leaves, index, rep if i == 0 else list_rep, dfn + 1)
    return index + count


def _count_leaves(fields: Sequence[Tuple[str, Spec]]) -> int:
    return sum(1 if spec in ("string", "int64") else _count_leaves(spec[1]) for _, spec in fields)


def _rle_levels(levels: List[int], bit_width: int) -> bytes:
    """RLE/bit-packed hybrid, RLE runs only, with the 4-byte length prefix of data page v1."""
    out = bytearray()
    width = (bit_width + 7) // 8
    i = 0
    while i < len(levels):
        j = i
        while j < len(levels) and levels[j] == levels[i]:
            j += 1
        header = bytearray()
        write_varint(header, (j - i) << 1)
        out += header + levels[i].to_bytes(width, "little")
        i = j
    return struct.pack("<I", len(out)) + bytes(out)


def _plain(leaf: _Leaf) -> bytes:
    out = bytearray()
    for value in leaf.values:
        if leaf.kind == "int64":
            out += struct.pack("<q", value)
        else:
            data = value.encode("utf-8")
            out += struct.pack("<I", len(data)) + data
    return bytes(out)


def write_table(path: Union[str, Path], fields: Sequence[Tuple[str, Spec]],
                rows: Sequence[Dict[str, Any]]) -> None:
    elements: list = [[(4, t.BINARY, "schema"), (5, t.I32, len(fields))]]
    leaves: List[_Leaf] = []
    _schema_elements(fields, elements, leaves, [], 0, 0)
    for row in rows:
        _shred(row, ("struct", fields), leaves, 0, 0, 0)
    body = bytearray(MAGIC)
    chunks = []
    for leaf in leaves:
        data = b""
        if leaf.max_rep:
            data += _rle_levels(leaf.reps, leaf.max_rep.bit_length())
        if leaf.max_def:
            data += _rle_levels(leaf.defs, leaf.max_def.bit_length())
        data += _plain(leaf)
        header = encode_struct([
            (1, t.I32, DATA_PAGE), (2, t.I32, len(data)), (3, t.I32, len(data)),
            (5, t.STRUCT, [(1, t.I32, len(leaf.defs)), (2, t.I32, PLAIN), (3, t.I32, RLE),
                           (4, t.I32, RLE)])])
        offset = len(body)
        body += header + data
        size = len(header) + len(data)
        chunks.append([(2, t.I64, offset), (3, t.STRUCT, [
            (1, t.I32, INT64 if leaf.kind == "int64" else BYTE_ARRAY),
            (2, t.LIST, (t.I32, [PLAIN, RLE])), (3, t.LIST, (t.BINARY, leaf.path)),
            (4, t.I32, UNCOMPRESSED), (5, t.I64, len(leaf.defs)), (6, t.I64, size),
            (7, t.I64, size), (9, t.I64, offset)])])
    footer = encode_struct([
        (1, t.I32, 1), (2, t.LIST, (t.STRUCT, elements)), (3, t.I64, len(rows)),
        (4, t.LIST, (t.STRUCT, [[(1, t.LIST, (t.STRUCT, chunks)), (2, t.I64, len(body) - 4),
                                 (3, t.I64, len(rows))]])),
        (6, t.BINARY, CREATED_BY)])
    body += footer + struct.pack("<I", len(footer)) + MAGIC
    Path(path).write_bytes(bytes(body))


# verl v0.6 GSM8K rows, in the field order verl's own preprocessing produces.
VERL_GSM8K_FIELDS = [
    ("data_source", "string"),
    ("prompt", ("list", [("role", "string"), ("content", "string")])),
    ("ability", "string"),
    ("reward_model", ("struct", [("style", "string"), ("ground_truth", "string")])),
    ("extra_info", ("struct", [("split", "string"), ("index", "int64"), ("answer", "string"),
                               ("question", "string")])),
]
VERL_COLUMNS = [name for name, _ in VERL_GSM8K_FIELDS]
