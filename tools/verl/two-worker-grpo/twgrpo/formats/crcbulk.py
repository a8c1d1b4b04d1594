"""CRC-32C of many records of one length at once, in the standard library, at C speed.

CRC-32C is linear over GF(2): the CRC of a record of L bytes is a constant for L (the initial
and final inversion) XOR, for each byte position i, a table lookup T_d[byte] where d = L-1-i is
the byte's distance from the end (T_0 is the byte table, T_d the same shifted by d zero bytes).
So the K records of one length are cut into L columns of K bytes (every record's i-th byte,
a strided slice), each column is mapped through its table with bytes.translate, one output
byte at a time, and the columns are XORed together as K-byte integers: the Python steps grow
with L, not with K x L. A column whose byte is the same in every record (a tag, a field
number) is folded into the constant. TensorBoard's scalar events repeat one layout step after
step, so most columns are constant and the few that vary (wall time, step, values) are read.
The result is every record's CRC, the same value crc32c.crc32c gives (tests/py/unit/test_crcbulk.py).
"""
from __future__ import annotations

import struct
from typing import List

from .crc32c import TABLE

MAX_LENGTH = 1024  # longer records are checked one by one (tables grow with the length)
_shifted: List[List[int]] = [TABLE]  # _shifted[d][b]: byte b followed by d zero bytes
_columns: List[List[bytes]] = []  # _columns[d][m]: byte m of _shifted[d], as translate tables
_start: List[int] = [0xFFFFFFFF]  # _start[n]: the register after n zero bytes from 0xFFFFFFFF


def _tables(length: int) -> None:
    """Extend the shifted tables and start values to records of `length` bytes."""
    while len(_shifted) < length:
        last = _shifted[-1]
        _shifted.append([TABLE[v & 0xFF] ^ (v >> 8) for v in last])
    while len(_columns) < length:
        values = _shifted[len(_columns)]
        _columns.append([bytes((v >> shift) & 0xFF for v in values) for shift in (0, 8, 16, 24)])
    while len(_start) <= length:
        v = _start[-1]
        _start.append(TABLE[v & 0xFF] ^ (v >> 8))


def crcs(joined: bytes, length: int) -> List[int]:
    """The CRC-32C of each of the len(joined) // length records laid end to end in joined."""
    count = len(joined) // length
    if not count:
        return []
    _tables(length)
    constant = _start[length] ^ 0xFFFFFFFF
    lanes = [0, 0, 0, 0]  # output byte m of every record, as one K-byte integer each
    for i in range(length):
        column = joined[i::length]
        distance = length - 1 - i
        if column.count(column[:1]) == count:  # the same byte in every record
            constant ^= _shifted[distance][column[0]]
            continue
        for m, table in enumerate(_columns[distance]):
            lanes[m] ^= int.from_bytes(column.translate(table), "little")
    out = bytearray(4 * count)
    for m in range(4):
        out[m::4] = lanes[m].to_bytes(count, "little")
    fill = struct.pack("<I", constant) * count
    return list(struct.unpack(f"<{count}I", (int.from_bytes(out, "little") ^
                                             int.from_bytes(fill, "little")).to_bytes(4 * count, "little")))
