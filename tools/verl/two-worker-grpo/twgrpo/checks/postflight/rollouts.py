"""Postflight's check of rollouts/<step>.jsonl: train_batch_size x rollout.n rows a step, each
with an input, an output, a finite score and its step, read line by line in bounded memory.
ctx is postflight's context.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from . import readahead
from ...formats import bounded, lines, rolloutshape
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
    Rows in the layout verl writes are judged by their shape (formats/rolloutshape.py), the
    rest row by row with the JSON reader."""
    shaped = rolloutshape.shaped_rows(data, step)
    if shaped is not None:
        return shaped
    if bounded.costs_more(data, bounded.MEMORY) or not 0 <= bounded.depth(data) <= bounded.MAX_DEPTH:
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
CHUNK_STEPS = 256  # steps a worker reads in one task
BATCH_STEPS, SMALL_FILE = 64, 64 << 10  # small files judged together: at most 4 MiB held


def _small_files(folder: str, steps: range) -> Dict[int, Tuple[int, List[float]]]:
    """{step: (rows, [min, max] score)} of the steps' files of at most SMALL_FILE bytes whose
    every row is good by its shape (rolloutshape.shaped_files: one match for them all, not one
    a file). Any other step is left out: _rollout_file reads it and names what is wrong."""
    files: List[bytes] = []
    taken: List[int] = []
    for step in steps if rolloutshape.MATCHES else ():  # else each file is read once, alone
        try:
            fd, info = bounded.open_fd(f"{folder}{step}.jsonl")
        except OSError:
            continue
        try:
            data = os.read(fd, info.st_size + 1) if info.st_size <= SMALL_FILE else None
        except OSError:
            data = None
        finally:
            os.close(fd)
        if data is not None and len(data) <= info.st_size:  # a file that grew is read alone
            files.append(data)
            taken.append(step)
    tallies = rolloutshape.shaped_files(files, taken)
    return {step: tally for step, tally in zip(taken, tallies) if tally is not None}


Judged = Tuple[List[Finding], Dict[str, Any], Dict[str, Any]]  # findings, listed steps, totals


def _judge_steps(folder: str, first: int, last: int, expected: int, listed: Tuple[int, int]) -> Judged:
    """check_rollouts's findings and records for steps first..last (a worker's task, or the
    whole run here): the findings in step order, the steps listed one by one (those before
    listed[0] or after listed[1], and every step with a finding), and the totals."""
    found: List[Finding] = []
    summary: Dict[str, Any] = {}
    total: Dict[str, Any] = {"steps": 0, "rows": 0, "score_min": None, "score_max": None}
    quick: Dict[int, Tuple[int, List[float]]] = {}
    for step in range(first, last + 1):
        if (step - first) % BATCH_STEPS == 0:
            quick = _small_files(folder, range(step, min(step + BATCH_STEPS, last + 1)))
        path = f"{folder}{step}.jsonl"
        try:
            rows, bad, long_rows, low_high = ((quick[step][0], _Notes(), [], quick[step][1]) if step in quick
                                              else _rollout_file(path, step))
        except OSError as exc:
            found.append(finding("POST-E018", path, f"cannot read: {exc.strerror}"))
            continue
        before = len(found)
        if rows != expected:
            found.append(mismatch("POST-E019", path, "rows (train_batch_size x rollout.n)",
                                  expected, rows))
        found += long_rows
        if bad:
            found.append(finding("POST-E020", path, f"{bad.count} bad rows: " + "; ".join(bad)))
        total["steps"] += 1
        total["rows"] += rows
        if low_high:
            total["score_min"] = low_high[0] if total["score_min"] is None else min(total["score_min"], low_high[0])
            total["score_max"] = low_high[1] if total["score_max"] is None else max(total["score_max"], low_high[1])
        if step < listed[0] or step > listed[1] or len(found) > before:
            summary[str(step)] = {"rows": rows, "score_min": low_high[0] if low_high else None,
                                  "score_max": low_high[1] if low_high else None}
    return found, summary, total


