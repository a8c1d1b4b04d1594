"""Every rule on a profile that needs no cluster: `make check-profile` runs them in well under a
second, and preflight runs the same ones before any GPU time. The batch rules are sizes.py's;
these add the recipe's own: rollout TP within one node, sequence lengths against the rollout
engine's limits, the profile's EXTRA_OVERRIDES (against the pinned verl's config where its
checkout is at hand: verl_keys.py), its NCCL transport values and its input pins.
"""
from __future__ import annotations

import types
from pathlib import Path
from typing import List, Optional

from ...run import recipe
from ...run.findings import (Check, Finding, finding, print_findings, run_checks,
                            verdict)
from ...run.profile import Profile
from ...run.profile_keys import PINS
from . import sizes, verl_keys


def _obj(profile: Profile) -> str:
    return f"profile {profile.PROFILE_NAME}"


def check_rollout_lengths(profile: Profile) -> List[Finding]:
    """The command sets enable_chunked_prefill=false and max_model_len = prompt + response, so one
    whole sequence must fit max_num_batched_tokens (verl's vLLM rollout raises otherwise; SGLang
    cannot schedule it)."""
    p = profile
    total = p.MAX_PROMPT_LENGTH + p.MAX_RESPONSE_LENGTH
    if total > p.ROLLOUT_MAX_NUM_BATCHED_TOKENS:
        return [finding("PRE-E101", _obj(p), f"MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH = "
                        f"{p.MAX_PROMPT_LENGTH} + {p.MAX_RESPONSE_LENGTH} = {total} exceeds "
                        f"ROLLOUT_MAX_NUM_BATCHED_TOKENS {p.ROLLOUT_MAX_NUM_BATCHED_TOKENS}",
                        max_model_len=total, mirrors="verl/workers/rollout/vllm_rollout"
                        " (max_num_batched_tokens < max_model_len without chunked prefill)")]
    return []


def check_extra_overrides(profile: Profile, verl_root: Optional[Path] = None) -> List[Finding]:
    """The bundle's own rules on each override, then the keys against the pinned verl's config
    (verl_root: its checkout; None where there is none, e.g. check-profile without a volume)."""
    accepted, problems = recipe.parse(profile.EXTRA_OVERRIDES)
    found = [finding(ident, _obj(profile), f"EXTRA_OVERRIDES {word!r}: {why}", override=word)
             for ident, word, why in problems]
    return found + verl_keys.check_override_keys(profile, [w for _, w in accepted], verl_root)


def check_nccl_values(profile: Profile) -> List[Finding]:
    """IB interface choices mean something only with NCCL_TRANSPORT=ib."""
    p = profile
    if p.NCCL_TRANSPORT == "ib":
        return []
    given = [k for k in ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX") if getattr(p, k)]
    return [finding("PRE-E102", _obj(p), f"{', '.join(given)} set while NCCL_TRANSPORT=socket "
                    "forces IB off", keys=given)] if given else []


def check_input_pins(profile: Profile) -> List[Finding]:
    missing = [key for key in PINS if not profile.pinned(key)]
    if profile.REWARD_FILE and not profile.pinned("REWARD_SHA256"):
        missing.append("REWARD_SHA256")
    if profile.DATA_CONVERTER and not profile.pinned("DATA_CONVERTER_SHA256"):
        missing.append("DATA_CONVERTER_SHA256")
    return [finding("INP-E070", _obj(profile), f"{', '.join(missing)} not pinned yet",
                    missing=missing)] if missing else []


def _on(rule):
    return lambda ctx: rule(ctx.profile)


# Preflight runs these after batch-sizes (which holds the rollout TP rules); check-profile runs them all.
RULES = [
    Check("rollout-lengths", _on(check_rollout_lengths)),
    Check("extra-overrides", lambda ctx: check_extra_overrides(ctx.profile, ctx.verl_root)),
    Check("nccl-values", _on(check_nccl_values)),
]
PROFILE_CHECKS = [Check("batch-sizes", _on(sizes.check_batch_sizes)), *RULES,
                  Check("input-pins", _on(check_input_pins))]


def run(profile: Profile, verl_root: Optional[Path] = None) -> int:
    """check-profile: every rule that needs no cluster; exit 0 passed, 1 a rule failed.
    verl_root: a verl checkout to check EXTRA_OVERRIDES against (None: not checked there)."""
    print(f"check-profile: {profile.PROFILE_NAME} ({profile.path}): {profile.NODES} nodes x "
          f"{profile.GPUS_PER_NODE} GPUs, world size {profile.world_size}", flush=True)
    ctx = types.SimpleNamespace(profile=profile, verl_root=verl_root)
    results = run_checks("check-profile", PROFILE_CHECKS, ctx)
    print_findings(results)
    return verdict("check-profile", results)
