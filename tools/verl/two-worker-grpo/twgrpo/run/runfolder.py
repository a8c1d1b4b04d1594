"""The run folder: where it is, every file in it by name, and how a phase writes into it.

A run folder is <storage root>/runs/verl/two-worker-grpo/<RUN_ID>/; the relative layout is the
same on every mount path, so the prep box finds a run the job wrote. This module is the only
place that names the folder's files: every reader and writer asks a RunFolder for a path. A
RUN_ID reaches its folder one way, RunFolder.at, which applies the RUN_ID rule (run/runid.py).

SUCCESS stands only while the latest record of every phase passed. A phase that records a
failure into a run folder that holds SUCCESS moves SUCCESS aside under a dated name (nothing is
deleted), so a re-run that finds damage can never leave a stale SUCCESS behind; runverdict
judges the folder from the same records.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, Optional, Union

from . import runid
from .findings import UsageError, usage
from .records import RecordError, write_json

RUNS = ("runs", "verl", "two-worker-grpo")  # under the storage root
SUPERSEDED = "SUCCESS.superseded-"
def runs_dir(storage_root: Union[str, Path]) -> Path:
    """The folder that holds every run folder of a storage root."""
    return Path(storage_root).joinpath(*RUNS)


def checked_run_id(run_id: str) -> str:
    """run_id when it is a RUN_ID (run/runid.py); else a UsageError that says what to set."""
    why = runid.problem(run_id)
    if why:  # a value too long to be a RUN_ID is not worth showing whole
        shown = "" if len(str(run_id)) > runid.MOST else f" {str(run_id)!r}"
        raise UsageError(f"RUN_ID{shown} {why} (set RUN_ID=<run>; make runs lists them)")
    return run_id


def _file(name: str, doc: str) -> property:
    return property(lambda self: self.path / name, doc=f"{name}: {doc}")


class RunFolder:
    """One run's folder (it need not exist yet); each of its files is a property."""

    run_json = _file("run.json", "the launcher's record: profile, lineage, job identity")
    driver_log = _file("driver.log", "the launcher's own log, phase by phase")
    training_log = _file("training.log", "verl's output")
    inputs_json = _file("inputs.json", "the inputs phase's record")
    preflight_json = _file("preflight.json", "the preflight phase's record")
    resume_json = _file("resume.json", "the resume phase's record")
    verification_json = _file("verification.json", "postflight's record")
    actor_placement_json = _file("actor-placement.json", "where verl's ranks ran")
    rendezvous_json = _file("rendezvous.json", "the collective probe's meeting point")
    stall_json = _file("stall.json", "the training watchdog's verdict")
    stall_evidence_json = _file("stall-evidence.json", "the watchdog's stacks and log tails")
    heartbeat_json = _file("heartbeat.json", "the launcher's lease")
    resolved_command_txt = _file("resolved-command.txt", "the training command as it ran")
    success = _file("SUCCESS", "the verdict marker of a run whose every phase passed")
    failed = _file("FAILED", "the verdict marker of a run that failed or was stopped")
    report_html = _file("report.html", "make report's page")
    checkpoints = _file("checkpoints", "verl's checkpoints, a folder per saved step")
    rollouts = _file("rollouts", "verl's rollout samples, a file per step")
    tensorboard = _file("tensorboard", "verl's TensorBoard event files")
    resume_from = _file("resume-from", "a resumed run's copy of the checkpoint it starts from")
    wandb = _file("wandb", "W&B's local files, when the profile logs there")
    hydra = _file("hydra", "verl's Hydra output")
    # What preflight's probes leave: a file the driver writes for every node to read back, and
    # a folder per probe with a file per node or rank.
    shared_storage_sentinel = _file("shared-storage-sentinel", "a token every node must read")
    preflight_nodes = _file("preflight-nodes", "each node's probe report")
    preflight_reach = _file("preflight-reach", "each node's reachability of its peers")
    preflight_storage = _file("preflight-storage", "each node's storage trial")
    preflight_collective = _file("preflight-collective", "each rank of the collective probe")
    preflight_node_collective = _file("preflight-node-collective", "each node's own collective")

    def __init__(self, path: Union[str, Path, "RunFolder"]):
        self.path = Path(path)  # a RunFolder too: it is a path-like (__fspath__)

    @classmethod
    def at(cls, storage_root: Union[str, Path], run_id: str) -> "RunFolder":
        """The run folder of run_id under storage_root: the one way from a RUN_ID to its folder,
        so no caller can reach outside the runs (a UsageError when run_id is no RUN_ID)."""
        return cls(runs_dir(storage_root) / checked_run_id(run_id))

    @property
    def run_id(self) -> str:
        return self.path.name

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:  # a message or an f-string names the folder, not the object
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"


# Every file by its property's name (NAME.run_json == "run.json", for a finding's object or a
# record's key); RUN_FILES: a folder holding none of them is not a run.
FILES = {name: value.fget(RunFolder("")).name for name, value in vars(RunFolder).items()
         if isinstance(value, property) and name != "run_id"}
NAME = SimpleNamespace(**FILES)
RUN_FILES = tuple(FILES[name] for name in ("run_json", "driver_log", "training_log",
                                            "inputs_json", "preflight_json"))


def refuse_symlinked(run_dir: Path) -> Path:
    """The run folder itself, refused when it is a symlink (it could point at another run)."""
    if Path(run_dir).is_symlink():
        raise usage("POST-E040", None, f"run folder {run_dir} is a symlink (to "
                    f"{os.readlink(str(run_dir))}); nothing is written through it")
    return Path(run_dir)


def supersede_success(run_dir: Path, phase: str) -> Optional[Path]:
    """Move run_dir/SUCCESS aside as SUCCESS.superseded-<UTC time>; its new name, or None."""
    success = RunFolder(run_dir).success
    if not os.path.lexists(str(success)):
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for number in range(1000):
        target = success.with_name(f"{SUPERSEDED}{stamp}" + (f"-{number}" if number else ""))
        try:
            os.link(str(success), str(target), follow_symlinks=False)  # never replaces a file
        except FileExistsError:
            continue
        except OSError as exc:
            raise RecordError("GEN-E002", f"cannot move {success} aside: {exc.strerror}; it no "
                              f"longer holds: the latest {phase} failed") from None
        os.unlink(str(success))
        print(f"{phase}: SUCCESS superseded by this failed verification; the old marker is "
              f"kept as {target}", flush=True)
        return target
    raise RecordError("GEN-E002", f"cannot move {success} aside: too many superseded markers")


def record_phase(path: Path, record: Dict[str, Any]) -> None:
    """Write a phase's record to path (a RunFolder's file); a failed one supersedes any SUCCESS
    in the folder."""
    run_dir = refuse_symlinked(Path(path).parent)
    if record.get("status") != "passed":
        moved = supersede_success(run_dir, str(record.get("phase", Path(path).name)))
        if moved:
            record = {**record, "superseded_success": moved.name}
    write_json(Path(path), record)
