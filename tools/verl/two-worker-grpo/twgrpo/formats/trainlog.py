"""One streaming pass over a training log: what postflight needs, in bounded memory and time.

A 64-node log is mostly NCCL INFO noise. Reading it line by line in Python costs seconds per
GiB, so the pass reads large blocks and looks, in C, for the few keywords that every
interesting line holds. Most keywords are found through one byte that NCCL's noise rarely
holds (memchr is ten times faster than a substring search); each hit is then compared with
the whole keyword. Each candidate line is taken whole, stripped of ANSI colour codes and its
Ray prefix, and parsed. At thousands of ranks nearly every candidate is one of a rank's few
NCCL and Gloo lines: those are taken first by their shape (trainshape.py), and the keyword
search reads the rest of the block. Segments of a large file are scanned by worker processes
and merged in order, so the time stays linear in the log's size and divides by the cores; the
merge is one pass's scan, or refused (join) where the evidence budget was reached, and then
the file is scanned in one pass.

Bounds: memory is one block, the block without its shaped lines, and one line of at most
MAX_LINE bytes per worker, and the scans of at most MAX_PARTS segments, each within the
evidence budget; a longer line is reported (line number, offset, length) and skipped without
being held. Every pattern is anchored or bounded (trainlines.py, trainshape.py)
so that it runs in linear time on any line.
"""
from __future__ import annotations

import os
from bisect import bisect_right
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, Iterator, List, Optional, Tuple

from . import pools
from .lines import open_regular
from .trainlines import (ANCHORED, FATAL_SAMPLES, KEEP, LOAD_FOLDERS, SEARCHES, VALIDATED, InitEvent,
                         LogScan, Transport, _parse_line)
from .trainshape import Shapes

__all__ = ["FATAL_SAMPLES", "KEEP", "MAX_LINE", "VALIDATED", "InitEvent", "LogScan", "Transport",
           "join", "join_or_scan", "merged", "scan_log", "scan_range"]

BLOCK = 8 << 20
SEGMENT = 64 << 20
# A log of at least two of these is split among the cores too: a worker's start and the merge
# of its scan cost less than its share of the pass (19 MB at 2,048 nodes: four workers)
MIN_SEGMENT = 4 << 20
# Segments at most: the joined scans are held together, each up to the evidence budget
MAX_PARTS = 16
MAX_LINE = 1 << 20  # no real log line comes near; a longer one is a finding, not parsed
# An anchor hit costs a Python step; past this many hits per MiB, substring search is cheaper.
ANCHOR_HITS_PER_MIB = 2048


def _find_all(block: bytes, word: bytes, start: int, size: int) -> Iterator[int]:
    """The first offset of ``word`` in each line of block[start:size] that holds it."""
    at = block.find(word, start, size)
    while at != -1:
        yield at
        end = block.find(b"\n", at, size)
        at = -1 if end == -1 else block.find(word, end + 1, size)