class ReadAhead:
    """The rollout files judged by worker processes (readahead.py), CHUNK_STEPS steps a task,
    while this process reads the log and the scalars. The check first takes back, from the
    last, the tasks no worker has begun, so it reads from the end while they read from the
    start; answers() then gives every task's answer in step order."""

    def __init__(self, submit: Optional[readahead.Submit], *judged: Any) -> None:
        folder, first, last, expected, listed = judged
        self.tasks = [readahead.Task(submit, _judge_steps, folder, begin,
                                     min(begin + CHUNK_STEPS - 1, last), expected, listed)
                      for begin in range(first, last + 1, CHUNK_STEPS)]
        self.back = len(self.tasks)  # the tasks from here on are answered or taken back

    def take_back_one(self) -> bool:
        """Judge here the last task no worker has begun; False when none is left (workers take
        the tasks from the first, so the ones before a begun task are begun too)."""
        while self.back > 0:
            task = self.tasks[self.back - 1]
            if not task.has and not task.take_back():
                return False
            self.back -= 1
            if task.taken_back:
                return True
        return False

    def answers(self) -> List[Judged]:
        return readahead.answers(self.tasks)


def _judged(ctx) -> Tuple[Any, ...]:
    """_judge_steps's arguments for the whole run."""
    folder = os.path.join(str(RunFolder(ctx.run_dir).rollouts), "")  # a string: no Path a step
    expected = ctx.profile.TRAIN_BATCH_SIZE * ctx.profile.ROLLOUT_N
    first, last = ctx.first_step, ctx.steps
    return folder, first, last, expected, (first + LISTED_STEPS, last - LISTED_STEPS)


def start_ahead(ctx, submit: Optional[readahead.Submit]) -> Optional[ReadAhead]:
    """The rollout files handed to worker processes through submit (readahead.py); None (no
    workers, or no step): the check reads them here."""
    return handed(unhanded(ctx), submit)


def unhanded(ctx) -> Optional[ReadAhead]:
    """The rollout files' tasks, none handed to a worker yet (startreads.py hands them to the
    shard check's workers before the shards); None where the run has no step."""
    return ReadAhead(None, *_judged(ctx)) if ctx.steps >= ctx.first_step else None


def handed(started: Optional[ReadAhead], submit: Optional[readahead.Submit]) -> Optional[ReadAhead]:
    """started, each task not handed yet handed through submit; None where no worker has one."""
    if started is None:
        return None
    if submit is not None:
        for task in started.tasks:
            task.hand(submit)
    return started if any(task.handed() for task in started.tasks) else None


def check_rollouts(ctx) -> List[Finding]:
    """Every step's rollouts/<step>.jsonl. verification.json lists each step of a run of up to
    2 x LISTED_STEPS steps; a longer run's first and last LISTED_STEPS steps, every step with a
    finding, and one summary (rollouts_summary) of all, so the record grows with the problems,
    not with the steps."""
    parts = (ctx.rollouts_ahead.answers() if ctx.rollouts_ahead is not None else
             [_judge_steps(*_judged(ctx))])
    found: List[Finding] = []
    summary: Dict[str, Any] = {}
    total: Dict[str, Any] = {"steps": 0, "rows": 0, "score_min": None, "score_max": None}
    for part_found, part_summary, part_total in parts:
        found += part_found
        summary.update(part_summary)
        total["steps"] += part_total["steps"]
        total["rows"] += part_total["rows"]
        for key, pick in (("score_min", min), ("score_max", max)):
            if part_total[key] is not None:
                total[key] = part_total[key] if total[key] is None else pick(total[key], part_total[key])
    ctx.evidence["rollouts"] = summary
    ctx.evidence["rollouts_summary"] = dict(total, listed=len(summary))
    return found
