"""Is a file what torch.save writes? Checked without torch, without unpickling, in bounded memory.

torch.save writes a zip archive of stored (uncompressed) entries under one top-level folder:
data.pkl first (the pickled object, whose tensors point at storages through persistent ids),
then byteorder, one data/<key> entry per storage, version and a few bookkeeping files. The zip
structure is read by zipwalk.py itself (zipfile holds every entry in memory and trusts
overlapping entries): end records, central directory, local headers, that entries neither
overlap nor leave the file, every entry's CRC-32. A file up to IN_MEMORY is read whole first,
so that its hundreds of entries cost no system call each. This module reads data.pkl
(torchstubs.py, or the opcode walk of torchpickle.py) to list the storages it references: they
must be exactly the data/ entries, each as long as its element count times its element size.
"""
from __future__ import annotations

import io
import operator
from array import array
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from .lines import open_regular
from .torchpickle import MAX_ENTRIES, NotTorchSave, PickleReader, storage_refs
from .torchstubs import FAST_MAX, storage_refs_fast
from .zipwalk import Damaged, File, end_records, stream_crc, walk

__all__ = ["Damaged", "NotTorchSave", "ITEM_SIZE", "MAX_ENTRIES", "check", "check_spans",
           "storage_refs"]

ITEM_SIZE = {"DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2,
             "LongStorage": 8, "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1,
             "ByteStorage": 1, "BoolStorage": 1, "ComplexDoubleStorage": 16,
             "ComplexFloatStorage": 8, "UntypedStorage": 1}


IN_MEMORY = 32 << 20  # a file up to this size is read whole into memory first


def check(path: Union[str, Path], crc: bool = True) -> Dict[str, Any]:
    """Raise Damaged or NotTorchSave, or return a summary: top folder, entries, storages.
    With crc=False the entries' CRCs are not computed; the summary's "spans" then lists each
    entry as (name, data offset, size, CRC) for check_spans, which may run in other processes."""
    with open_regular(path) as stream:
        size = stream.seek(0, 2)
        if size <= IN_MEMORY:  # one read, then no system call per entry (a shard has hundreds)
            stream.seek(0)
            return check_bytes(stream.read(size), crc)
        return _check(File(stream, size), size, crc, stream)


def check_bytes(data: bytes, crc: bool = True) -> Dict[str, Any]:
    """check() of a whole file's bytes, already read (shards.py reads small files itself)."""
    return _check(data, len(data), crc, None)


def _check(source: Union[bytes, File], size: int, crc: bool, stream: Any) -> Dict[str, Any]:
    count, cd_offset, cd_size = end_records(source, size)
    if count > MAX_ENTRIES:
        raise NotTorchSave(f"{count} zip entries: more than {MAX_ENTRIES}")
    found = walk(source, count, cd_offset, cd_size, None if crc else [])
    known = None
    if found.pickle_size <= FAST_MAX:  # the C unpickler on inert stubs (torchstubs.py)
        known = _fast_refs(source[found.pickle_at:found.pickle_at + found.pickle_size], len(found.sizes))
    if known is None:  # the opcode walk: any size, and the words of every finding
        held = io.BytesIO(source) if isinstance(source, bytes) else stream
        refs = storage_refs(PickleReader(held, found.pickle_at, found.pickle_size), len(found.sizes))
        known = refs, _entry_sizes(refs)
    if known[1] != found.sizes.tolist():  # the common case: one comparison in C
        _match(known[0], found.sizes)  # one by one, with the words of the first finding
    summary = {"top": found.top, "entries": count, "storages": len(found.sizes)}
    if found.spans is not None:
        summary["spans"] = found.spans
    return summary


# data.pkl's bytes -> its storages, for pickles read before: a checkpoint's shards of one kind
# often hold the very same pickle (the same names, shapes and types on every rank), and the
# storages are a function of the pickle's bytes alone, so each distinct pickle is unpickled once.
# Only what the fast path vouched for is kept (None leaves the file to the walk every time).
_REFS: Dict[Tuple[bytes, int], Tuple[Dict[int, Tuple[str, Any]], Optional[List[int]]]] = {}
REFS_KEPT = 64  # pickles remembered, the oldest forgotten first ...
REFS_MAX_PICKLE = 64 << 10  # ... each at most this long: a few MiB at most


def _fast_refs(data: bytes, limit: int) -> Optional[Tuple[Dict[int, Tuple[str, Any]], Optional[List[int]]]]:
    """(storage_refs_fast(data, limit), their _entry_sizes), remembered for small pickles
    (callers only read them); None where the fast path cannot vouch for the pickle."""
    key = (bytes(data), limit)
    known = _REFS.get(key)
    if known is None:
        refs = storage_refs_fast(key[0], limit)
        if refs is None:
            return None
        known = refs, _entry_sizes(refs)
        if len(data) <= REFS_MAX_PICKLE and REFS_KEPT > 0:  # REFS_KEPT = 0: none remembered
            if len(_REFS) >= REFS_KEPT:
                del _REFS[next(iter(_REFS))]
            _REFS[key] = known
    return known


def _entry_sizes(refs: Dict[int, Tuple[str, Any]]) -> Optional[List[int]]:
    """The size of each data/<key> entry, key 0..n-1, that refs asks for, when every key is
    there once and each storage's element count and element size are known; None otherwise.
    Entries whose sizes equal it pass _match's rules, so a shard's storages are judged by one
    comparison in C (a pickle seen before by the list remembered); any other case is left to
    _match, which passes it or words the finding."""
    count = len(refs)
    if not count:
        return []
    if list(refs) == list(range(count)):  # in key order, as the fast path gives them
        kinds, numels = zip(*refs.values())
    elif min(refs) >= 0 and max(refs) < count:  # n distinct int keys in 0..n-1: every key once
        kinds, numels = zip(*map(refs.__getitem__, range(count)))
    else:
        return None
    items = list(map(ITEM_SIZE.get, kinds))
    if None in items or set(map(type, numels)) != {int}:
        return None
    return list(map(operator.mul, numels, items))


def _match(refs: Dict[int, Tuple[str, Any]], sizes: array) -> None:
    """Raise NotTorchSave unless refs names exactly the storages 0..n-1, each as long as its
    element count times its element size (when both are known)."""
    for key in range(len(sizes)):
        if key not in refs:
            raise NotTorchSave(f"entry data/{key} is not referenced by data.pkl")
    for key, (kind, numel) in refs.items():
        if key >= len(sizes):
            raise NotTorchSave(f"data.pkl references storage data/{key}, which has no entry")
        item = ITEM_SIZE.get(kind)
        have = sizes[key]
        if item is not None and isinstance(numel, int) and numel * item != have:
            raise NotTorchSave(f"storage data/{key}: {numel} x {kind} needs {numel * item} bytes, "
                               f"the entry holds {have}")


def check_spans(path: Union[str, Path], spans: List[Tuple[str, int, int, int]]) -> None:
    """Raise Damaged unless each (name, offset, size, CRC) span of the file has its CRC."""
    with open_regular(path) as stream:
        for text, at, size, crc in spans:
            if stream_crc(stream, at, size, text) != crc:
                raise Damaged(f"entry {text} fails its CRC check")
