"""A run stopped before it ended: by a signal (Spot preemption, a platform's TERM, a KILL the
watchdog saw) or lost without any verdict (heartbeat.json older than its lease). With a
complete checkpoint short of the target step it is PREEMPTED, resumable from that step.

Cheap and bounded, for every reader: FAILED, heartbeat.json, run.json, verl's checkpoint tracker
and a stat of each shard file the checkpoint must hold (the resume phase hashes and opens them).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, Optional

from ..formats import bounded
from . import heartbeat, runrecord
from .runfolder import RunFolder

STOP_SIGNALS = ("TERM", "INT", "HUP", "KILL", "unknown")  # unknown: the watchdog saw the launcher die
SHARDS = ("model", "optim", "extra_state")
STOPPED_ID = "POST-E170"  # postflight's one finding for a stopped run (checks/postflight/stopped.py)


@dataclasses.dataclass
class Stop:
    how: str                  # "signal TERM", "lost (no heartbeat ...)", ...
    phase: str                # the phase it stopped in ("unknown" when lost)
    at: str                   # when: FAILED's time or the last heartbeat ("" if unknown)
    step: Optional[int]       # its last complete checkpoint, None without one
    target: Optional[int]     # the profile's TARGET_STEPS
    run_id: str

    @property
    def resumable(self) -> bool:
        return self.step is not None and (self.target is None or self.step < self.target)

    def resume_line(self) -> str:
        return f"RESUME_FROM={self.run_id}"

    def sentence(self) -> str:
        """'stopped by signal TERM in phase training at ...; step 1 of 2 checkpointed'"""
        where = f" in phase {self.phase}" if self.phase and self.phase != "unknown" else ""
        when = f" at {self.at}" if self.at else ""
        text = f"{self.how}{where}{when}"
        if self.step is None:
            return text + "; no complete checkpoint: start afresh"
        of = f" of {self.target}" if self.target else ""
        return text + f"; its checkpoint of step {self.step}{of} is complete"


def _run_values(run_dir: Path) -> Dict[str, Any]:
    return runrecord.profile_values(run_dir)


def _int(value: Any) -> Optional[int]:
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number > 0 else None


def checkpoint_step(run_dir: Path, world: Optional[int]) -> Optional[int]:
    """verl's tracker step when that checkpoint holds every shard file of every rank (non-empty),
    data.pt and fsdp_config.json; None otherwise. A stat per file, no reading of shards."""
    folder = RunFolder(run_dir).checkpoints
    try:
        text = bounded.read_text(folder / "latest_checkpointed_iteration.txt", 64).strip()
    except bounded.Unreadable:
        return None
    step = _int(text) if text.isdigit() else None
    if step is None or not world:
        return None
    step_dir = folder / f"global_step_{step}"
    wanted = [step_dir / "data.pt", step_dir / "actor" / "fsdp_config.json"]
    wanted += [step_dir / "actor" / f"{kind}_world_size_{world}_rank_{rank}.pt"
               for kind in SHARDS for rank in range(min(world, 4096))]
    for path in wanted:
        try:
            if bounded.regular(path).st_size == 0:
                return None
        except bounded.Unreadable:
            return None
    return step


def stop_of(run_dir: Path, failed: Optional[Dict[str, str]], has_success: bool,
            now: Optional[float] = None) -> Optional[Stop]:
    """How the run stopped before it ended, or None when it did not (a SUCCESS, a check that
    failed, a run still alive, a run without a heartbeat and without a FAILED marker)."""
    run_dir = Path(run_dir)
    if has_success:
        return None
    if failed is not None:
        signal = failed.get("signal", "")
        if signal not in STOP_SIGNALS:
            return None
        how, phase, at = f"stopped by signal {signal}", failed.get("phase", "?"), failed.get("time", "")
        if signal == "unknown":
            how = "stopped when its launcher was killed (the watchdog's FAILED)"
    else:
        state = heartbeat.liveness(run_dir, now)
        if state not in ("lost", "ended"):
            return None
        beat = heartbeat.read(run_dir) or {}
        how = ("lost: its launcher vanished without a verdict" if state == "ended" else
               f"lost: no heartbeat for longer than its {beat.get('lease_s', '?')} s lease and no verdict")
        phase, at = "unknown", str(beat.get("time", ""))
    values = _run_values(run_dir)
    nodes, gpus = _int(values.get("NODES")), _int(values.get("GPUS_PER_NODE"))
    world = nodes * gpus if nodes and gpus else None
    return Stop(how, phase, at, checkpoint_step(run_dir, world), _int(values.get("TARGET_STEPS")),
                run_dir.name)


def _other_problems(run_dir: Path) -> int:
    """Findings of a postflight that judged this run as stopped, other than the stop itself."""
    try:
        size = runrecord.size(run_dir)  # the run's record budget, as every reader's
        record = bounded.read_object(RunFolder(run_dir).verification_json, size.record_bytes,
                                     size.record_memory)
    except bounded.Unreadable:
        return 0
    evidence = record.get("evidence")
    if not isinstance(evidence, dict) or not evidence.get("stopped"):
        return 0
    count = 0
    for check in record.get("checks", []) if isinstance(record.get("checks"), list) else []:
        for item in check.get("findings", []) if isinstance(check, dict) else []:
            if isinstance(item, dict) and item.get("id") != STOPPED_ID and "-W" not in str(item.get("id")):
                count += 1
    return count


def refine(run_dir: Path, verdict: Any, failed: Optional[Dict[str, str]], has_success: bool,
           now: Optional[float] = None) -> Any:
    """runverdict's Verdict, told more exactly: PREEMPTED (resumable from step K) for a run
    stopped by a signal or lost with a complete checkpoint; RUNNING while its heartbeat is
    fresh and it has no verdict; a stopped run without a checkpoint keeps its word and says so.
    A fresh heartbeat beside a FAILED marker is a conflict: the launcher still runs."""
    if verdict.status not in ("FAILED", "INCOMPLETE"):
        return verdict
    run_dir = Path(run_dir)
    state = heartbeat.liveness(run_dir, now)
    if state == "alive":
        if verdict.status == "INCOMPLETE" and failed is None and not has_success:
            return dataclasses.replace(verdict, status="RUNNING", summary="RUNNING: its launcher "
                                       f"is alive, {heartbeat.describe(run_dir, now)}")
        if failed is not None:
            verdict.conflicts.append(f"FAILED exists but the heartbeat is fresh "
                                     f"({heartbeat.describe(run_dir, now)}): the launcher may "
                                     "still run; it is never resumed while it does")
        return verdict
    stop = stop_of(run_dir, failed, has_success, now)
    if stop is None or (failed is not None and "problem" in failed):
        return verdict
    if stop.resumable and not _other_problems(run_dir):
        return dataclasses.replace(verdict, status="PREEMPTED", summary=(
            f"PREEMPTED (resumable from step {stop.step}): {stop.sentence()}. Resume it with "
            f"a new RUN_ID and {stop.resume_line()} (or re-run the same job with RESUME_FROM=auto)"))
    return dataclasses.replace(verdict, summary=f"{verdict.status}: {stop.sentence()}"
                               + ("" if stop.resumable else
                                  " (nothing left to train)" if stop.step is not None else ""))
