"""Postflight's reading of what went wrong or looks wrong in a run: the named cause of fatal log
lines (host OOM kill, disk full, port in use, /dev/shm, duplicate GPU, open files, the first
collective, Gloo's mesh), NaN or inf in any scalar at any step, and reward sanity.

ctx is postflight's context (ctx.scan(), ctx.run_dir, ctx.profile, ctx.evidence).
"""
from __future__ import annotations

from typing import List

from ...formats import tfevents
from ...run.findings import Finding, Skip, finding
from ...run.runfolder import NAME, RunFolder

CAUSE_IDS = {"host-oom": "POST-E120", "disk-full": "POST-E121", "port-in-use": "POST-E122",
             "shm": "POST-E123", "duplicate-gpu": "POST-E124", "open-files": "POST-E125",
             "first-collective": "POST-E126", "gloo-mesh": "POST-E127"}
CAUSE_TEXT = {
    "host-oom": "the host ran out of memory and a worker was killed",
    "disk-full": "a write failed: no space left",
    "port-in-use": "a port was already in use (a transient collision)",
    "shm": "a /dev/shm segment could not be created",
    "duplicate-gpu": "two ranks were mapped to one GPU",
    "open-files": "the open-file limit was reached",
    "first-collective": "the first NCCL collective never completed",
    "gloo-mesh": "Gloo could not connect its full mesh",
}
SCORE, LENGTH, CLIPPED = "critic/score/mean", "response_length/mean", "response_length/clip_ratio"
TAGS = (SCORE, LENGTH, CLIPPED)
# A model generate-inputs made from random weights is not expected to learn or to answer.
UNTRAINED_HUBS = ("generated",)


def check_fatal_causes(ctx) -> List[Finding]:
    scan = ctx.scan()
    ctx.evidence["fatal_causes"] = dict(scan.cause_counts)
    found = []
    for line, cause, details, text in scan.causes:
        where = f" ({', '.join(f'{k} {v}' for k, v in sorted(details.items()))})" if details else ""
        found.append(finding(CAUSE_IDS[cause], f"training.log:{line}",
                             f"{CAUSE_TEXT[cause]}{where}: {text}", **details))
    for cause, count in sorted(scan.cause_counts.items()):
        shown = sum(1 for c in scan.causes if c[1] == cause)
        if count > shown:
            found.append(finding(CAUSE_IDS[cause], NAME.training_log, f"{count - shown} more lines "
                                 f"of the same cause not shown"))
    return found


def _scalars(ctx):
    if not hasattr(ctx, "_health_scalars"):
        ctx._health_scalars = ctx.scalars(TAGS) if hasattr(ctx, "scalars") else \
            tfevents.load_scalars(RunFolder(ctx.run_dir).tensorboard, keep=TAGS)
    if not ctx._health_scalars.files:
        raise Skip("no TensorBoard event file (tensorboard-scalars says so)")
    return ctx._health_scalars


def check_scalars_finite(ctx) -> List[Finding]:
    """Every scalar at every step (a required one non-finite at the target step: POST-E017's). A
    NaN a later write of its step made finite is not the run's: said (tfnonfinite.py)."""
    scalars = _scalars(ctx)
    judged = ctx.evidence.get("tensorboard", {}).get("metrics", {})
    return [finding("POST-E128", tag, f"{value!r} at step {step}, the first non-finite value of "
                    "this scalar", step=step)
            for tag, (step, value) in sorted(scalars.nonfinite.items())
            if not (step == ctx.steps and isinstance(judged.get(tag), dict)
                    and not tfevents.is_finite(judged[tag].get("value")))] + \
        [finding("POST-W128", tag, f"{value!r} at step {step} was written again, finite, by a later "
                 "record of the step: the run's last value there is finite", step=step)
         for tag, (step, value) in sorted(scalars.taken_back.items())]


def check_reward_sanity(ctx) -> List[Finding]:
    if ctx.profile.MODEL_HUB in UNTRAINED_HUBS:
        # Not expected of this model, so nothing is missing: a pass with its reason (a skip would
        # mean the check could not judge, and SUCCESS needs every check passed).
        ctx.evidence["reward_sanity"] = {"why": f"MODEL_HUB={ctx.profile.MODEL_HUB}: a generated "
                                         "random model is not expected to score"}
        return []
    scalars = _scalars(ctx)
    found = []
    rules = ((SCORE, "POST-W010", lambda v: v == 0, "every step's mean score is 0"),
             (LENGTH, "POST-W011", lambda v: v == 0, "every step's responses are empty"),
             (CLIPPED, "POST-W012", lambda v: v >= 1, "every step's responses were all cut at "
              "MAX_RESPONSE_LENGTH"))
    for tag, fid, bad, text in rules:
        series = scalars.values.get(tag, {})
        if series and all(bad(v) for v in series.values()):
            found.append(finding(fid, tag, f"{text} (steps {min(series)}..{max(series)})",
                                 steps=len(series)))
    return found
