"""Thrift compact protocol, read: enough for parquet's footer (the prep box's writer is
prep/volume/thriftwrite.py)."""
from __future__ import annotations

import struct
from typing import Any, Dict, Tuple

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)


class ThriftError(ValueError):
    pass


def read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
    """An unsigned LEB128 varint (thrift compact and protobuf share it) and the next position."""
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ThriftError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ThriftError("varint too long")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(buf: bytes, pos: int, ttype: int, depth: int) -> Tuple[Any, int]:
    if depth > 32:
        raise ThriftError("nesting too deep")
    if ttype in (BOOL_TRUE, BOOL_FALSE):  # inside a list a bool is one byte
        if pos >= len(buf):
            raise ThriftError("truncated bool")
        return buf[pos] == BOOL_TRUE, pos + 1
    if ttype == BYTE:
        if pos >= len(buf):
            raise ThriftError("truncated byte")
        return struct.unpack_from("b", buf, pos)[0], pos + 1
    if ttype in (I16, I32, I64):
        raw, pos = read_varint(buf, pos)
        return _zigzag(raw), pos
    if ttype == DOUBLE:
        if pos + 8 > len(buf):
            raise ThriftError("truncated double")
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if ttype == BINARY:
        size, pos = read_varint(buf, pos)
        if pos + size > len(buf):
            raise ThriftError("truncated binary")
        return bytes(buf[pos:pos + size]), pos + size
    if ttype in (LIST, SET):
        if pos >= len(buf):
            raise ThriftError("truncated list")
        header = buf[pos]
        pos += 1
        size, etype = header >> 4, header & 0x0F
        if size == 15:
            size, pos = read_varint(buf, pos)
        items = []
        for _ in range(size):
            item, pos = _value(buf, pos, etype, depth + 1)
            items.append(item)
        return items, pos
    if ttype == MAP:
        size, pos = read_varint(buf, pos)
        if size == 0:
            return {}, pos
        types = buf[pos]
        pos += 1
        result = {}
        for _ in range(size):
            key, pos = _value(buf, pos, types >> 4, depth + 1)
            result[key], pos = _value(buf, pos, types & 0x0F, depth + 1)
        return result, pos
    if ttype == STRUCT:
        return read_struct(buf, pos, depth + 1)
    raise ThriftError(f"unknown compact type {ttype}")


def read_struct(buf: bytes, pos: int = 0, depth: int = 0) -> Tuple[Dict[int, Any], int]:
    """Decode one struct into {field id: value}; unknown fields are kept, not skipped."""
    fields: Dict[int, Any] = {}
    last = 0
    while True:
        if pos >= len(buf):
            raise ThriftError("truncated struct")
        header = buf[pos]
        pos += 1
        if header == 0:
            return fields, pos
        delta, ttype = header >> 4, header & 0x0F
        if delta:
            fid = last + delta
        else:
            raw, pos = read_varint(buf, pos)
            fid = _zigzag(raw)
        if ttype in (BOOL_TRUE, BOOL_FALSE):  # a struct field's bool lives in its type nibble
            fields[fid] = ttype == BOOL_TRUE
        else:
            fields[fid], pos = _value(buf, pos, ttype, depth)
        last = fid