def _keyword_hits(block: bytes, size: int) -> Iterator[int]:
    """Offsets in block[:size] where some keyword starts, one a line for each keyword (so a
    line holding a keyword a million times costs one step, not a million)."""
    for pattern in SEARCHES:
        m = pattern.search(block, 0, size)
        while m:
            yield m.start()
            end = block.find(b"\n", m.start(), size)  # on to the next line
            m = None if end == -1 else pattern.search(block, end + 1, size)
    for anchor, words in ANCHORED:
        budget = ANCHOR_HITS_PER_MIB * (size // (1 << 20) + 1)
        shifts = [(word, word.index(anchor)) for word in words]
        at = block.find(anchor, 0, size)
        while at != -1:
            budget -= 1
            if budget < 0:  # a block full of this byte: search each keyword instead
                for word, shift in shifts:
                    yield from _find_all(block, word, max(at - shift, 0), size)
                break
            for word, shift in shifts:
                if at >= shift and block.startswith(word, at - shift, size):
                    yield at - shift
                    at = block.find(b"\n", at, size)  # on to the next line
                    break
            at = -1 if at == -1 else block.find(anchor, at + 1, size)


def _long_lines(block: bytes, size: int, max_line: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of each line of block[:size] longer than max_line: such a line holds a
    whole probe window of max_line // 2 bytes without a newline, so a few finds see each one."""
    window = max(max_line // 2, 1)
    seen = -1
    for probe in range(0, size - window + 1, window):
        if block.find(b"\n", probe, probe + window) != -1:
            continue
        start = block.rfind(b"\n", 0, probe) + 1
        if start <= seen:
            continue
        end = block.find(b"\n", probe + window, size)
        end = size if end == -1 else end
        seen = start
        if end - start > max_line:
            yield start, end


def _rest(block: bytes, size: int, shaped: Dict[int, tuple]) -> Tuple[bytes, List[int], List[int]]:
    """block[:size] without its shaped lines (whole lines, so no keyword spans a cut), with
    where each kept piece starts in the rest and in the block."""
    pieces, in_rest, in_block = [], [], []
    kept, length = 0, 0
    for start in shaped:  # in order: found left to right
        if start > kept:
            pieces.append(block[kept:start])
            in_rest.append(length)
            in_block.append(kept)
            length += start - kept
        kept = block.find(b"\n", start, size) + 1
    if kept < size:
        pieces.append(block[kept:size])
        in_rest.append(length)
        in_block.append(kept)
    return b"".join(pieces), in_rest, in_block


def _scan_block(scan: LogScan, shapes: Shapes, block: bytes, size: int, first_line: int, offset: int,
                max_line: int) -> int:
    """Parse the candidate lines of block[:size], whole lines whose first is ``first_line``
    and whose first byte is at ``offset`` in the file; returns the newline count."""
    shaped = shapes.find(block, size, max_line)
    spans: Dict[int, int] = {}
    if shaped:
        rest, in_rest, in_block = _rest(block, size, shaped)
        hits = (at - in_rest[piece] + in_block[piece] for at in _keyword_hits(rest, len(rest))
                for piece in (bisect_right(in_rest, at) - 1,))
    else:
        hits = _keyword_hits(block, size)
    for at in hits:
        start = block.rfind(b"\n", 0, at) + 1
        if start not in spans:
            end = block.find(b"\n", at, size)
            spans[start] = size if end == -1 else end
    for start, end in _long_lines(block, size, max_line):
        spans[start] = end
    line, last = first_line, 0
    for start in sorted(spans.keys() | shaped.keys()):
        line += block.count(b"\n", last, start)
        last = start
        m = shaped.get(start)
        if m is not None:
            shapes.add(scan, line, m)
            continue
        end = spans[start]
        if end - start > max_line:
            scan.add_long_line(line, offset + start, end - start)
        else:
            _parse_line(scan, line, block[start:end].decode("utf-8", "replace"))
    return line - first_line + block.count(b"\n", last, size)


def _skip_line(stream, stop: Optional[int] = None) -> int:
    """Read on to just after the next newline, the end of the file or offset ``stop``,
    whichever comes first, in bounded memory; return the bytes skipped before the newline."""
    skipped = 0
    while True:
        at = stream.tell()
        size = BLOCK if stop is None else min(BLOCK, stop - at)
        data = stream.read(size) if size > 0 else b""
        if not data:
            return skipped
        cut = data.find(b"\n")
        if cut != -1:
            stream.seek(at + cut + 1)
            return skipped + cut
        skipped += len(data)


def scan_range(path: str, begin: int, end: int, max_line: Optional[int] = None,
               keep: Optional[int] = None) -> LogScan:
    """Scan the lines that start in [begin, end) of the file; line numbers count from 1. keep:
    the evidence items held (default trainlines.KEEP), the rest counted as dropped."""
    max_line = max_line or MAX_LINE
    scan = LogScan(keep=keep)
    shapes = Shapes()
    line = 1

    def take(block: bytes, offset: int, size: Optional[int] = None) -> None:
        nonlocal line
        size = len(block) if size is None else size
        if size:
            line += _scan_block(scan, shapes, block, size, line, offset, max_line) + (block[size - 1] != 10)

    def long_line(offset: int, length: int) -> None:
        nonlocal line
        scan.add_long_line(line, offset, length)
        line += 1

    with open_regular(path) as stream:  # a FIFO in its place is refused, never waited on
        if begin:  # a line starts at begin only if a newline ends just before it
            stream.seek(begin - 1)
            if stream.read(1) != b"\n":
                _skip_line(stream, end)  # the line belongs to an earlier range
        tail, tail_at = b"", stream.tell()
        while True:
            position = stream.tell()
            if position >= end:  # finish the line that started inside the range
                if tail:
                    rest = stream.read(max_line + 1 - len(tail))
                    cut = rest.find(b"\n")
                    if cut != -1:
                        take(tail + rest[:cut + 1], tail_at)
                    elif len(tail) + len(rest) <= max_line:  # the file's last line
                        take(tail + rest, tail_at)
                    else:
                        long_line(tail_at, len(tail) + len(rest) + _skip_line(stream))
                break
            data = stream.read(min(BLOCK, end - position))
            if not data:  # end of file: a last line may lack its newline
                take(tail, tail_at)
                break
            block = tail + data
            cut = block.rfind(b"\n") + 1
            take(block, tail_at, cut)
            tail, tail_at = block[cut:], tail_at + cut
            if len(tail) > max_line:  # an over-long line: measure it, hold none of it
                long_line(tail_at, len(tail) + _skip_line(stream))
                tail, tail_at = b"", stream.tell()
    scan.lines = line - 1
    return scan


def scan_log(path: str, jobs: Optional[int] = None, max_line: Optional[int] = None,
             keep: Optional[int] = None) -> LogScan:
    size = os.path.getsize(path)
    jobs = jobs or min(pools.cores(), 8)
    ranges = plan(size, jobs)
    if len(ranges) == 1:
        return scan_range(path, 0, size, max_line, keep)
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        parts = list(pool.map(scan_range, [path] * len(ranges), [b for b, _ in ranges],
                              [e for _, e in ranges], [max_line] * len(ranges),
                              [keep] * len(ranges)))
    finally:
        pools.stop(pool)
    return join_or_scan(parts, path, size, max_line, keep)


def plan(size: int, jobs: int) -> List[Tuple[int, int]]:
    """The [begin, end) ranges scan_range reads a log of ``size`` bytes in with ``jobs``
    processes, to be joined in order (join): one range, or segments of at most SEGMENT bytes,
    as many as the jobs where each has MIN_SEGMENT bytes."""
    parts = min(max(-(-size // SEGMENT), min(jobs, size // MIN_SEGMENT)), MAX_PARTS)
    return segments(size, parts) if parts > 1 and jobs > 1 else [(0, size)]


def segments(size: int, parts: int) -> List[Tuple[int, int]]:
    """[begin, end) byte ranges that split a file of ``size`` bytes into ``parts`` about equal
    segments (fewer for a file of fewer bytes), for scan_range."""
    step = max(-(-size // max(parts, 1)), 1)
    bounds = list(range(0, size, step)) + [size]
    return list(zip(bounds[:-1], bounds[1:])) or [(0, 0)]


def join(parts: List[LogScan], keep: Optional[int] = None) -> Optional[LogScan]:
    """One pass's scan of the whole file from the scans of its segments (merged), or None
    where the two may differ: past the evidence budget (or the LOAD_FOLDERS folders) what one
    pass holds and drops depends on the order of every item, so the caller scans in one pass."""
    total = merged(parts, keep)
    if any(scan.dropped or len(scan.load_folders) >= LOAD_FOLDERS for scan in parts + [total]):
        return None
    return total


def join_or_scan(parts: List[LogScan], path: str, size: int, max_line: Optional[int] = None,
                 keep: Optional[int] = None) -> LogScan:
    """The segments' scans joined, or, where join refuses, the file's ``size`` bytes scanned
    in one pass."""
    joined = join(parts, keep)
    return joined if joined is not None else scan_range(path, 0, size, max_line, keep)


def merged(parts: List[LogScan], keep: Optional[int] = None) -> LogScan:
    """The scans of a file's segments merged in file order, each segment's line numbers
    following the lines before it (the parts are changed)."""
    total = LogScan(keep=keep)
    offset = 0
    for part in parts:
        _shift(part, offset)
        total.merge(part)
        offset += part.lines
    return total


def _shift(scan: LogScan, offset: int) -> None:
    if not offset:
        return
    scan.fatal = [(n + offset, name, text) for n, name, text in scan.fatal]
    scan.causes = [(n + offset, cause, details, text) for n, cause, details, text in scan.causes]
    scan.long_lines = [(n + offset, at, length) for n, at, length in scan.long_lines]
    if scan.validated_line is not None:
        scan.validated_line += offset
    scan.checkpoint_loads = [(n + offset, path) for n, path in scan.checkpoint_loads]
    scan.shard_loads = [(n + offset, kind, path) for n, kind, path in scan.shard_loads]
    for phases in scan.inits.values():
        for events in phases.values():
            for event in events:
                event.line += offset
