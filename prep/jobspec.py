"""What a job submission carries: the entrypoint (the Driver command) and its RuntimeEnv.

The same two values go to `make submit` (Ray Jobs REST API) and into `make rayjob`'s KubeRay
RayJob, so one test of a submitted run covers both. The Driver command is prep/bundle.py's,
unchanged; the RuntimeEnv is the bundle's own (`runtime-env`, the hosted form's) without its
client-side paths, plus the job's variables.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from prep import bundle  # noqa: E402  (the Driver command, the bundle's paths)
from twgrpo.run import runid  # noqa: E402  (the launcher's own RUN_ID rule)
from twgrpo.run.findings import UsageError, usage  # noqa: E402

# The RuntimeEnv keys that name files on the submitting machine: `ray job submit` uploads them
# from there (and fails when the volume is not mounted there); the pinned verl checkout reaches
# every node through PYTHONPATH on the shared volume instead.
CLIENT_SIDE = ("working_dir", "excludes", "py_modules")
# The launcher's variables a job sets (make submit's knobs; JOB_ENV adds any other NAME=value).
JOB_VARIABLES = ("RUN_ID", "SAVE_FREQ", "RESUME_FROM", "KILL_GRACE", "PROBE_TIMEOUT",
                 "COLLECTIVE_PROBE", "COLLECTIVE_TIMEOUT", "STALL_FIRST_STEP", "STALL_STEP_FLOOR")
# Set by the Driver command itself: a job variable of the same name would be overridden there.
COMMAND_VARIABLES = ("STORAGE_ROOT", "PROFILE", "PROFILE_SHA256")
# Ray's `job stop` sends TERM, then KILL after RAY_JOB_STOP_WAIT_TIME_S (Ray's default 3 s):
# give the launcher time to write FAILED and stop its phase (TERM, KILL_GRACE, then KILL).
STOP_WAIT_S = 60
# Variables that configure a shell before or while it runs the Driver command: a startup file
# (BASH_ENV, ENV), options (SHELLOPTS=xtrace with a PS4 holding $(...) runs code), imported
# functions, POSIX mode. No line of the command can undo what they do first, so none is sent.
SHELL_VARIABLES = ("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PS1", "PS2", "PS0",
                   "PROMPT_COMMAND", "POSIXLY_CORRECT", "CDPATH", "GLOBIGNORE", "EXECIGNORE",
                   "BASH_XTRACEFD", "BASH_COMPAT", "BASH_LOADABLES_PATH", "FUNCNEST", "IFS",
                   "INPUTRC", "TMOUT")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
VALUE = re.compile(r"^[A-Za-z0-9._/:,@+=-]*\Z")  # nothing a shell or YAML would read (\Z: no final newline)


class SpecError(UsageError):
    """'(SUB-Ennn) what went wrong', with the catalog's hint (built by spec_error)."""


def spec_error(fid: str, message: str) -> SpecError:
    made = usage(fid, None, message)
    return SpecError(str(made), made.fid, made.hint)


def installed_rel(storage_root: str, bundle_dir: Optional[Path]) -> str:
    """The submitted bundle's folder relative to STORAGE_ROOT: a given folder under it (a flat
    install), else the launcher's version folder, where make install-tools puts it."""
    if bundle_dir is not None:
        try:
            return Path(bundle_dir).resolve().relative_to(Path(storage_root).resolve()).as_posix()
        except ValueError:
            pass
    launcher = (bundle_dir or bundle.BUNDLE) / bundle.LAUNCHER_NAME
    return f"{bundle.BUNDLES_REL}/{bundle.version_of(launcher)}"


def driver_command(storage_root: str, profile: str, launcher: Path, bundle_rel: str = "") -> str:
    """prep/bundle.py's Driver command, exactly as `make driver-command` prints it."""
    out, err = io.StringIO(), io.StringIO()
    extra = ["--bundle-dir", bundle_rel] if bundle_rel else []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = bundle.main(["driver-command", storage_root, "--profile", profile,
                              "--launcher", str(launcher), *extra])
    if status:
        said = err.getvalue().strip()
        own = re.match(r"driver-command: \(([A-Z]+-E\d{3})\) (.*)", said.split("\n")[0])
        raise spec_error(own.group(1), own.group(2)) if own else spec_error("SUB-E010", said)
    return out.getvalue().rstrip("\n")


