"""The zip structure of a torch.save archive, walked entry by entry: the end records, the central
directory, each local header, that entries neither overlap nor leave the file, and every
entry's CRC-32. torchzip.py reads data.pkl and judges the storages around it.

The archive is read by slicing, source[a:b]: the file's bytes when it is held in memory, or a
File over its stream when it is too big to hold.
"""
from __future__ import annotations

import struct
import zlib
from array import array
from typing import List, Optional, Set, Tuple

from .torchpickle import CHUNK, NotTorchSave

END, END64, LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
CENTRAL, LOCAL, DESCRIPTOR = b"PK\x01\x02", b"PK\x03\x04", b"PK\x07\x08"
BOOKKEEPING = {"data.pkl", "byteorder", "version", ".format_version", ".storage_alignment",
               ".data/serialization_id", ".data/version"}
WINDOW = 8 << 10  # a File is read through a window of this size (and its CRCs in CHUNKs)


class Damaged(ValueError):
    """The archive is cut off or its bytes changed (CRC, truncation)."""


def end_records(source, size: int) -> Tuple[int, int, int]:
    """(entry count, central directory offset, its size) from the end records."""
    tail_size = min(size, 22 + 0xFFFF)
    tail = source[size - tail_size:size]
    at = tail.rfind(END)
    if at == -1 or len(tail) - at < 22:
        raise Damaged("no zip end record: the file is cut off or not a zip archive")
    disk, cd_disk, here, count, cd_size, cd_offset, comment = struct.unpack_from("<HHHHIIH", tail, at + 4)
    end_at = size - tail_size + at
    if end_at + 22 + comment != size:
        raise Damaged(f"{size - end_at - 22 - comment} stray bytes after the zip end record")
    if disk or cd_disk or here != count:
        raise NotTorchSave("a multi-disk zip archive")
    limit = end_at
    located = at >= 20 and tail[at - 20:at - 16] == LOCATOR64
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF or located:
        if not located:
            raise Damaged("zip64 sizes without a zip64 locator")
        _, record_at, _ = struct.unpack_from("<IQI", tail, at - 16)
        if not 0 <= record_at <= end_at - 20 - 56:
            raise Damaged(f"zip64 end record offset {record_at} is outside the file")
        record = source[record_at:record_at + 56]
        if record[:4] != END64:
            raise Damaged("no zip64 end record where the locator points")
        _, _, _, disk, cd_disk, here, count, cd_size, cd_offset = struct.unpack_from("<QHHIIQQQQ", record, 4)
        if disk or cd_disk or here != count:
            raise NotTorchSave("a multi-disk zip archive")
        limit = record_at
    if cd_offset + cd_size > limit:
        raise Damaged(f"the central directory ({cd_size} bytes at {cd_offset}) runs past the end records")
    if count * 46 > cd_size:
        raise Damaged(f"{count} entries cannot fit a {cd_size}-byte central directory")
    return count, cd_offset, cd_size


class Found:
    """What the walk keeps: a few numbers, and one size per storage (keys are 0..n-1)."""

    def __init__(self) -> None:
        self.top = ""
        self.names: Set[str] = set()  # bookkeeping entries seen
        self.present = bytearray()  # storage key -> 1 once its entry was seen
        self.sizes = array("Q")  # storage key -> entry size
        self.pickle_at = self.pickle_size = 0
        self.spans: Optional[List[Tuple[str, int, int, int]]] = None  # CRCs left to check_spans


_CENTRAL = "<4s4xHH4xIIIHHH8xI"  # the central directory fields the walk reads
_LOCAL = "<4s22xHH"  # and a local header's signature, name and extra lengths


