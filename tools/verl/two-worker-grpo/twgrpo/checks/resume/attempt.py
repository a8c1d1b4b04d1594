"""Retries that resume by themselves: RESUME_FROM=auto, and a re-run of the same job.

Platforms retry a job by running the same command again (KubeRay's backoffLimit, SkyPilot's
managed-job recovery, "restart on failure"), so the RUN_ID's folder already exists. When that
run (and every later attempt of it) was stopped, by a signal or lost without a verdict, and ran
the same profile and bundle, the new launcher becomes the next attempt, ``<RUN_ID>.2``,
``<RUN_ID>.3``, ... and resumes from the newest attempt with a complete checkpoint (or starts
fresh when none has one, and says so). It never does so while any attempt is alive (fresh
heartbeat) or after one succeeded, failed a check or belongs to another job. "This job" is
proven, not guessed: every attempt must record in run.json the job identity the platform gave
this launch (run/jobidentity.py: the Ray Jobs submission id, SLURM_JOB_ID); a folder without it
(planted, copied, or from a launch no platform named) is refused, never adopted.

RESUME_FROM=auto on its own picks the newest resumable run of the same lineage (the RUN_ID
without its attempt suffix, and its attempts) and profile, or starts fresh and says so; a
resumable run of the lineage that is not of this launch's job identity is refused, not skipped.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ...run import heartbeat, jobidentity, runid, runrecord
from ...run.findings import UsageError, usage
from ...run.humane import parse_time
from ...run.preemption import stop_of
from ...run.profile import requested_profile
from ...run.runfolder import RunFolder, runs_dir
from ...run.runverdict import failed_fields, latest_verdict, success_text

def attempts(root: Path, base: str) -> List[str]:
    """The lineage's run folders that exist: base, base.2, ... base.99."""
    names = runid.attempt_names(base)
    return [name for name in names if (root / name).is_dir() and not (root / name).is_symlink()]


def _run(folder: Path) -> Dict:
    return runrecord.read_or_empty(folder)


def _same_job(run: Dict, profile_name: str, bundle: str) -> bool:
    profile = run.get("profile")
    return isinstance(profile, dict) and profile.get("name") == profile_name and \
        run.get("bundle_sums_sha256") == bundle


def newest_resumable(root: Path, names: List[str], profile_name: str) -> Optional[Tuple[str, str]]:
    """(RUN_ID, summary) of the newest PREEMPTED run among names with this profile."""
    best = None
    for name in names:
        run = _run(root / name)
        profile = run.get("profile")
        if not isinstance(profile, dict) or profile.get("name") != profile_name:
            continue
        verdict = latest_verdict(root / name)
        if verdict.status != "PREEMPTED":
            continue
        started = parse_time(run.get("started_at"))
        key = (started.isoformat() if started else "", name)
        if best is None or key > best[0]:
            best = (key, name, verdict.summary.split(". Resume it", 1)[0])
    return (best[1], best[2]) if best else None


def _refuse_foreign(folder: Path, identity: Optional[Dict[str, str]]) -> None:
    """Raise unless the run in folder recorded this launch's job identity (and it has one)."""
    recorded = _run(folder).get("job_identity")
    if identity is not None and recorded == identity:
        return
    raise usage("LAUNCH-E094", None, f"run folder {folder} was not made by this job: its job "
                f"identity is {jobidentity.describe(recorded)}, this launch's is "
                f"{jobidentity.describe(identity)}; to continue it, RESUME_FROM={folder.name}")


def _refuse_retry(root: Path, names: List[str], profile_name: str, bundle: str,
                  identity: Optional[Dict[str, str]]) -> None:
    """Raise unless every existing attempt is a stopped run of this job."""
    for name in names:
        folder = root / name
        if heartbeat.liveness(folder) == "alive":
            raise usage("LAUNCH-E091", None, f"run folder {folder} exists and its launcher is "
                        f"alive ({heartbeat.describe(folder)})")
        if not _same_job(_run(folder), profile_name, bundle):
            raise usage("LAUNCH-E008", None, f"run folder {folder} already exists and is not a "
                        f"run of this job (profile {profile_name}, this bundle)")
        _refuse_foreign(folder, identity)
        if stop_of(folder, failed_fields(folder), success_text(folder) is not None) is None:
            raise usage("LAUNCH-E092", None, f"run folder {folder} exists and was not stopped: "
                        f"{latest_verdict(folder).summary}")


