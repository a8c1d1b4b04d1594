"""Resuming a preempted run under a new RUN_ID: may it, from which checkpoint, and did it.

The launcher's resume phase (RESUME_FROM=<earlier RUN_ID>, before any GPU time) checks that
the earlier run is the same pinned run (profile, bundle, inputs, from its run.json), that it
ended FAILED and is not running, and picks its latest checkpoint that passes postflight's
checkpoint checks. The lineage (earlier RUN_ID, step, every checkpoint file's sha256, the
chain of runs before it) goes into the new run's run.json. The checkpoint is copied into the new
run's folder and hashed as it is written (snapshot.py); verl loads that copy
(trainer.resume_mode=resume_path). The earlier run's folder is only read, never written. A
parent whose recorded driver is alive is never resumed, whatever markers its folder holds.

Postflight judges a resumed run in resumed.py: verl loaded that checkpoint, trained
steps N+1..target and no earlier step, and the checkpoint still has the recorded hashes.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..checkpoint import checkpoint, snapshot
from . import liveness
from ...run import budget, command, processes, runid, runrecord
from ...formats import bounded
from ...run.findings import (Check, CheckResult, Finding, Skip, UsageError, finding, mismatch, phase_record,
                       print_findings, run_checks, verdict)
from ...run.profile import Profile
from ...run.records import write_json
from ...run.runfolder import RunFolder

# Checkpoint frequency may differ between the runs of a chain; every other value may not.
MAY_DIFFER = {"SAVE_FREQ"}
# The values that pin what the run reads (SHA256SUMS hashes of model and data, verl's commit,
# the reward function's file, the data's converter).
INPUT_PINS = ("VERL_COMMIT", "VERL_SUMS_SHA256", "MODEL_HUB", "MODEL_ID", "MODEL_REVISION", "MODEL_SUMS_SHA256",
              "MODEL_WEIGHTS", "DATASET_HUB", "DATASET_ID", "DATASET_REVISION", "DATASET_VARIANT",
              "DATA_SUMS_SHA256", "TRAIN_ROWS", "TEST_ROWS", "REWARD_FILE", "REWARD_FUNCTION",
              "REWARD_SHA256", "DATA_CONVERTER", "DATA_CONVERTER_SHA256")
TRACKER = "latest_checkpointed_iteration.txt"
MAX_CHAIN = 100


# --- the resume phase: before the new run trains -------------------------------------------

@dataclasses.dataclass
class ResumeContext:
    storage_root: Path
    run_id: str
    earlier_id: str
    profile: Profile
    record: Dict[str, Any]                  # the new run's run.json
    earlier: Optional[Dict[str, Any]] = None
    step: Optional[int] = None
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def earlier_dir(self) -> Path:
        return RunFolder.at(self.storage_root, self.earlier_id).path

    def earlier_record(self) -> Dict[str, Any]:
        if self.earlier is None:
            raise Skip("no earlier run record")
        return self.earlier


def _read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a plain file of at most limit bytes (never a FIFO, device or symlink)."""
    if path.is_symlink():
        raise ValueError("not a plain file")
    try:
        return bounded.read_bytes(path, limit)
    except bounded.Unreadable as exc:
        raise ValueError(str(exc))


def check_earlier_run(ctx: ResumeContext) -> List[Finding]:
    if not runid.is_run_id(ctx.earlier_id) or ctx.earlier_id == ctx.run_id:
        return [finding("RES-E001", ctx.earlier_id, "not the RUN_ID of another run")]
    folder = ctx.earlier_dir  # only now: a RUN_ID, never a path
    if folder.is_symlink() or not folder.is_dir():
        return [finding("RES-E001", str(folder), "no such run folder" if not folder.is_symlink()
                        else "a symbolic link, not a run folder")]
    try:
        ctx.earlier = runrecord.read_run(folder)
    except (OSError, ValueError) as exc:
        return [finding("RES-E002", str(runrecord.path_of(folder)), f"cannot read the earlier "
                        f"run's record: {exc}")]
    if ctx.earlier.get("run_id") != ctx.earlier_id:
        return [mismatch("RES-E002", str(runrecord.path_of(folder)), "run_id", ctx.earlier_id,
                         ctx.earlier.get("run_id"))]
    ctx.evidence["earlier_run"] = str(folder)
    return []


