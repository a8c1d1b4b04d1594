"""The run request, checked before the launcher writes anything: every job variable (STORAGE_ROOT,
RUN_ID, PROFILE, PROFILE_SHA256, SAVE_FREQ, RESUME_FROM, KILL_GRACE, PROBE_TIMEOUT,
COLLECTIVE_PROBE, COLLECTIVE_TIMEOUT, STALL_FIRST_STEP, STALL_STEP_FLOOR, TMPDIR, TRACE), the
profile's values, the volume, the input folders and the run folder to be. Each problem is one
line with its finding id and what to do; the launcher stops (exit 2) before it claims a RUN_ID.

On success it prints shell assignments (each value quoted by shlex) that the launcher evaluates:
the run's paths and the validated numbers, so the shell parses nothing itself.
"""
from __future__ import annotations

import math
import os
import re
import shlex
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ..resume import attempt
from ...run import runid
from ...run.findings import UsageError, say_usage, usage
from ...run.profile import Profile, requested_profile
from ...run.profile_keys import NAME, SHA256
from ...run.runfolder import RunFolder

PROG = "run-two-worker-grpo-v1"
ROOT_FORM = re.compile(r"^/[A-Za-z0-9/._-]*\Z")  # \Z: $ would allow a trailing newline
WHOLE = re.compile(r"^[1-9][0-9]{0,8}\Z")
SECONDS = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,3})?\Z")
MAX_PROBE_TIMEOUT = 86400.0
DEFAULT_PROBE_TIMEOUT = "120"
DEFAULT_KILL_GRACE = "10"
DEFAULT_COLLECTIVE_TIMEOUT = "60"
# The training watchdog (checks/watch/stall.py): the first step line may take this long (model load,
# first rollout), later ones 5x the slowest step so far but never less than the floor.
DEFAULT_STALL_FIRST_STEP = "3600"
DEFAULT_STALL_STEP_FLOOR = "900"


class RequestError(Exception):
    """One or more problems, each a UsageError from usage(): '(ID) what went wrong' and the
    catalog's hint."""

    def __init__(self, problems: List[UsageError]):
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


