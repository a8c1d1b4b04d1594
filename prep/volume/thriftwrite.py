"""Thrift compact protocol, written: enough for parquet's footer and page headers. The bundle
only reads parquet (twgrpo/formats/thrift.py, whose type ids this uses); the prep box writes it.

A struct is a list of (field id, type, value); a list value is (element type, items); a field
whose value is None is left out.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from twgrpo.formats.thrift import BINARY, I16, I32, I64, LIST, STRUCT, ThriftError


def write_varint(out: bytearray, n: int) -> None:
    """An unsigned LEB128 varint."""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _write_value(out: bytearray, ttype: int, value: Any) -> None:
    if ttype in (I16, I32, I64):
        write_varint(out, (value << 1) ^ (value >> 63))
    elif ttype == BINARY:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        write_varint(out, len(data))
        out += data
    elif ttype == LIST:
        etype, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | etype)
        else:
            out.append(0xF0 | etype)
            write_varint(out, len(items))
        for item in items:
            _write_value(out, etype, item)
    elif ttype == STRUCT:
        write_struct(out, value)
    else:
        raise ThriftError(f"cannot write compact type {ttype}")


def write_struct(out: bytearray, fields: List[Tuple[int, int, Any]]) -> None:
    last = 0
    for fid, ttype, value in fields:
        if value is None:
            continue
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | ttype)
        else:
            out.append(ttype)
            write_varint(out, (fid << 1) ^ (fid >> 63))
        _write_value(out, ttype, value)
        last = fid
    out.append(0)


def encode_struct(fields: List[Tuple[int, int, Any]]) -> bytes:
    out = bytearray()
    write_struct(out, fields)
    return bytes(out)