def check_same_pins(ctx: ResumeContext) -> List[Finding]:
    earlier = ctx.earlier_record()
    mine, theirs = ctx.record["profile"], earlier["profile"]
    found = []
    if mine.get("name") != theirs.get("name"):
        found.append(mismatch("RES-E003", "run.json profile", "profile", mine.get("name"),
                              theirs.get("name")))
    keys = sorted(set(mine["values"]) | set(theirs["values"]))
    for key in keys:
        if key in MAY_DIFFER or mine["values"].get(key) == theirs["values"].get(key):
            continue
        fid = "RES-E004" if key in INPUT_PINS else "RES-E003"
        found.append(mismatch(fid, f"run.json profile {key}", key, mine["values"].get(key, "absent"),
                              theirs["values"].get(key, "absent")))
    for key in ("bundle_sums_sha256", "launcher_sha256"):
        if ctx.record.get(key) != earlier.get(key):
            found.append(mismatch("RES-E005", f"run.json {key}", key, ctx.record.get(key),
                                  earlier.get(key)))
    return found


def _driver_alive(record: Dict[str, Any]) -> Optional[bool]:
    """True or False when the earlier driver ran on this host; None when that cannot be told."""
    pid = record.get("driver_pid")
    if record.get("driver_host") != socket.gethostname() or isinstance(pid, bool) or \
            not isinstance(pid, int) or pid <= 1:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process holds that pid now: alive, to be safe
        return True
    return processes.still_running(record, pid)  # a reused pid is not the earlier driver


def check_ended_failed(ctx: ResumeContext) -> List[Finding]:
    earlier = ctx.earlier_record()
    folder = ctx.earlier_dir
    if _driver_alive(earlier):  # whatever markers exist: FAILED is written before the kill
        return [finding("RES-E007", str(folder), f"its driver (pid {earlier.get('driver_pid')} on "
                        f"{earlier.get('driver_host')}) is alive, whatever its markers say")]
    if (RunFolder(folder).success).exists():
        return [finding("RES-E006", str(RunFolder(folder).success), "the earlier run succeeded; "
                        "there is nothing to resume")]
    failed = RunFolder(folder).failed
    if failed.is_file():
        try:
            text = _read_bounded(failed, 4096).decode("utf-8", "replace")
        except (OSError, ValueError) as exc:
            return [finding("RES-E008", str(failed), f"unreadable: {exc}")]
        ctx.evidence["earlier_failed"] = dict(line.split("=", 1) for line in text.splitlines()
                                              if "=" in line)
        return []
    if liveness.lost(ctx):  # no marker, but the heartbeat ran out: lost, not running
        return []
    alive = _driver_alive(earlier)
    if alive:
        return [finding("RES-E007", str(folder), f"no FAILED marker and its driver (pid "
                        f"{earlier.get('driver_pid')} on {earlier.get('driver_host')}) is alive")]
    return [finding("RES-E008", str(folder), "no FAILED marker: the run ended without one "
                    f"(killed hard?) or still runs on {earlier.get('driver_host', 'another host')}")]


def _steps_on_disk(checkpoints: Path, latest: int) -> List[int]:
    steps = []
    for entry in checkpoints.iterdir():
        name = entry.name
        if name.startswith("global_step_") and bounded.ascii_digits(name[12:]) and \
                len(name) < 32 and 0 < int(name[12:]) <= latest:
            steps.append(int(name[12:]))
    return sorted(steps, reverse=True)


def _inside(path: Path, folder: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top + os.sep)


def check_checkpoint(ctx: ResumeContext) -> List[Finding]:
    """The latest checkpoint at or before verl's tracker that passes postflight's checks."""
    ctx.earlier_record()
    folder = ctx.earlier_dir
    checkpoints = RunFolder(folder).checkpoints
    tracker = checkpoints / TRACKER
    if not _inside(checkpoints, folder):
        return [finding("RES-E011", str(checkpoints), "leads out of the earlier run's folder")]
    try:
        stream, _ = bounded.open_regular(tracker)  # a FIFO in its place must not block
        with stream:
            text = stream.read(32).decode("ascii", "replace").strip()
    except OSError as exc:
        return [finding("RES-E009", str(tracker), f"no checkpoint tracker ({exc.strerror}): the "
                        "run saved no checkpoint")]
    if not bounded.ascii_digits(text) or int(text) < 1:
        return [finding("RES-E009", str(tracker), f"holds {text!r}, not a step number")]
    latest = int(text)
    rejected = []
    for step in _steps_on_disk(checkpoints, latest):
        step_dir = checkpoints / f"global_step_{step}"
        if not _inside(step_dir, folder):
            return [finding("RES-E011", str(step_dir), "leads out of the earlier run's folder")]
        problems, evidence = checkpoint.step_findings(folder, step, ctx.profile.world_size)
        if not problems:
            ctx.step = step
            ctx.evidence["checkpoint"] = {**evidence, "tracker": latest,
                                          "rejected": rejected}
            break
        rejected.append({"step": step, "findings": [f.to_json() for f in problems[:5]]})
    if ctx.step is None:
        detail = "; ".join(f"global_step_{r['step']}: ({r['findings'][0]['id']}) "
                           f"{r['findings'][0]['message']}" for r in rejected[:3])
        return [finding("RES-E009", str(checkpoints), f"no complete checkpoint at or before step "
                        f"{latest}" + (f" ({detail})" if detail else ""), rejected=rejected)]
    if ctx.step >= ctx.profile.TARGET_STEPS:
        found = [finding("RES-E010", str(checkpoints / f"global_step_{ctx.step}"), f"step "
                         f"{ctx.step} is the target step {ctx.profile.TARGET_STEPS}: nothing is left "
                         "to train")]
        ctx.step = None
        return found
    return []


