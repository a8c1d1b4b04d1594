"""Postflight's check of rollouts/<step>.jsonl: train_batch_size x rollout.n rows a step, each
with an input, an output, a finite score and its step, read line by line in bounded memory.
ctx is postflight's context.
"""
from __future__ import annotations

import json
import math
import os
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from . import rollout_shape
from ...formats import bounded, lines
from ...run.findings import Finding, finding, mismatch
from ...run.runfolder import RunFolder

MAX_ROLLOUT_ROW = 4 << 20  # a row is a prompt and a response; a longer one is not parsed


def _rollout_row_problem(row: Any, step: int) -> Optional[str]:
    if not isinstance(row, dict):
        return "not a JSON object"
    if not isinstance(row.get("input"), str) or not row["input"]:
        return "input is missing or empty"
    if not isinstance(row.get("output"), str):
        return "output is missing"
    score = row.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return f"score {score!r} is not a finite number"
    if row.get("step") != step:
        return f"step {row.get('step')!r}, expected {step}"
    return None


class _Notes(list):
    """The first few notes, and how many there were."""
    count = 0

    def append(self, note: str) -> None:
        self.count += 1
        if len(self) < 3:
            super().append(note)


FAST_MAX = 1 << 20  # a rollout file is read in pieces of this many bytes, cut after a newline
_DECODE = json.JSONDecoder(parse_int=bounded.parse_int).decode


def _fast_rows(path: Union[str, Path], step: int) -> Optional[Tuple[int, List[float]]]:
    """(rows, [min, max] score) of a file whose every row is good, read in pieces of up to
    FAST_MAX bytes that end at a newline, each piece's bounds (bounded.loads's cost and nesting)
    checked once for all its rows; None for anything else (a row longer than a piece too),
    which the line-by-line reader then judges and names. Each read asks for what the file has
    left plus one byte (a regular file reads short only at its end), so a small file is one
    os.read and one piece: a folder of 100,000 small files reads at the speed of opening them."""
    rows, scores = 0, []
    fd, info = bounded.open_fd(path)
    try:
        tail, left = b"", info.st_size
        while True:
            want = min(max(left, 0), FAST_MAX - 1) + 1
            more = os.read(fd, want)
            left -= len(more)
            end = len(more) < want
            data, tail = tail + more, b""
            if not end:
                cut = data.rfind(b"\n") + 1
                if not cut:
                    return None
                data, tail = data[:cut], data[cut:]
            found = _fast_piece(data, step)
            if found is None:
                return None
            rows += found[0]
            scores += found[1]
            if end:
                break
    finally:
        os.close(fd)
    return rows, ([min(scores), max(scores)] if rows else [])


def _fast_piece(data: bytes, step: int) -> Optional[Tuple[int, List[float]]]:
    """(rows, [min, max] score, or [] without rows) of whole lines whose every row is good.
    Rows in the layout verl writes are judged by their shape (rollout_shape.py), the rest row by
    row with the JSON reader."""
    shaped = rollout_shape.shaped_rows(data, step)
    if shaped is not None:
        return shaped
    if bounded.cost(data) > bounded.MEMORY or not 0 <= bounded.depth(data) <= bounded.MAX_DEPTH:
        return None
    low = high = None
    rows = 0
    try:
        for text in data.decode("utf-8").split("\n"):
            if not text.strip(" \t\n\r\x0b\x0c"):  # what bytes.strip() strips
                continue
            row = _DECODE(text)
            if _rollout_row_problem(row, step):
                return None
            rows += 1
            score = float(row["score"])
            low = score if low is None else min(low, score)
            high = score if high is None else max(high, score)
    except ValueError:  # not UTF-8, not JSON, a long integer: named line by line
        return None
    return rows, ([low, high] if rows else [])