def variable_problems(env: Mapping[str, str]) -> List[UsageError]:
    """The job variables' own form: nothing on disk is looked at yet."""
    problems = []
    root = env.get("STORAGE_ROOT", "")
    run_id = env.get("RUN_ID", "")
    if not root:
        problems.append(usage("LAUNCH-E002", None, "STORAGE_ROOT is not set"))
    elif not root.startswith("/"):
        problems.append(usage("LAUNCH-E042", None, f"STORAGE_ROOT {root!r} is not an absolute path"))
    elif not ROOT_FORM.match(root):
        problems.append(usage("LAUNCH-E043", None, f"STORAGE_ROOT {root!r} holds characters outside "
                              "letters, digits, '/', '.', '_' and '-'"))
    if not run_id:
        problems.append(usage("LAUNCH-E003", None, "RUN_ID is not set"))
    elif len(run_id) > runid.MOST:
        problems.append(usage("LAUNCH-E015", None, f"RUN_ID is {len(run_id)} characters long; at "
                              f"most {runid.MOST} are allowed"))
    elif not runid.FORM.match(run_id):
        problems.append(usage("LAUNCH-E004", None, f"RUN_ID '{run_id}' must match "
                              "[A-Za-z0-9][A-Za-z0-9._-]*"))
    save_freq = env.get("SAVE_FREQ", "")
    if save_freq and not WHOLE.match(save_freq):
        problems.append(usage("LAUNCH-E030", None, f"SAVE_FREQ '{save_freq}' must be a positive "
                              "whole number"))
    resume_from = env.get("RESUME_FROM", "")
    if resume_from and resume_from != "auto" and (not runid.is_run_id(resume_from)
                        or resume_from == run_id):
        problems.append(usage("LAUNCH-E031", None, f"RESUME_FROM '{resume_from}' must be the RUN_ID "
                              "of another, preempted run"))
    profile = env.get("PROFILE", "")
    if profile and (not NAME.match(profile) or profile.endswith(".env")):
        problems.append(usage("LAUNCH-E009", None, f"PROFILE '{profile}' must name a profile in the "
                              "bundle (profiles/<name>.env, hash-checked) or a site profile, not a path"))
    digest = env.get("PROFILE_SHA256", "")
    if digest and (not SHA256.match(digest) or not profile):
        problems.append(usage("LAUNCH-E096", None, f"PROFILE_SHA256 '{digest[:80]}' must be the sha256 "
                              "of the site profile PROFILE names, as the Driver command sets both"))
    grace = env.get("KILL_GRACE") or DEFAULT_KILL_GRACE
    if not re.match(r"^[1-9][0-9]{0,3}$", grace):
        problems.append(usage("LAUNCH-E016", None, f"KILL_GRACE '{grace}' must be a whole number of "
                              "seconds from 1 to 9999"))
    if probe_timeout(env.get("PROBE_TIMEOUT") or DEFAULT_PROBE_TIMEOUT) is None:
        problems.append(usage("LAUNCH-E040", None, f"PROBE_TIMEOUT '{env.get('PROBE_TIMEOUT')}' must "
                              f"be a number of seconds above 0 and at most {MAX_PROBE_TIMEOUT:.0f}"))
    if probe_timeout(env.get("COLLECTIVE_TIMEOUT") or DEFAULT_COLLECTIVE_TIMEOUT) is None:
        problems.append(usage("LAUNCH-E051", None, f"COLLECTIVE_TIMEOUT "
                              f"'{env.get('COLLECTIVE_TIMEOUT')}' must be a number of seconds above "
                              f"0 and at most {MAX_PROBE_TIMEOUT:.0f}"))
    if env.get("COLLECTIVE_PROBE", "") not in ("", "nccl", "gloo", "off"):
        problems.append(usage("LAUNCH-E053", None, f"COLLECTIVE_PROBE '{env['COLLECTIVE_PROBE']}' must "
                              "be nccl, gloo or off"))
    first = env.get("STALL_FIRST_STEP") or DEFAULT_STALL_FIRST_STEP
    if first != "off" and probe_timeout(first) is None:
        problems.append(usage("LAUNCH-E052", None, f"STALL_FIRST_STEP '{first}' must be a number of "
                              f"seconds above 0 and at most {MAX_PROBE_TIMEOUT:.0f}, or off (no "
                              "training watchdog)"))
    floor = env.get("STALL_STEP_FLOOR") or DEFAULT_STALL_STEP_FLOOR
    if probe_timeout(floor) is None:
        problems.append(usage("LAUNCH-E052", None, f"STALL_STEP_FLOOR '{floor}' must be a number of "
                              f"seconds above 0 and at most {MAX_PROBE_TIMEOUT:.0f}"))
    if env.get("TRACE", "") not in ("", "0", "1"):
        problems.append(usage("LAUNCH-E049", None, f"TRACE '{env['TRACE']}' must be 1 (trace every "
                              "command) or 0"))
    if "TMPDIR" in env:
        tmp = env["TMPDIR"]
        if not (tmp.startswith("/") and os.path.isdir(tmp) and os.access(tmp, os.W_OK | os.X_OK)):
            problems.append(usage("LAUNCH-E041", None, f"TMPDIR {tmp!r} is not a writable folder"))
    return problems


def probe_timeout(text: str) -> Optional[float]:
    """Seconds as a finite number in (0, MAX]; None for anything else (abc, nan, inf, -1, 0)."""
    if not SECONDS.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) and 0 < value <= MAX_PROBE_TIMEOUT else None