def plan(storage_root: Path, run_id: str, resume_from: str, profile_name: str,
         bundle: str, identity: Optional[Dict[str, str]] = None) -> Tuple[str, str, List[str]]:
    """(RUN_ID, RESUME_FROM, notes) for this launch, whose platform job identity is identity
    (None: no platform named it, so it continues no attempt); UsageError (LAUNCH-E09x) when
    refused."""
    root = runs_dir(storage_root)
    notes: List[str] = []
    base = runid.base_of(run_id)
    if (root / run_id).exists() or (root / run_id).is_symlink():
        if (root / run_id).is_symlink() or not (root / run_id).is_dir():
            raise usage("LAUNCH-E008", None, f"run folder {root / run_id} already exists (not a "
                        "folder, or a link)")
        names = attempts(root, base)
        _refuse_retry(root, names, profile_name, bundle, identity)
        free = [name for name in runid.attempt_names(base)[1:]
                if not (root / name).exists() and not (root / name).is_symlink()]
        if not free:
            raise usage("LAUNCH-E093", None, f"{base} and {base}.2 .. {base}.{runid.MAX_ATTEMPT} all "
                        "exist")
        new_id = free[0]
        notes.append(f"run folder {run_id} exists and was stopped: this launch is the next "
                     f"attempt, {new_id}")
        found = newest_resumable(root, names, profile_name)
        if found:
            notes.append(f"attempt {new_id} resumes from {found[0]}: {found[1]}")
            return new_id, found[0], notes
        if resume_from and resume_from != "auto":
            notes.append(f"no attempt of {base} has a complete checkpoint: {new_id} resumes from "
                         f"RESUME_FROM={resume_from} as the job asks")
            return new_id, resume_from, notes
        notes.append(f"no attempt of {base} has a complete checkpoint: {new_id} starts fresh")
        return new_id, "", notes
    if resume_from != "auto":
        return run_id, resume_from, notes
    lineage = [n for n in attempts(root, base) if n != run_id]
    for name in lineage:  # RESUME_FROM=auto never picks, nor skips in silence, another job's run
        if newest_resumable(root, [name], profile_name):
            _refuse_foreign(root / name, identity)
    found = newest_resumable(root, lineage, profile_name)
    if found:
        notes.append(f"RESUME_FROM=auto: resuming from {found[0]}, the newest resumable run of "
                     f"{base} with profile {profile_name}: {found[1]}")
        return run_id, found[0], notes
    notes.append(f"RESUME_FROM=auto: no resumable run of {base} with profile {profile_name}: "
                 "starting fresh")
    return run_id, "", notes


# --- the launcher's request check (request.py): heartbeat timing, attempt, RESUME_FROM=auto ---

DEFAULT_INTERVAL, DEFAULT_LEASE = "30", "120"


def heartbeat_problems(env: Mapping[str, str]) -> List[UsageError]:
    interval = env.get("HEARTBEAT_INTERVAL") or DEFAULT_INTERVAL
    lease = env.get("HEARTBEAT_LEASE") or DEFAULT_LEASE
    problem = None
    if not (interval.isdigit() and lease.isdigit()) or len(interval) > 5 or len(lease) > 5:
        problem = "must be whole seconds"
    else:
        problem = heartbeat.check_timing(int(interval), int(lease))
    return [] if problem is None else [
        usage("LAUNCH-E090", None, f"HEARTBEAT_INTERVAL '{interval}' and HEARTBEAT_LEASE "
              f"'{lease}': {problem}")]


def _bundle_sums() -> str:
    """sha256 of the bundle's SHA256SUMS (the launcher checked it against its pin)."""
    path = Path(__file__).resolve().parents[3] / "SHA256SUMS"  # the bundle folder, above twgrpo/
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def request_env(env: Mapping[str, str]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(the job's variables with RUN_ID and RESUME_FROM as this launch uses them, the launcher's
    settings for them); UsageError (LAUNCH-E008/E091..E093) when a retry is refused."""
    env = dict(env)
    settings = {"HEARTBEAT_INTERVAL": env.get("HEARTBEAT_INTERVAL") or DEFAULT_INTERVAL,
                "HEARTBEAT_LEASE": env.get("HEARTBEAT_LEASE") or DEFAULT_LEASE,
                "ATTEMPT_NOTE": ""}
    root = env.get("STORAGE_ROOT", "")
    if not os.path.isdir(root) or not (os.path.lexists(RunFolder.at(root, env["RUN_ID"]).path)
                                       or env.get("RESUME_FROM") == "auto"):
        return env, settings
    try:
        profile = requested_profile(root, env.get("PROFILE", ""), env.get("PROFILE_SHA256", ""))
    except UsageError:
        return env, settings  # the request check names the profile's problem
    run_id, resume_from, notes = plan(Path(root), env["RUN_ID"], env.get("RESUME_FROM", ""),
                                      profile.PROFILE_NAME, _bundle_sums(), jobidentity.of(env))
    env.update(RUN_ID=run_id, RESUME_FROM=resume_from)
    settings.update(RUN_ID=run_id, RESUME_FROM=resume_from, ATTEMPT_NOTE="\n".join(notes))
    return env, settings