def _rollout_file(path: Union[str, Path], step: int) -> Tuple[int, "_Notes", List[Finding], List[float]]:
    """(rows, bad-row notes, over-long-row findings, [min, max] score) of one rollout file,
    read line by line in bounded memory (a small good file in one read: _fast_rows)."""
    fast = _fast_rows(path, step)
    if fast is not None:
        return fast[0], _Notes(), [], fast[1]
    rows, bad, long_rows, low_high = 0, _Notes(), [], []
    for line in lines.read_lines(path, MAX_ROLLOUT_ROW):
        if line.data is None:
            rows += 1
            if len(long_rows) < 3:
                long_rows.append(finding("POST-E031", f"{path} line {line.number}",
                                         f"row of {line.length} bytes at byte {line.offset}: longer than "
                                         f"{MAX_ROLLOUT_ROW} bytes, not read", offset=line.offset))
            continue
        if not line.data.strip():
            continue
        rows += 1
        try:
            text = line.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append(f"line {line.number}: not UTF-8 at byte {line.offset + exc.start}")
            continue
        try:
            row = bounded.loads(text)
        except ValueError as exc:  # not JSON, too deep, or an integer of more than 19 digits
            bad.append(f"line {line.number}: not JSON ({exc})")
            continue
        problem = _rollout_row_problem(row, step)
        if problem:
            bad.append(f"line {line.number}: {problem}")
        else:
            score = float(row["score"])
            low_high = [min(low_high[0], score), max(low_high[1], score)] if low_high else [score, score]
    return rows, bad, long_rows, low_high


LISTED_STEPS = 32  # steps listed one by one at each end of a long run; the rest are summed
AHEAD_STEPS = 64  # a run of at most this many steps has its rollout files read ahead


def start_ahead(ctx) -> Dict[int, Any]:
    """Each step's rollout file handed to the workers of the shard check started ahead
    (checkpoint/ahead.py), to be read there while this process reads the log: step -> future,
    or {} (read here, when asked) for a longer run or without those workers."""
    if ctx.ahead is None or ctx.steps - ctx.first_step + 1 > AHEAD_STEPS:
        return {}
    futures = {}
    for step in range(ctx.first_step, ctx.steps + 1):
        future = ctx.ahead.submit(_rollout_file, RunFolder(ctx.run_dir).rollouts / f"{step}.jsonl", step)
        if future is None:
            return {}
        futures[step] = future
    return futures


def _read(ctx, path: Path, step: int) -> Tuple[int, "_Notes", List[Finding], List[float]]:
    """_rollout_file(path, step): its answer from a worker (start_ahead), or the call made here
    when there is none or the worker was lost (an OSError from the worker is the file's own)."""
    read = ctx.rollouts_ahead.get(step)
    if read is not None:
        try:
            return read.result()
        except (BrokenProcessPool, CancelledError):
            pass
    return _rollout_file(path, step)


def check_rollouts(ctx) -> List[Finding]:
    """Every step's rollouts/<step>.jsonl. verification.json lists each step of a run of up to
    2 x LISTED_STEPS steps; a longer run's first and last LISTED_STEPS steps, every step with a
    finding, and one summary (rollouts_summary) of all, so the record grows with the problems,
    not with the steps."""
    expected = ctx.profile.TRAIN_BATCH_SIZE * ctx.profile.ROLLOUT_N
    found, summary = [], {}
    first, last = ctx.first_step, ctx.steps
    total = {"steps": 0, "rows": 0, "score_min": None, "score_max": None}
    folder = os.path.join(str(RunFolder(ctx.run_dir).rollouts), "")  # a string: no Path a step
    for step in range(ctx.first_step, ctx.steps + 1):
        path = f"{folder}{step}.jsonl"
        try:
            rows, bad, long_rows, low_high = _read(ctx, path, step)
        except OSError as exc:
            found.append(finding("POST-E018", str(path), f"cannot read: {exc.strerror}"))
            continue
        before = len(found)
        if rows != expected:
            found.append(mismatch("POST-E019", str(path), "rows (train_batch_size x rollout.n)",
                                  expected, rows))
        found += long_rows
        if bad:
            found.append(finding("POST-E020", str(path), f"{bad.count} bad rows: " + "; ".join(bad)))
        total["steps"] += 1
        total["rows"] += rows
        if low_high:
            total["score_min"] = low_high[0] if total["score_min"] is None else min(total["score_min"], low_high[0])
            total["score_max"] = low_high[1] if total["score_max"] is None else max(total["score_max"], low_high[1])
        if step < first + LISTED_STEPS or step > last - LISTED_STEPS or len(found) > before:
            summary[str(step)] = {"rows": rows, "score_min": low_high[0] if low_high else None,
                                  "score_max": low_high[1] if low_high else None}
    ctx.evidence["rollouts"] = summary
    ctx.evidence["rollouts_summary"] = dict(total, listed=len(summary))
    return found
