"""Is a file what torch.save writes? Checked without torch, without unpickling, in bounded memory.

torch.save writes a zip archive of stored (uncompressed) entries under one top-level folder:
data.pkl first (the pickled object, whose tensors point at storages through persistent ids),
then byteorder, one data/<key> entry per storage, version and a few bookkeeping files. This
module reads the zip's end records and central directory itself (zipfile holds every entry in
memory and trusts overlapping entries), checks each local header, that entries neither overlap
nor leave the file, streams every entry through CRC-32, and reads data.pkl (torchstubs.py, or
the opcode walk of torchpickle.py) to list the storages it references: they must be exactly the data/ entries,
each as long as its element count times its element size.
"""
from __future__ import annotations

import io
import struct
import zlib
from array import array
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from .lines import open_regular
from .torchpickle import CHUNK, MAX_ENTRIES, NotTorchSave, PickleReader, storage_refs
from .torchstubs import FAST_MAX, storage_refs_fast

__all__ = ["Damaged", "NotTorchSave", "ITEM_SIZE", "MAX_ENTRIES", "check", "check_spans",
           "storage_refs"]

END, END64, LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
CENTRAL, LOCAL, DESCRIPTOR = b"PK\x01\x02", b"PK\x03\x04", b"PK\x07\x08"
BOOKKEEPING = {"data.pkl", "byteorder", "version", ".format_version", ".storage_alignment",
               ".data/serialization_id", ".data/version"}
ITEM_SIZE = {"DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2,
             "LongStorage": 8, "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1,
             "ByteStorage": 1, "BoolStorage": 1, "ComplexDoubleStorage": 16,
             "ComplexFloatStorage": 8, "UntypedStorage": 1}


IN_MEMORY = 32 << 20  # a file up to this size is read whole into memory first


class Damaged(ValueError):
    """The archive is cut off or its bytes changed (CRC, truncation)."""


def check(path: Union[str, Path], crc: bool = True) -> Dict[str, Any]:
    """Raise Damaged or NotTorchSave, or return a summary: top folder, entries, storages.
    With crc=False the entries' CRCs are not computed; the summary's "spans" then lists each
    entry as (name, data offset, size, CRC) for check_spans, which may run in other processes."""
    with open_regular(path) as stream:
        size = stream.seek(0, 2)
        if size <= IN_MEMORY:  # one read, then no system call per entry (a shard has hundreds)
            stream.seek(0)
            stream = io.BytesIO(stream.read(size))
            size = stream.seek(0, 2)
        count, cd_offset, cd_size = _end_records(stream, size)
        if count > MAX_ENTRIES:
            raise NotTorchSave(f"{count} zip entries: more than {MAX_ENTRIES}")
        found = _walk(stream, count, cd_offset, cd_size, None if crc else [])
        refs = None
        if found.pickle_size <= FAST_MAX:  # the C unpickler on inert stubs (torchstubs.py)
            stream.seek(found.pickle_at)
            refs = storage_refs_fast(stream.read(found.pickle_size), len(found.sizes))
        if refs is None:  # the opcode walk: any size, and the words of every finding
            refs = storage_refs(PickleReader(stream, found.pickle_at, found.pickle_size), len(found.sizes))
    for key in range(len(found.sizes)):
        if key not in refs:
            raise NotTorchSave(f"entry data/{key} is not referenced by data.pkl")
    for key, (kind, numel) in refs.items():
        if key >= len(found.sizes):
            raise NotTorchSave(f"data.pkl references storage data/{key}, which has no entry")
        item = ITEM_SIZE.get(kind)
        have = found.sizes[key]
        if item is not None and isinstance(numel, int) and numel * item != have:
            raise NotTorchSave(f"storage data/{key}: {numel} x {kind} needs {numel * item} bytes, "
                               f"the entry holds {have}")
    summary = {"top": found.top, "entries": count, "storages": len(found.sizes)}
    if found.spans is not None:
        summary["spans"] = found.spans
    return summary


def check_spans(path: Union[str, Path], spans: List[Tuple[str, int, int, int]]) -> None:
    """Raise Damaged unless each (name, offset, size, CRC) span of the file has its CRC."""
    with open_regular(path) as stream:
        for text, at, size, crc in spans:
            if _crc(stream, at, size, text) != crc:
                raise Damaged(f"entry {text} fails its CRC check")


def _end_records(stream, size: int) -> Tuple[int, int, int]:
    """(entry count, central directory offset, its size) from the end records."""
    tail_size = min(size, 22 + 0xFFFF)
    stream.seek(size - tail_size)
    tail = stream.read(tail_size)
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
        stream.seek(record_at)
        record = stream.read(56)
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


