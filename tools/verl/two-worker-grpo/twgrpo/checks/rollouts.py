"""Postflight's check of rollouts/<step>.jsonl: train_batch_size x rollout.n rows a step, each
with an input, an output, a finite score and its step, read line by line in bounded memory.
ctx is postflight's context.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, List, Optional, Tuple

from ..formats import bounded, lines
from ..run.findings import Finding, finding, mismatch

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


def _rollout_file(path: Path, step: int) -> Tuple[int, "_Notes", List[Finding], List[float]]:
    """(rows, bad-row notes, over-long-row findings, [min, max] score) of one rollout file,
    read line by line in bounded memory."""
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


def check_rollouts(ctx) -> List[Finding]:
    expected = ctx.profile.TRAIN_BATCH_SIZE * ctx.profile.ROLLOUT_N
    found, summary = [], {}
    for step in range(ctx.first_step, ctx.steps + 1):
        path = ctx.run_dir / "rollouts" / f"{step}.jsonl"
        try:
            rows, bad, long_rows, low_high = _rollout_file(path, step)
        except OSError as exc:
            found.append(finding("POST-E018", str(path), f"cannot read: {exc.strerror}"))
            continue
        if rows != expected:
            found.append(mismatch("POST-E019", str(path), "rows (train_batch_size x rollout.n)",
                                  expected, rows))
        found += long_rows
        if bad:
            found.append(finding("POST-E020", str(path), f"{bad.count} bad rows: " + "; ".join(bad)))
        summary[str(step)] = {"rows": rows, "score_min": low_high[0] if low_high else None,
                              "score_max": low_high[1] if low_high else None}
    ctx.evidence["rollouts"] = summary
    return found
