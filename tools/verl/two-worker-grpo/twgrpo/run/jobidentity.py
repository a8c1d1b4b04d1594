"""The job a launch belongs to, as the platform that started it names it.

A retry of a job (KubeRay's backoffLimit, a Slurm requeue) runs the same command again with the
same platform name for the job; an unrelated launch that happens to reuse a RUN_ID has another
name, or none. run.json records it (job_identity), and a launch only continues attempts that
carry its own (checks/resume/attempt.py): a folder it did not make is never adopted.

The sources, first one present wins:
  ray-job   the Ray Jobs submission id: RAY_JOB_SUBMISSION_ID, or the job_submission_id in the
            metadata Ray's job supervisor hands its driver (RAY_JOB_CONFIG_JSON_ENV_VAR). make
            submit and make rayjob set it to the RUN_ID (KubeRay's jobId), and a KubeRay retry
            submits the same jobId again.
  slurm     SLURM_JOB_ID, which a requeued job keeps.
"""
from __future__ import annotations

import json
import re
from typing import Dict, Mapping, Optional

# What a platform's id may look like: printable, no spaces, bounded (it is compared, and shown).
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,255}$")


def _submission_id(env: Mapping[str, str]) -> str:
    if env.get("RAY_JOB_SUBMISSION_ID"):
        return env["RAY_JOB_SUBMISSION_ID"]
    text = env.get("RAY_JOB_CONFIG_JSON_ENV_VAR", "")
    if not text or len(text) > 1 << 20:
        return ""
    try:
        metadata = json.loads(text).get("metadata") or {}
    except (ValueError, AttributeError):
        return ""
    value = metadata.get("job_submission_id") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else ""


def of(env: Mapping[str, str]) -> Optional[Dict[str, str]]:
    """{"kind": ..., "id": ...} for this launch, or None when no platform names its job."""
    for kind, value in (("ray-job", _submission_id(env)), ("slurm", env.get("SLURM_JOB_ID", ""))):
        if value and _ID.match(value):
            return {"kind": kind, "id": value}
    return None


def describe(identity: object) -> str:
    """'ray-job spot-1' for a recorded identity; 'none' when it has none (or not one we wrote)."""
    if isinstance(identity, dict) and isinstance(identity.get("kind"), str) \
            and isinstance(identity.get("id"), str):
        return f"{identity['kind']} {identity['id'][:256]}"
    return "none"