def entrypoint(command: str) -> str:
    """The Driver command as a job entrypoint: Ray runs it with /bin/sh -c, so hand the whole
    script, quoted once, to bash (the command needs bash: pipefail, [[ ]])."""
    return f"bash -c {shlex.quote(command)}"


def bundle_runtime_env(storage_root: str, profile: str, bundle_dir: Path) -> Dict[str, object]:
    """The bundle's RuntimeEnv for the profile (what `make runtime-env` prints)."""
    verifier = bundle_dir / bundle.VERIFIER_NAME
    args = [sys.executable, "-I", "-B", str(verifier), "runtime-env", "--storage-root", storage_root]
    if profile:
        args += ["--profile", profile]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise spec_error("SUB-E010", f"the bundle cannot build the RuntimeEnv for "
                         f"PROFILE={profile!r}: {last}")
    return json.loads(out.stdout)


def job_runtime_env(storage_root: str, profile: str, bundle_dir: Path,
                    variables: Dict[str, str]) -> Dict[str, object]:
    """A RuntimeEnv valid for job submission: no client-side paths, the job's variables as env."""
    env = {k: v for k, v in bundle_runtime_env(storage_root, profile, bundle_dir).items()
           if k not in CLIENT_SIDE}
    env_vars = dict(env.get("env_vars") or {})
    for name, value in variables.items():
        if name in SHELL_VARIABLES or name.startswith("BASH_FUNC_"):
            raise spec_error("SUB-E015", f"job variable {name!r} configures the shell that runs "
                             "the Driver command, before its first line can check anything")
        if not NAME.match(name) or name in COMMAND_VARIABLES or name in env_vars:
            why = ("the Driver command sets it" if name in COMMAND_VARIABLES else
                   "the bundle's RuntimeEnv pins it" if name in env_vars else "not a variable name")
            raise spec_error("SUB-E011", f"job variable {name!r} cannot be set: {why}")
        if not VALUE.match(value):
            raise spec_error("SUB-E011", f"{name}={value!r} holds characters outside "
                             "[A-Za-z0-9._/:,@+=-]")
    env_vars.update({name: value for name, value in variables.items() if value})
    env_vars.setdefault("RAY_JOB_STOP_WAIT_TIME_S", str(STOP_WAIT_S))
    env["env_vars"] = env_vars
    return env


def check_run_id(run_id: str) -> str:
    """RUN_ID as the launcher will accept it (the submission id is the RUN_ID)."""
    if not run_id:
        raise spec_error("SUB-E012", "no RUN_ID given")
    if not runid.is_run_id(run_id):
        raise spec_error("SUB-E012", f"RUN_ID {run_id!r} must be at most 128 of [A-Za-z0-9._-], "
                         "starting with a letter or digit")
    return run_id


def job_spec(storage_root: str, profile: str, bundle_dir: Optional[Path],
             variables: Dict[str, str]) -> Dict[str, object]:
    """Everything a submission needs: submission id, entrypoint, runtime env, metadata."""
    run_id = check_run_id(variables.get("RUN_ID", ""))
    rel = installed_rel(storage_root, bundle_dir)
    versioned = rel.startswith(f"{bundle.BUNDLES_REL}/bundle-")  # else a flat folder: name it
    bundle_dir = bundle_dir or bundle.BUNDLE
    command = driver_command(storage_root, profile, bundle_dir / bundle.LAUNCHER_NAME,
                             "" if versioned else rel)
    runtime_env = job_runtime_env(storage_root, profile, bundle_dir, variables)
    # The submitted bundle's own rollout/ (make runtime-env's text names the unversioned one).
    env_vars = runtime_env["env_vars"]
    unversioned = f"{storage_root.rstrip('/')}/{bundle.BUNDLES_REL}/rollout"
    env_vars["PYTHONPATH"] = ":".join(
        f"{storage_root.rstrip('/')}/{rel}/rollout" if part == unversioned else part
        for part in env_vars["PYTHONPATH"].split(":"))
    return {"submission_id": run_id, "entrypoint": entrypoint(command), "runtime_env": runtime_env,
            "metadata": {"run_id": run_id, "profile": Path(profile).stem if profile else "default",
                         "storage_root": storage_root}}