class _Found:
    """What the walk keeps: a few numbers, and one size per storage (keys are 0..n-1)."""

    def __init__(self) -> None:
        self.top = ""
        self.names: Set[str] = set()  # bookkeeping entries seen
        self.present = bytearray()  # storage key -> 1 once its entry was seen
        self.sizes = array("Q")  # storage key -> entry size
        self.pickle_at = self.pickle_size = 0
        self.spans: Optional[List[Tuple[str, int, int, int]]] = None  # CRCs left to check_spans


def _walk(stream, count: int, cd_offset: int, cd_size: int, spans: Optional[list] = None) -> _Found:
    """Each central directory entry in turn, then its local header and data: entries must come
    in file order (torch.save writes them so), inside the file, not overlapping, CRCs right
    (or, given a spans list, each entry's CRC appended there to be checked later)."""
    found = _Found()
    found.spans = spans
    directory = io.BufferedReader(_Slice(stream, cd_offset, cd_size), CHUNK)
    end = 0
    for index in range(count):
        fixed = directory.read(46)
        if len(fixed) < 46 or fixed[:4] != CENTRAL:
            raise Damaged(f"central directory entry {index} is malformed")
        (_, _, flags, method, _, _, crc, csize, usize, name_len, extra_len, comment_len, _, _, _,
         local_at) = struct.unpack_from("<4xHHHHHHIIIHHHHHII", fixed)
        raw = directory.read(name_len + extra_len + comment_len)
        if len(raw) < name_len + extra_len + comment_len:
            raise Damaged(f"central directory entry {index} is cut off")
        name, extra = raw[:name_len], raw[name_len:name_len + extra_len]
        usize, csize, local_at = _zip64(extra, usize, csize, local_at)
        text = name.decode("utf-8", "replace")
        if flags & 1:
            raise NotTorchSave(f"entry {text} is encrypted")
        if method != 0 or csize != usize:
            raise NotTorchSave(f"entry {text} is compressed (method {method}); torch.save stores "
                               "entries uncompressed")
        _classify(found, index, text, usize, count)
        if local_at < end:
            raise NotTorchSave(f"entry {text} at byte {local_at} overlaps the entry before it "
                               f"(which ends at {end}) or is out of order")
        data_at, local_extra = _local_header(stream, local_at, name, text)
        if data_at + usize > cd_offset:
            raise Damaged(f"entry {text} ({usize} bytes at {data_at}) runs past the central "
                          "directory: the file is cut off")
        if spans is not None:
            spans.append((text, data_at, usize, crc))
        elif _crc(stream, data_at, usize, text) != crc:
            raise Damaged(f"entry {text} fails its CRC check")
        if index == 0:
            found.pickle_at, found.pickle_size = data_at, usize
        end = data_at + usize
        if flags & 8:  # a data descriptor follows: signature, CRC and two sizes of 4 or 8 bytes
            stream.seek(end)
            signed = stream.read(4) == DESCRIPTOR
            end += (4 if signed else 0) + (20 if usize >= 0xFFFFFFFF or _has_zip64(local_extra) else 12)
        if end > cd_offset:
            raise Damaged(f"entry {text} runs past the central directory")
    for needed in ("data.pkl", "version", "byteorder"):
        if needed not in found.names:
            raise NotTorchSave(f"no {found.top}/{needed} entry: not a torch.save archive")
    if 0 in found.present:
        raise NotTorchSave(f"storage entry data/{found.present.index(0)} is missing; keys run 0..n-1")
    return found


def _classify(found: _Found, index: int, text: str, size: int, count: int) -> None:
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


def _local_header(stream, at: int, name: bytes, text: str) -> Tuple[int, bytes]:
    """Check the local header at ``at`` names the entry; return where its data starts and
    the header's extra field."""
    stream.seek(at)
    header = stream.read(30)
    if len(header) < 30 or header[:4] != LOCAL:
        raise Damaged(f"no local header at byte {at} for entry {text}")
    name_len, extra_len = struct.unpack_from("<HH", header, 26)
    if stream.read(name_len) != name:
        raise NotTorchSave(f"the local header at byte {at} names another file than {text}")
    return at + 30 + name_len + extra_len, stream.read(extra_len)


def _crc(stream, at: int, size: int, text: str) -> int:
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
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == 1:
            return True
        at += 4 + length
    return False


class _Slice(io.RawIOBase):
    """Bytes [start, start + size) of a file, as a stream (the central directory)."""

    def __init__(self, stream, start: int, size: int) -> None:
        self.stream, self.start, self.position, self.end = stream, start, start, start + size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: self.start, 1: self.position, 2: self.end}[whence]
        self.position = min(max(base + offset, self.start), self.end)
        return self.position - self.start

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self.end - self.position)
        if want <= 0:
            return 0
        self.stream.seek(self.position)
        data = self.stream.read(want)
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)
