"""Postflight's judgement of a resumed run: verl loaded the checkpoint its lineage names,
trained steps N+1..target and no earlier step, and that checkpoint still has the hashes the
resume phase recorded (resume.py). A fresh run passes.

A lineage with a "snapshot" names the copy in this run's own folder that verl loaded: the load
lines must name that copy, and the copy (links refused) must still hash as recorded. A lineage
recorded before copies existed (no "snapshot") names the earlier run's folder itself; it is
judged as then, with links that leave the earlier run refused.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Tuple, Union

from ...formats import lines, tfevents, trainlines
from ...run.findings import Finding, finding, mismatch
from ..checkpoint import snapshot
from ...run import budget, command, runid, runrecord
from ...run.runfolder import NAME, RunFolder


def lineage_in(run_dir: Path) -> Union[None, Dict[str, Any], str]:
    """The lineage in a run's run.json: None for a fresh run, a text saying why it is unusable."""
    if not os.path.lexists(RunFolder(run_dir).run_json):
        return None  # postflight's other checks report the missing record's consequences
    try:
        lineage = runrecord.read_run(run_dir).get("resume")
    except (OSError, ValueError) as exc:
        return f"cannot read run.json ({exc})"
    if lineage is None:
        return None
    try:
        recorded_step(lineage)
    except ValueError as exc:
        return str(exc)
    return lineage


def recorded_step(lineage: Any) -> Tuple[str, int]:
    """(earlier RUN_ID, step) from a lineage record; ValueError if it is malformed."""
    if not isinstance(lineage, dict):
        raise ValueError("the resume record is not an object")
    earlier, step = lineage.get("from_run_id"), lineage.get("step")
    if not runid.is_run_id(earlier) or isinstance(step, bool) or \
            not isinstance(step, int) or step < 1:
        raise ValueError(f"the resume record names run {earlier!r} at step {step!r}")
    return earlier, step


# --- postflight: was the resumed run what its lineage says ---------------------------------

def check_resumed_run(ctx) -> List[Finding]:
    """Postflight's check of a resumed run (ctx: postflight's context); a fresh run passes."""
    lineage = ctx.lineage
    if lineage is None:
        ctx.evidence["resume"] = None
        return []
    if isinstance(lineage, str):  # unusable: lineage_in says why
        return [finding("POST-E060", str(RunFolder(ctx.run_dir).run_json), lineage)]
    earlier, step = recorded_step(lineage)
    copied = "snapshot" in lineage
    if copied:
        expected, root = snapshot.snapshot_dir(ctx.run_dir, earlier, step), ctx.run_dir
        want = f"/{ctx.run_dir.name}/{NAME.resume_from}{_suffix(earlier, step)}"
        if lineage.get("snapshot") != str(expected.relative_to(ctx.run_dir)):
            return [mismatch("POST-E060", str(RunFolder(ctx.run_dir).run_json), "resume snapshot",
                             str(expected.relative_to(ctx.run_dir)), lineage.get("snapshot"))]
    else:
        expected = RunFolder(ctx.run_dir.parent / earlier).checkpoints / f"global_step_{step}"  # a sibling
        root, want = ctx.run_dir.parent / earlier, _suffix(earlier, step)
    root_seen = runrecord.storage_root(ctx.run_dir)  # the job's: its log and command name it
    if copied and not root_seen:  # a copy's path is only known from it; an ending is a look-alike's
        return [finding("POST-E060", str(RunFolder(ctx.run_dir).run_json), "the resume record "
                        "has a snapshot but run.json names no storage root (an absolute path of at "
                        f"most {runrecord.PATH_MAX:,} bytes): "
                        "the folder verl loaded cannot be told from a look-alike")]
    want = Wanted(want) if not root_seen else Wanted(str(  # the folder itself, not a look-alike
        command.resume_snapshot_dir(Path(root_seen), ctx.run_id, earlier, step) if copied
        else command.checkpoint_dir(Path(root_seen), earlier, step)), exact=True)
    found = []
    found += _loaded_checkpoint(ctx, earlier, step, want)
    found += _continued_steps(ctx, step)
    found += _resolved_resume(ctx, want)
    found += _checkpoint_unchanged(ctx, expected, lineage.get("files"), root, copied)
    ctx.evidence["resume"] = {"from_run_id": earlier, "step": step, "chain": lineage.get("chain"),
                              "checkpoint": str(expected)}
    return found


def _suffix(earlier: str, step: int) -> str:
    return f"/{earlier}/checkpoints/global_step_{step}"


