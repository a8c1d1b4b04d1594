"""TensorBoard's Event protobuf without protobuf: the step, wall time and scalar values of
one event record (tfevents.py reads the records and holds the values).
"""
from __future__ import annotations

import struct
from typing import Dict, Iterator, List, Optional, Tuple

from .thrift import read_varint


def _fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """Protobuf wire format: (field number, wire type, raw value)."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("protobuf field runs past the end of its message")
        yield number, wire, value


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 2, 3, 9, 14, 19


def _tensor_scalar(buf: bytes) -> Optional[float]:
    """A scalar from a TensorProto (new-style summaries): float_val, double_val or content;
    None for a tensor of more than one element (a PR curve, a histogram), as TensorBoard has."""
    dtype, content, first = None, None, None  # first: the first value of any value field
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 0:
            dtype = value
        elif number == 2 and wire == 2 and any(dim.get(1) != 1 for dim in _dims(value)):
            return None
        elif number == 4 and wire == 2:
            content = value
        elif number == 5 and wire in (2, 5):  # float_val, packed or not
            first = _first_packed(first, value, "<f")
        elif number == 6 and wire in (1, 2):  # double_val
            first = _first_packed(first, value, "<d")
        elif number in (7, 10, 13) and (wire == 0 or value):  # int, int64, half bits: packed or not
            bits = value if wire == 0 else read_varint(value, 0)[0]  # the first value
            if first is None:  # each field as protobuf reads it: int32 and int64 cut to their width
                first = (_Half(bits & 0xFFFF) if number == 13 else
                         float(_int64(bits)) if number == 10 else float(_int32(bits)))
    if isinstance(first, _Half):  # 16 bits: a bfloat16's or an IEEE half's, as dtype says
        return _half(first.bits, dtype)
    if first is not None:
        return float(first)
    if content:
        if dtype == DT_BFLOAT16 and len(content) >= 2:
            return _half(struct.unpack_from("<H", content)[0], dtype)
        fmt = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q", DT_HALF: "<e"}
        if dtype in fmt and len(content) >= struct.calcsize(fmt[dtype]):
            return float(struct.unpack_from(fmt[dtype], content)[0])
    return None


class _Half:
    """A half_val's 16 bits, read by dtype once the whole tensor is read (dtype may come last)."""
    __slots__ = ("bits",)

    def __init__(self, bits: int) -> None:
        self.bits = bits


def _half(bits: int, dtype: Optional[int]) -> float:
    """A bfloat16 is the top half of a float32 (as TensorFlow reads it); anything else in
    half_val is an IEEE half (float16)."""
    if dtype == DT_BFLOAT16:
        return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
    return float(struct.unpack("<e", struct.pack("<H", bits))[0])