def checkpoint_hashes(step_dir: Path, root: Path) -> Dict[str, str]:
    """sha256 of every file under a checkpoint folder, by path relative to it; a link leaving
    root, a non-regular file or a loop raises snapshot.SnapshotError."""
    return snapshot.tree_hashes(step_dir, root)


def lineage_of(ctx: ResumeContext) -> Dict[str, Any]:
    """The lineage, after copying the checkpoint into this run (snapshot.copy_checkpoint)."""
    earlier = ctx.earlier_record()
    before = earlier.get("resume") if isinstance(earlier.get("resume"), dict) else {}
    chain = [r for r in before.get("chain", []) if isinstance(r, str)][-MAX_CHAIN:]
    step_dir = command.checkpoint_dir(ctx.storage_root, ctx.earlier_id, ctx.step)
    run = RunFolder.at(ctx.storage_root, ctx.run_id).path
    copy = snapshot.snapshot_dir(run, ctx.earlier_id, ctx.step)
    files = snapshot.copy_checkpoint(step_dir, ctx.earlier_dir, copy, budget.of_profile(ctx.profile).items)
    return {"from_run_id": ctx.earlier_id, "step": ctx.step,
            "checkpoint": str(step_dir.relative_to(ctx.earlier_dir)),
            "snapshot": str(copy.relative_to(run)),
            "files": files, "chain": chain + [ctx.earlier_id],
            "earlier_ended": ctx.evidence.get("earlier_failed") or ctx.evidence.get("earlier_lost", {})}


CHECKS = [
    Check("earlier-run", check_earlier_run),
    Check("same-pins", check_same_pins, needs=("earlier-run",)),
    Check("heartbeat", liveness.check_heartbeat, needs=("earlier-run",)),
    Check("ended-failed", check_ended_failed, needs=("earlier-run", "heartbeat")),
    Check("checkpoint", check_checkpoint, needs=("earlier-run",)),
]


def run(folder: RunFolder, profile: Profile, storage_root: Path, resume_from: str) -> int:
    """The launcher's resume phase for the run in folder (under storage_root), from the earlier
    run resume_from: the checks, then the lineage into run.json; resume.json."""
    run_id = folder.run_id
    try:
        record = runrecord.read_run(folder)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{folder.run_json}: cannot read this run's record ({exc})")
    ctx = ResumeContext(storage_root, run_id, resume_from, profile, record)
    print(f"resume: run {run_id} from {resume_from}", flush=True)
    results = run_checks("resume", CHECKS, ctx)
    lineage = None
    if all(r.passed for r in results):
        try:
            lineage = lineage_of(ctx)
        except snapshot.SnapshotError as exc:
            results.append(CheckResult("checkpoint-copy", [finding(
                exc.fid, str(ctx.earlier_dir), f"cannot copy the checkpoint into this run: {exc}")]))
        except (OSError, ValueError) as exc:
            results.append(CheckResult("checkpoint-copy", [finding(
                "RES-E022", str(ctx.earlier_dir), f"cannot copy the checkpoint into this run: {exc}")]))
    print_findings(results, where_all=f"{folder.resume_json.name} lists")
    code = verdict("resume", results)
    if code == 0 and lineage is not None:
        record["resume"] = lineage
        record["training_command"] = command.training_command(
            profile, storage_root, run_id, (lineage["from_run_id"], lineage["step"]))
        runrecord.write(folder, record)
        print(f"resume: from {resume_from} at step {lineage['step']} ({len(lineage['files'])} "
              f"checkpoint files hashed); training starts at step {lineage['step'] + 1}", flush=True)
    write_json(folder.resume_json, phase_record("resume", results, run_id=run_id,
                                                resume_from=resume_from,
                                                evidence=ctx.evidence, lineage=lineage))
    return code