class Wanted(NamedTuple):
    """The folder verl was to load: its absolute path as the job saw it (exact, from run.json's
    storage root), or the end of it (a record without a storage root)."""
    path: str
    exact: bool = False

    def named_by(self, path: str, below: str = "") -> bool:
        """Whether path names this folder (or its subfolder below): the very path, or one ending
        with it that goes through no '..' (which could lead anywhere)."""
        path, want = path.rstrip("/"), self.path + below
        if self.exact:  # the job's own spelling, '..' and all when its storage root has one
            return path == want
        return ".." not in path.split("/") and path.endswith(want)

    def __str__(self) -> str:
        return self.path if self.exact else "..." + self.path


def _loaded_checkpoint(ctx, earlier: str, step: int, want: "Wanted") -> List[Finding]:
    scan = ctx.scan()
    loads = scan.checkpoint_loads
    if not loads:
        return [finding("POST-E061", NAME.training_log, "no 'Load from checkpoint folder:' line: "
                        f"verl did not load {earlier}'s global_step_{step}")]
    wrong = [(n, p) for n, p in loads if not want.named_by(p)]
    if wrong or len(loads) > 1:
        return [finding("POST-E061", f"training.log:{(wrong or loads)[0][0]}", "verl loaded "
                        f"{', '.join(p for _, p in loads[:3])}; expected one load of {want}")]
    elsewhere = [f for f in scan.load_folders if not want.named_by(f, "/actor")]  # every load's folder
    if elsewhere:
        return [finding("POST-E061", NAME.training_log, f"a rank loaded a shard from {elsewhere[0]}/, "
                        f"not from {want}/actor/")]
    world = ctx.world_size
    said = scan.rank_loads  # (the rank that said it, kind, the file): a rank loads its own shards
    for kind, file in trainlines.RANK_LOADS.items():  # a partial load (no optimizer) is no resume
        missing = [r for r in range(world) if (r, kind, f"{file}_world_size_{world}_rank_{r}.pt")
                   not in said]
        if missing:
            return [finding("POST-E061", NAME.training_log, f"no 'Loaded {kind} from' line for "
                            f"rank(s) {missing[:8]}{' and more' if len(missing) > 8 else ''} of "
                            f"{world}: those ranks did not load the checkpoint's {kind}")]
    ctx.evidence["resume_loads"] = {"folder_line": loads[0][0], "shards": scan.shard_load_count}
    return []


def _continued_steps(ctx, step: int) -> List[Finding]:
    metric = sorted(ctx.scan().metric_steps)
    want = list(range(step + 1, ctx.steps + 1))
    found = []
    if metric != want:
        found.append(mismatch("POST-E062", NAME.training_log, "training steps (step:N lines)",
                              f"{step + 1}..{ctx.steps}", metric or "none"))
    scalars = ctx.scalars() if hasattr(ctx, "scalars") else \
        tfevents.load_scalars(RunFolder(ctx.run_dir).tensorboard)
    logged = sorted(scalars.values.get("training/global_step", {}))
    if logged != want:
        found.append(mismatch("POST-E063", str(RunFolder(ctx.run_dir).tensorboard),
                              "training/global_step steps", f"{step + 1}..{ctx.steps}",
                              logged or "none"))
    return found


def _resolved_resume(ctx, want: "Wanted") -> List[Finding]:
    path = RunFolder(ctx.run_dir).resolved_command_txt
    try:
        argv = shlex.split(lines.read_small(path))
    except (OSError, ValueError) as exc:
        return [finding("POST-E064", str(path), f"unreadable: {exc}")]
    given = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    found = []
    if given.get("trainer.resume_mode") != "resume_path":
        found.append(mismatch("POST-E064", str(path), "trainer.resume_mode", "resume_path",
                              given.get("trainer.resume_mode", "absent")))
    if not want.named_by(given.get("trainer.resume_from_path", "")):
        found.append(mismatch("POST-E064", str(path), "trainer.resume_from_path", str(want),
                              given.get("trainer.resume_from_path", "absent")))
    return found


def _checkpoint_unchanged(ctx, step_dir: Path, files: Any, root: Path,
                          copied: bool) -> List[Finding]:
    if not isinstance(files, dict) or not files:
        return [finding("POST-E060", str(RunFolder(ctx.run_dir).run_json), "the resume record lists no "
                        "checkpoint files")]
    if not step_dir.is_dir():
        return [finding("POST-E065", str(step_dir), "the checkpoint verl loaded is gone; the "
                        "lineage cannot be checked")]
    try:  # the copy holds no link at all; the earlier run's folder none that leaves it
        now = snapshot.tree_hashes(step_dir, root, not copied, budget.of_profile(ctx.profile).items)
    except (OSError, ValueError) as exc:
        return [finding("POST-E065", str(step_dir), f"cannot hash: {exc}")]
    changed = sorted(k for k in set(files) | set(now) if files.get(k) != now.get(k))
    if changed:
        return [finding("POST-E065", str(step_dir), f"{len(changed)} files differ from the hashes "
                        f"recorded at resume: {', '.join(changed[:3])}")]
    return []