def walk(source, count: int, cd_offset: int, cd_size: int, spans: Optional[list] = None) -> Found:
    """Each central directory entry in turn, then its local header and data: entries must come
    in file order (torch.save writes them so), inside the file, not overlapping, CRCs right
    (or, given a spans list, each entry's CRC appended there to be checked later). ``source``
    is the file's bytes or a File; either is read by slicing. The loop runs once per entry (a
    shard has hundreds): the storage entries torch.save writes take the shortest way."""
    found = Found()
    found.spans = spans
    view = memoryview(source) if isinstance(source, bytes) else None  # CRCs without copies
    unpack, local_unpack = struct.Struct(_CENTRAL).unpack, struct.Struct(_LOCAL).unpack
    crc32 = zlib.crc32
    sizes, present = found.sizes, found.present
    storages, key = b"", 0  # b"<top>/data/" once the first entry named the folder; next key
    digits = _digits(count)
    end, at, stop = 0, cd_offset, cd_offset + cd_size
    for index in range(count):
        fixed = source[at:at + 46]
        if at + 46 > stop or len(fixed) != 46:
            raise Damaged(f"central directory entry {index} is malformed")
        signature, flags, method, crc, csize, usize, name_len, extra_len, comment_len, local_at = unpack(fixed)
        if signature != CENTRAL:
            raise Damaged(f"central directory entry {index} is malformed")
        name = source[at + 46:at + 46 + name_len]
        at += 46 + name_len + extra_len + comment_len
        if at > stop:
            raise Damaged(f"central directory entry {index} is cut off")
        if extra_len:
            usize, csize, local_at = _zip64(source[at - extra_len - comment_len:at - comment_len],
                                            usize, csize, local_at)
        if (key < len(digits) and name == storages + digits[key] and index and
                not (flags & 1 or method) and csize == usize):
            if key >= count:
                raise NotTorchSave(f"entry {_text(name)}: storage keys run 0..n-1 for n entries")
            present.append(1)  # <top>/data/<the next key>, stored: as torch.save writes them
            sizes.append(usize)
            key += 1
        else:  # anything else, with every rule and its words
            _entry(found, index, _text(name), flags, method, csize, usize, count)
            if index == 0:
                storages = name.partition(b"/")[0] + b"/data/"
            key = len(sizes)
        if local_at < end:
            raise NotTorchSave(f"entry {_text(name)} at byte {local_at} overlaps the entry before "
                               f"it (which ends at {end}) or is out of order")
        header = source[local_at:local_at + 30]  # the local header: it must name the entry
        if len(header) < 30:
            raise Damaged(f"no local header at byte {local_at} for entry {_text(name)}")
        signature, local_name_len, local_extra_len = local_unpack(header)
        if signature != LOCAL:
            raise Damaged(f"no local header at byte {local_at} for entry {_text(name)}")
        data_at = local_at + 30 + local_name_len
        if source[data_at - local_name_len:data_at] != name:
            raise NotTorchSave(f"the local header at byte {local_at} names another file than {_text(name)}")
        data_at += local_extra_len
        end = data_at + usize
        if end > cd_offset:
            raise Damaged(f"entry {_text(name)} ({usize} bytes at {data_at}) runs past the central "
                          "directory: the file is cut off")
        if spans is not None:
            spans.append((_text(name), data_at, usize, crc))
        elif view is not None:
            if crc32(view[data_at:end]) != crc:
                raise Damaged(f"entry {_text(name)} fails its CRC check")
        elif stream_crc(source.stream, data_at, usize, _text(name)) != crc:
            raise Damaged(f"entry {_text(name)} fails its CRC check")
        if flags & 8:  # a data descriptor follows: signature, CRC and two sizes of 4 or 8 bytes
            signed = source[end:end + 4] == DESCRIPTOR
            wide = usize >= 0xFFFFFFFF or (local_extra_len > 0 and
                                           _has_zip64(source[data_at - local_extra_len:data_at]))
            end += (4 if signed else 0) + (20 if wide else 12)
            if end > cd_offset:
                raise Damaged(f"entry {_text(name)} runs past the central directory")
        if index == 0:
            found.pickle_at, found.pickle_size = data_at, usize
    for needed in ("data.pkl", "version", "byteorder"):
        if needed not in found.names:
            raise NotTorchSave(f"no {found.top}/{needed} entry: not a torch.save archive")
    if 0 in found.present:
        raise NotTorchSave(f"storage entry data/{found.present.index(0)} is missing; keys run 0..n-1")
    return found


_DIGITS: List[bytes] = []  # b"0", b"1", ...: storage keys as entry names spell them, up to 2^13


def _digits(count: int) -> List[bytes]:
    """At least the first min(count, 2^13) keys (a storage past them takes the long way)."""
    if len(_DIGITS) < min(count, 1 << 13):
        _DIGITS.extend(b"%d" % key for key in range(len(_DIGITS), min(count, 1 << 13)))
    return _DIGITS


