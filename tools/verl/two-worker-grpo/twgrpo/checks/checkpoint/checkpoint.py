"""Checkpoint shards without torch: each must be a whole archive laid out as torch.save writes."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import ahead, shards
from ...formats import trainlines
from ...run.findings import Finding, finding, mismatch
from ...run.records import read_json
from ...run.runfolder import RunFolder

# The files each rank saves (model, optim, extra_state): the very ones a resumed rank must load.
SHARD_KINDS = tuple(trainlines.RANK_LOADS.values())


def shard_problem(path: Path) -> Optional[Tuple[str, str]]:
    """None if the file is a whole torch.save archive, else (kind, what is wrong): kind is
    'missing', 'damaged' (cut off, CRC) or 'layout' (not what torch.save writes)."""
    return shards.problem(path)[0]


@functools.lru_cache(maxsize=2)  # postflight asks twice (start_ahead, step_findings): 49,152 names
def _names(world: int) -> Tuple[Tuple[str, int, str], ...]:
    return tuple((kind, rank, f"{kind}_world_size_{world}_rank_{rank}.pt")
                 for kind in SHARD_KINDS for rank in range(world))


def shard_paths(run_dir: Path, step: int, world: int) -> List[str]:
    """Every file step_findings reads through check_files: each rank's shards, then data.pt.
    Plain strings: 16,384 ranks have 49,152 shards, and a Path each (made, hashed, made
    relative) costs tenths of a second."""
    step_dir = RunFolder(run_dir).checkpoints / f"global_step_{step}"
    folder = str(step_dir / "actor")
    return [f"{folder}/{name}" for _, _, name in _names(world)] + [str(step_dir / "data.pt")]


def start_ahead(run_dir: Path, step: int, world: int, first: Sequence[Any] = ()) -> Optional[ahead.Ahead]:
    """The shard check of checkpoints/global_step_<step>/ begun now in worker processes
    (ahead.py), or None when the folder is not there (the check then says what is missing).
    ``first``: tasks handed to those workers before the shards (ahead.Ahead)."""
    if not (RunFolder(run_dir).checkpoints / f"global_step_{step}" / "actor").is_dir():
        return None
    return ahead.Ahead(shard_paths(run_dir, step, world), workers(world), first)


def workers(world: int) -> int:
    """The worker processes start_ahead starts for a world of ranks: one a shard file (three a
    rank and data.pt), one a core but the one left to postflight."""
    return ahead.workers(3 * world + 1)


def step_findings(run_dir: Path, step: int, world: int,
                  check_files: Callable[..., Dict[Any, Any]] = shards.check_files
                  ) -> Tuple[List[Finding], Dict[str, Any]]:
    """Postflight's checks of one checkpoint folder, checkpoints/global_step_<step>/, and its
    evidence; resume (twgrpo/resume.py) picks the checkpoint it continues from with them too.
    check_files(paths, sizes=...) is shards.check_files or a stand-in with its signature."""
    step_dir = RunFolder(run_dir).checkpoints / f"global_step_{step}"
    actor = step_dir / "actor"
    found, files, sizes = [], {}, {}
    shown = str(actor.relative_to(run_dir))
    paths = shard_paths(run_dir, step, world)
    problems = check_files(paths, sizes=sizes)
    for (kind, rank, name), path in zip(_names(world), paths):  # paths: the names', then data.pt
        problem = problems[path]
        if problem and problem[0] == "missing":
            found.append(finding("POST-E021", path, f"no {kind} shard for rank {rank}"))
        elif problem:
            found.append(finding("POST-E032" if problem[0] == "layout" else "POST-E022", path, problem[1]))
        else:
            files[f"{shown}/{name}"] = sizes[path] if path in sizes else os.stat(path).st_size
    config_path = actor / "fsdp_config.json"
    try:
        config = read_json(config_path)
    except (OSError, ValueError, RecursionError) as exc:
        config = f"unreadable ({exc})"
    want = {"FSDP_version": 2, "world_size": world}
    if config != want:
        found.append(mismatch("POST-E023", str(config_path), "fsdp_config.json", want, config))
    problem = problems[str(step_dir / "data.pt")]
    if problem:
        found.append(finding("POST-E024", str(step_dir / "data.pt"), f"dataloader state: {problem[1]}"))
    hf_config = actor / "huggingface" / "config.json"
    try:
        read_json(hf_config)
    except (OSError, ValueError, RecursionError) as exc:
        found.append(finding("POST-E024", str(hf_config), f"Hugging Face config unreadable ({exc})"))
    return found, {"path": str(step_dir), "fsdp_config": config, "shards": files}