def volume_problems(env: Mapping[str, str]) -> Tuple[Profile, Path]:
    """The volume, the profile, the input folders and the run folder to be, in that order."""
    root = env["STORAGE_ROOT"]
    if not os.path.isdir(root):
        raise RequestError([usage("LAUNCH-E005", None, f"STORAGE_ROOT {root} is not a directory")])
    if not os.access(root, os.W_OK | os.X_OK):
        raise RequestError([usage("LAUNCH-E006", None, f"STORAGE_ROOT {root} is not writable")])
    try:
        profile = requested_profile(root, env.get("PROFILE", ""), env.get("PROFILE_SHA256", ""))
    except UsageError as exc:
        if exc.fid == "LAUNCH-E095":
            raise RequestError([exc])
        raise RequestError([exc, usage("LAUNCH-E009", None, f"profile "
                                       f"'{env.get('PROFILE') or 'default'}' cannot be used (see above)")])
    for folder in (profile.verl_root(root), profile.model_root(root), profile.data_root(root)):
        if not folder.is_dir():
            raise RequestError([usage("LAUNCH-E007", None, f"input folder {folder} is missing")])
    planned = RunFolder.at(root, env["RUN_ID"]).path
    if os.path.lexists(planned):
        raise RequestError([usage("LAUNCH-E008", None, f"run folder {planned} already exists")])
    deepest = planned.parent
    while not os.path.lexists(deepest):
        deepest = deepest.parent
    if os.path.isdir(deepest) and not os.access(deepest, os.W_OK | os.X_OK):  # a file: E018
        raise RequestError([usage("LAUNCH-E017", None, f"{deepest} is not writable, so the run "
                                  "folder cannot be created")])
    return profile, planned


def check(env: Mapping[str, str]) -> Dict[str, str]:
    """The launcher's settings for a valid request; RequestError lists what is wrong."""
    problems = variable_problems(env) + attempt.heartbeat_problems(env)
    if problems:
        raise RequestError(problems)
    env, preemption = _attempt(env)
    profile, planned = volume_problems(env)
    # Every later verifier call names the profile so: a bundle profile by its name, a site
    # profile by its installed file (whose name is its sha256, checked on every load).
    named = str(profile.path) if env.get("PROFILE_SHA256") else profile.PROFILE_NAME
    return {**preemption, "PROFILE_NAME": named, "RUN_DIR_PLANNED": str(planned),
            "KILL_GRACE": env.get("KILL_GRACE") or DEFAULT_KILL_GRACE,
            "PROBE_TIMEOUT": env.get("PROBE_TIMEOUT") or DEFAULT_PROBE_TIMEOUT,
            "COLLECTIVE_TIMEOUT": env.get("COLLECTIVE_TIMEOUT") or DEFAULT_COLLECTIVE_TIMEOUT,
            "COLLECTIVE_PROBE": env.get("COLLECTIVE_PROBE") or "nccl",
            "STALL_FIRST_STEP": env.get("STALL_FIRST_STEP") or DEFAULT_STALL_FIRST_STEP,
            "STALL_STEP_FLOOR": env.get("STALL_STEP_FLOOR") or DEFAULT_STALL_STEP_FLOOR}


def _attempt(env: Mapping[str, str]) -> Tuple[Mapping[str, str], Dict[str, str]]:
    """A retry's next attempt and RESUME_FROM=auto (checks/resume/attempt.py), the heartbeat's timing."""
    try:
        return attempt.request_env(env)
    except UsageError as exc:
        raise RequestError([exc])


def main(env: Mapping[str, str]) -> int:
    try:
        settings = check(env)
    except RequestError as exc:
        for problem in exc.problems:
            say_usage(PROG, problem)
        return 2
    for key, value in settings.items():
        print(f"{key}={shlex.quote(value)}")
    return 0


# What the job's environment can still change after the launcher dropped its shell hooks: the
# Python that PATH finds, what it imports besides the standard library, and preloaded libraries.
RECORDED_VARIABLES = ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE",
                      "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")


def job_environment(env: Mapping[str, str], python: str) -> Dict[str, object]:
    """run.json's job_environment: the launcher's shell hooks it dropped (BASH_ENV, ENV, exported
    functions: never used) and what could still shape the run (recorded for the report)."""
    dropped = env.get("TWGRPO_SHELL_HOOKS", "").split()
    return {"shell_hooks_dropped": dropped[:64],
            "python3": python,
            "python3_realpath": os.path.realpath(python),
            "variables": {name: env[name][:4096] for name in RECORDED_VARIABLES if name in env}}