def _entry(found: Found, index: int, text: str, flags: int, method: int, csize: int, usize: int,
           count: int) -> None:
    """Any entry but the next storage in order: stored, not encrypted, and one torch.save writes."""
    if flags & 1:
        raise NotTorchSave(f"entry {text} is encrypted")
    if method != 0 or csize != usize:
        raise NotTorchSave(f"entry {text} is compressed (method {method}); torch.save stores "
                           "entries uncompressed")
    _classify(found, index, text, usize, count)


def _text(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def _classify(found: Found, index: int, text: str, size: int, count: int) -> None:
    top, _, rest = text.partition("/")
    if index == 0:
        if rest != "data.pkl" or not top:
            raise NotTorchSave(f"first entry is {text}, not <folder>/data.pkl")
        found.top = top
    elif top != found.top:
        raise NotTorchSave(f"entry {text} is outside the archive's one folder {found.top}/")
    key = rest[5:]
    if rest.startswith("data/") and key.isdigit() and key.isascii() and str(int(key)) == key:
        number = int(key)
        if number >= count:
            raise NotTorchSave(f"entry {text}: storage keys run 0..n-1 for n entries")
        if number >= len(found.sizes):
            grow = number + 1 - len(found.sizes)
            found.sizes.extend([0] * grow)
            found.present.extend(bytes(grow))
        if found.present[number]:
            raise NotTorchSave(f"entry {text} appears twice")
        found.present[number] = 1
        found.sizes[number] = size
    elif rest in BOOKKEEPING:
        if rest in found.names:
            raise NotTorchSave(f"entry {text} appears twice")
        found.names.add(rest)
    else:
        raise NotTorchSave(f"entry {text} is not one torch.save writes")


def stream_crc(stream, at: int, size: int, text: str) -> int:
    """The CRC-32 of ``size`` bytes at ``at``, read in CHUNKs; Damaged if the file ends first."""
    stream.seek(at)
    crc, left = 0, size
    while left:
        data = stream.read(min(CHUNK, left))
        if not data:
            raise Damaged(f"entry {text} is cut off")
        crc = zlib.crc32(data, crc)
        left -= len(data)
    return crc


def _zip64(extra: bytes, usize: int, csize: int, offset: int) -> Tuple[int, int, int]:
    """Sizes and offset with the zip64 extra field's values where the 32-bit fields are full."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == 1:
            values = extra[at + 4:at + 4 + length]
            fields = [usize, csize, offset]
            pos = 0
            for i, value in enumerate(fields):
                if value == 0xFFFFFFFF:
                    if pos + 8 > len(values):
                        raise Damaged("a zip64 extra field is cut off")
                    fields[i] = struct.unpack_from("<Q", values, pos)[0]
                    pos += 8
            return fields[0], fields[1], fields[2]
        at += 4 + length
    return usize, csize, offset


def _has_zip64(extra: bytes) -> bool:
    if b"\x01\x00" not in extra:  # no zip64 field can start anywhere (torch pads with b"FB" fields)
        return False
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == 1:
            return True
        at += 4 + length
    return False


class File:
    """A file too big to hold in memory, read by slicing like bytes. A slice is served from one
    of two windows of WINDOW bytes, the last two read (one seek and read each): the walk reads
    the central directory in order through one and each entry's local header through the
    other. Every slice the walk takes is short (headers, names, data.pkl up to FAST_MAX)."""

    def __init__(self, stream, size: int) -> None:
        self.stream, self.size = stream, size
        self.windows: List[Tuple[int, bytes]] = [(0, b""), (0, b"")]  # the latest first

    def __getitem__(self, part: slice) -> bytes:
        start, stop = part.start, min(part.stop, self.size)
        if stop <= start:
            return b""
        for index, (at, window) in enumerate(self.windows):
            if at <= start and stop <= at + len(window):
                if index:
                    self.windows.reverse()
                return window[start - at:stop - at]
        self.stream.seek(start)
        if stop - start > WINDOW:
            return self.stream.read(stop - start)
        window = self.stream.read(WINDOW)
        self.windows = [(start, window), self.windows[0]]
        return window[:stop - start]
