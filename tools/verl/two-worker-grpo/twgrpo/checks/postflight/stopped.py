"""Postflight of a run that was stopped before it ended (PREEMPTED: a signal, or lost without a
verdict, with a complete checkpoint short of the target step; run/preemption.py).

Such a run is judged as far as it got: the scalars, rollouts and checkpoint up to its last
complete checkpoint K must be whole, and one finding (POST-E170) says what is missing because
it stopped (steps K+1..target, their files, the final validation) and how to resume it, in
place of the findings a broken training would get.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from ...run.findings import Finding, finding, mismatch
from ...run.preemption import STOPPED_ID, Stop, stop_of
from ...run.runverdict import failed_fields, success_text
from ...run.runfolder import NAME


def stop_point(run_dir: Path) -> Optional[Stop]:
    """The run's stop when it is PREEMPTED (resumable), None otherwise."""
    stop = stop_of(run_dir, failed_fields(run_dir), success_text(run_dir) is not None)
    return stop if stop is not None and stop.resumable else None


def check_stopped(ctx) -> List[Finding]:
    """In place of completion-markers for a stopped run: the log must show verl's plan (the
    checkpoint it reached is postflight's checkpoint check); the rest is missing because it
    stopped (POST-E170)."""
    stop, scan = ctx.stop, ctx.scan()
    found = []
    target = ctx.profile.TARGET_STEPS
    if scan.total_steps != {target}:
        found.append(mismatch("POST-E004", NAME.training_log, "'Total training steps:' values",
                              [target], sorted(scan.total_steps) or "none"))
    ctx.evidence["stopped"] = {"how": stop.how, "phase": stop.phase, "at": stop.at,
                               "step": stop.step, "target": target,
                               "resume_from": stop.run_id}
    missing = (f"steps {stop.step + 1}..{target}" if stop.step + 1 < target else f"step {target}")
    found.append(finding(STOPPED_ID, ctx.run_id, f"{stop.sentence()}. Missing because it stopped: "
                         f"{missing} (scalars, rollouts, checkpoint) and the final validation. "
                         f"Resume it with a new RUN_ID and {stop.resume_line()}",
                         step=stop.step, target=target))
    return found

