"""Rollouts of the same prompts side by side, for make compare.

The last step both runs dumped (rollouts/<step>.jsonl) is read, bounded like the report's
samples: at most MAX_ROWS rows per file, each line at most 256 KiB; prompts are matched by
their exact text and the first MAX_PROMPTS shared ones are shown with each run's responses.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..formats import bounded
from ..run import runrecord
from .runview import MAX_SAMPLE_CHARS, ROLLOUT_NAMES_PER_STEP, RunView
from ..run.runfolder import RunFolder

MAX_ROWS = 4096
MAX_PROMPTS = 6
MAX_RESPONSES = 2  # per prompt and run


def steps_of(run_dir: Path) -> List[int]:
    folder = RunFolder(run_dir).rollouts
    if not folder.is_dir():
        return []
    most = max(100_000, ROLLOUT_NAMES_PER_STEP * runrecord.size(run_dir).steps)  # as the report reads
    stems = [name[:-len(".jsonl")] for name in bounded.first_names(folder, "", most) if name.endswith(".jsonl")]
    return sorted(int(stem) for stem in stems if bounded.ascii_digits(stem) and len(stem) < 10)


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_SAMPLE_CHARS else text[:MAX_SAMPLE_CHARS] + " …"


def by_prompt(path: Path) -> Dict[str, Dict[str, Any]]:
    """sha256 of a prompt -> {prompt (cut), rows: its first rows (output cut, score)}, in file
    order; unreadable lines are left out. Memory: MAX_ROWS cut prompts at most."""
    out: Dict[str, Dict[str, Any]] = {}
    try:
        for line in bounded.lines(path, MAX_ROWS, line_limit=256 << 10):
            try:
                row = bounded.loads(line) if line.strip() else None
            except ValueError:
                continue
            if not isinstance(row, dict) or not isinstance(row.get("input"), str):
                continue
            score = row.get("score")
            ok = isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
            key = hashlib.sha256(row["input"].encode("utf-8", "replace")).hexdigest()
            entry = out.setdefault(key, {"prompt": _clip(row["input"]), "rows": []})
            if len(entry["rows"]) < MAX_RESPONSES:
                entry["rows"].append({"output": _clip(row.get("output", "")), "score": score if ok else None})
    except bounded.Unreadable:
        return {}
    return out


def side_by_side(views: Sequence[RunView]) -> Optional[Dict[str, Any]]:
    """{step, prompts: [{prompt, runs: [[responses of run i]]}], shared, of}; None when the runs
    have no rollout step in common."""
    steps = [set(steps_of(v.run_dir)) for v in views]
    common = set.intersection(*steps) if steps else set()
    if not common:
        return None
    step = max(common)
    rows = [by_prompt(RunFolder(v.run_dir).rollouts / f"{step}.jsonl") for v in views]
    shared = [p for p in rows[0] if all(p in r for r in rows[1:])]
    prompts = [{"prompt": rows[0][p]["prompt"], "runs": [r[p]["rows"] for r in rows]}
               for p in shared[:MAX_PROMPTS]]
    return {"step": step, "prompts": prompts, "shared": len(shared), "of": len(rows[0])}