def _int32(varint: int) -> int:
    """An int32 field's value: the low 32 bits in two's complement, as protobuf reads it."""
    return ((varint & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _int64(varint: int) -> int:
    """An int64 field's value: a 10th byte's bits past 64 dropped, as protobuf drops them, and
    the rest read in two's complement."""
    varint &= (1 << 64) - 1
    return varint if varint < 1 << 63 else varint - (1 << 64)


def _first_packed(first: Optional[float], value: bytes, fmt: str) -> Optional[float]:
    """first, or the first of value's packed numbers: one unpack, however many it holds (a
    15 MiB tensor is not turned into a list); a length that is no whole count of them is
    damage (struct.error), as before."""
    size = struct.calcsize(fmt)
    if len(value) % size:
        raise struct.error(f"{len(value)} bytes of packed {fmt[1:]} values")
    return first if first is not None or not value else struct.unpack_from(fmt, value)[0]


def _dims(shape: bytes) -> Iterator[Dict[int, object]]:
    """Each dimension of a TensorShapeProto as {1: size} (a size of 0 is left out)."""
    return ({n: v for n, _, v in _fields(dim)} for number, wire, dim in _fields(shape)
            if number == 2 and wire == 2)


def _simple_event(data: bytes) -> Optional[Tuple[int, float, List[Tuple[str, float]]]]:
    """scalars_of_event for the layout TensorBoard's writers give a scalar event (wall time,
    step, then a summary of {tag, simple_value} values, each value's length under 128, the
    summary's under 16 KiB), read by position; None for any other layout, which the general
    reader then takes."""
    try:
        if data[0] != 0x09 or data[9] != 0x10:
            return None
        wall = struct.unpack_from("<d", data, 1)[0]
        pos, step, shift = 10, 0, 0
        while True:
            byte = data[pos]
            pos += 1
            step |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                return None
        step = _int64(step)
        end = len(data)
        if pos == end:
            return step, wall, []
        if data[pos] != 0x2A:
            return None
        size, pos = data[pos + 1], pos + 2
        if size >= 0x80:  # a summary of several values: a two-byte length
            size, pos = (size & 0x7F) | data[pos] << 7, pos + 1
            if size >= 1 << 14 or size < 0x80:
                return None
        if pos + size != end:
            return None
        found = []
        while pos < end:
            item, tag_length = data[pos + 1], data[pos + 3]
            tag_end = pos + 4 + tag_length
            if data[pos] != 0x0A or data[pos + 2] != 0x0A or item >= 0x80 or tag_length >= 0x80 \
                    or tag_end + 5 != pos + 2 + item or data[tag_end] != 0x15:
                return None
            found.append((data[pos + 4:tag_end].decode("utf-8", "replace"),
                          struct.unpack_from("<f", data, tag_end + 1)[0]))
            pos = tag_end + 5
        return step, wall, found
    except (IndexError, struct.error):
        return None


# (length, last tag byte) -> (struct of the record, step bytes, the fixed bytes, the tags): a
# layout _simple_event read once, for the records that repeat it (a writer's every step). One
# reader's: scalars_of_event's caller keeps it for the files it reads.
Layouts = Dict[Tuple[int, int], Tuple[struct.Struct, int, tuple, Tuple[str, ...]]]
MAX_LAYOUTS = 4096


def _learn(layouts: Layouts, data: bytes, found: List[Tuple[str, float]]) -> None:
    """Remember the layout of a record _simple_event read (with at least one value): the
    struct that cuts it into its fixed bytes (field keys, lengths, tags) and its wall time,
    step bytes and values; a record with the same fixed bytes reads the same way."""
    if len(layouts) >= MAX_LAYOUTS:
        return
    pos = 10
    while data[pos] >= 0x80:
        pos += 1
    width, pos = pos + 1 - 10, pos + 1  # the step's varint bytes
    fmt, start = f"<cdc{width}s", pos
    pos += 2 if data[pos + 1] < 0x80 else 3  # the summary's key and length: fixed bytes too
    while pos < len(data):
        value_at = pos + 4 + data[pos + 3] + 1
        fmt += f"{value_at - start}sf"
        pos = start = value_at + 4
    layout = struct.Struct(fmt)
    layouts[(len(data), data[-6])] = (layout, width, layout.unpack(data)[4::2],
                                       tuple(tag for tag, _ in found))


def _known_layout(layouts: Layouts, data: bytes
                  ) -> Optional[Tuple[int, float, List[Tuple[str, float]]]]:
    """_simple_event's answer for a record in a layout seen before (_learn), from one unpack
    and one comparison of its fixed bytes; None when the layout is new or differs."""
    row = known_row(layouts, data)
    return None if row is None else (row[0], row[1], list(zip(row[2], row[3])))


def known_row(layouts: Layouts, data: bytes) -> Optional[Tuple[int, float, Tuple[str, ...], tuple]]:
    """(step, wall time, tags, values) of a record in a layout seen before: the layout's tags
    are one tuple for all its records (tfevents folds such records a tag at a time)."""
    known = layouts.get((len(data), data[-6])) if len(data) > 16 else None
    if known is None:
        return None
    layout, width, fixed, tags = known
    fields = layout.unpack(data)
    if fields[4::2] != fixed or fields[0] != b"\t" or fields[2] != b"\x10":
        return None
    step, shift, varint = 0, 0, fields[3]
    for byte in varint[:-1]:  # each byte but the last has its continuation bit set
        if byte < 0x80:
            return None
        step |= (byte & 0x7F) << shift
        shift += 7
    if varint[-1] >= 0x80 or width > 9:
        return None
    step |= varint[-1] << shift
    return step, fields[1], tags, fields[5::2]


def scalars_of_event(data: bytes, layouts: Optional[Layouts] = None
                     ) -> Tuple[int, float, List[Tuple[str, float]]]:
    """(step, wall time, [(tag, value)]) of one Event record; with layouts (a dict the caller
    keeps), records in a layout seen before are read from it."""
    simple = _known_layout(layouts, data) if layouts is not None else None
    if simple is not None:
        return simple
    simple = _simple_event(data)
    if simple is not None:
        if simple[2] and layouts is not None:
            _learn(layouts, data, simple[2])
        return simple
    step, wall, found = 0, 0.0, []
    # A field of a known number in another wire type is an unknown field, as protobuf reads it.
    for number, wire, value in _fields(data):
        if number == 1 and wire == 1:
            wall = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            step = _int64(value)
        elif number == 5 and wire == 2:
            for n, item_wire, item in _fields(value):
                if n != 1 or item_wire != 2:
                    continue
                tag, scalar = None, None
                for vn, vw, vv in _fields(item):
                    if vn == 1 and vw == 2:
                        tag = vv.decode("utf-8", "replace")
                    elif vn == 2 and vw == 5:
                        scalar = struct.unpack("<f", vv)[0]
                    elif vn == 8 and vw == 2:
                        scalar = _tensor_scalar(vv)
                if tag is not None and scalar is not None:
                    found.append((tag, scalar))
    return step, wall, found
