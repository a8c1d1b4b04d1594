"""Postflight's check of validation, for a profile that asks for it (TEST_FREQ > 0 or
VAL_BEFORE_TRAIN=true): verl 0.6.0's RayPPOTrainer.fit validates before the first step (logged at
the step it starts from) and at every step divisible by test_freq and the last one, and logs the
results as val-core/<data source>/<variable>/<metric> scalars. The report charts them with the
other scalars. ctx is postflight's context.
"""
from __future__ import annotations

from typing import List, Set

from ...formats import tfevents
from ...run.findings import Finding, Skip, finding
from ...run.runfolder import RunFolder

CORE = "val-core/"


def expected_steps(test_freq: int, before: bool, first: int, last: int) -> Set[int]:
    steps = {s for s in range(first, last + 1) if test_freq > 0 and (s % test_freq == 0 or s == last)}
    return steps | ({first - 1} if before else set())


def check_validation(ctx) -> List[Finding]:
    p = ctx.profile
    if p.TEST_FREQ < 0 and p.VAL_BEFORE_TRAIN != "true":
        # Nothing was asked for, so nothing is missing: a pass with its reason, not a skip (a
        # skip means a check could not judge, and SUCCESS needs every check passed).
        ctx.evidence["validation"] = {"expected_steps": [], "why": "the profile runs no "
                                      "validation (TEST_FREQ=-1, VAL_BEFORE_TRAIN=false)"}
        return []
    folder = RunFolder(ctx.run_dir).tensorboard
    scalars = ctx.scalars() if hasattr(ctx, "scalars") else tfevents.load_scalars(folder)
    if not scalars.files:
        raise Skip("no TensorBoard event file (tensorboard-scalars says so)")
    tags = sorted(t for t in scalars.values if t.startswith(CORE))
    want = expected_steps(p.TEST_FREQ, p.VAL_BEFORE_TRAIN == "true", ctx.first_step, ctx.steps)
    ctx.evidence["validation"] = {"tags": tags[:20], "expected_steps": sorted(want)}
    if not tags:
        return [finding("POST-E152", str(folder), f"no {CORE}* scalar in {len(scalars.files)} "
                        f"event files, though TEST_FREQ={p.TEST_FREQ} and "
                        f"VAL_BEFORE_TRAIN={p.VAL_BEFORE_TRAIN}")]
    found = []
    missing = sorted(s for s in want if not any(tfevents.is_finite(scalars.at(t, s)) for t in tags))
    if missing:
        found.append(finding("POST-E153", str(folder), f"no finite {CORE}* value at steps "
                             f"{', '.join(map(str, missing))} (expected at "
                             f"{', '.join(map(str, sorted(want)))})", missing=missing))
    ctx.evidence["validation"]["logged_steps"] = sorted({s for t in tags for s in scalars.values[t]})[:200]
    return found
