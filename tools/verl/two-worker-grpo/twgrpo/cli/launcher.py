"""What the launcher asks the verifier for: the run's paths, its environment, the training
command (NUL-separated, so no value is ever re-split by the shell), the RuntimeEnv, run.json,
the resume phase and the heartbeat. Each turns its arguments into values once: the run folder
by RunFolder.at (the RUN_ID rule), the profile by its name or from the run's own record.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import sys
from pathlib import Path
from typing import List

from ..checks.rules import request
from ..formats import bounded
from ..formats.hashing import sha256_file
from ..run import command, jobidentity, processes, runrecord
from ..run.findings import UsageError, usage, utc_now
from ..run.profile import BUNDLE_DIR, load_profile, with_overrides
from ..run.runfolder import RunFolder


def _write_nul(items: List[str]) -> int:
    for item in items:
        if "\0" in item:
            raise UsageError(f"a value holds a NUL byte: {item!r}")
    sys.stdout.write("".join(f"{item}\0" for item in items))
    return 0


def env(args: argparse.Namespace) -> int:
    values = command.driver_environment(load_profile(args.profile), args.storage_root,
                                        RunFolder.at(args.storage_root, args.run_id).path,
                                        os.environ.get("PYTHONPATH", ""))
    return _write_nul([f"{k}={v}" for k, v in sorted(values.items())])


def training_command(args: argparse.Namespace) -> int:
    """From the run's own record when there is one: its SAVE_FREQ and its resume lineage."""
    from ..checks.resume.resumed import recorded_step
    folder = RunFolder.at(args.storage_root, args.run_id)
    profile, resume_step = load_profile(args.profile), None
    if runrecord.exists(folder):
        profile = runrecord.profile(folder)
        try:
            lineage = runrecord.read(folder).get("resume")
            resume_step = None if lineage is None else recorded_step(lineage)
        except (bounded.Unreadable, ValueError) as exc:
            raise UsageError(f"{folder.run_json}: cannot read the run's resume record ({exc})")
    return _write_nul(command.training_command(profile, args.storage_root, args.run_id, resume_step))


def resume(args: argparse.Namespace) -> int:
    """The resume phase (RESUME_FROM), with the profile this run recorded (its SAVE_FREQ)."""
    from ..checks.resume import resume as phase
    named, folder = load_profile(args.profile), RunFolder.at(args.storage_root, args.run_id)
    profile = runrecord.profile(folder) if runrecord.exists(folder) else named
    return phase.run(folder, profile, args.storage_root, args.resume_from)


def runtime_env(args: argparse.Namespace) -> int:
    version = args.bundle_version or ""
    if version and not re.fullmatch(r"bundle-[0-9a-f]{12}", version):
        raise UsageError(f"--bundle-version {version!r} is not bundle-<12 hex digits>")
    print(json.dumps(command.runtime_env(load_profile(args.profile), args.storage_root, version),
                     indent=2))
    return 0


def record_run(args: argparse.Namespace) -> int:
    profile = with_overrides(load_profile(args.profile), SAVE_FREQ=args.save_freq)
    launcher_sha256 = sha256_file(Path(args.launcher)) if args.launcher else args.launcher_sha256
    runrecord.write(RunFolder.at(args.storage_root, args.run_id), {
        "run_id": args.run_id, "started_at": utc_now(), "storage_root": str(args.storage_root),
        "profile": profile.to_json(), "bundle_sums_sha256": args.bundle_sums_sha256,
        "launcher_sha256": launcher_sha256, "bundle_version": bundle_version(launcher_sha256),
        "bundle_dir": str(BUNDLE_DIR), "driver_host": socket.gethostname(),
        "driver_pid": os.getppid(),  # the launcher: a resume checks that it is gone
        **processes.identity(os.getppid()),  # so a reused pid is never taken for it
        "python": platform.python_version(),
        # the image reference the job was started with, as its manifest named it (make rayjob)
        **({"image": os.environ["TWGRPO_IMAGE"][:512]} if os.environ.get("TWGRPO_IMAGE") else {}),
        "job_environment": request.job_environment(os.environ, sys.executable),
        # the platform's name for this job: a retry continues only attempts that carry it
        "job_identity": jobidentity.of(os.environ),
        "training_command": command.training_command(profile, args.storage_root, args.run_id)})
    return 0


def bundle_version(launcher_sha256: str) -> str:
    """The bundle's version: its folder's name on the volume (install), from the launcher's hash,
    which pins every other file of the bundle."""
    return f"bundle-{launcher_sha256[:12]}"


def check_request(args: argparse.Namespace) -> int:
    """Every job variable, the profile and the volume, before the launcher writes anything."""
    return request.main(os.environ)


def heartbeat(args: argparse.Namespace) -> int:
    """The launcher's heartbeat process (run/heartbeat.py): beats until the launcher ends."""
    from ..run import heartbeat as beat
    problem = beat.check_timing(args.interval, args.lease)
    if problem:
        raise usage("LAUNCH-E090", None, f"HEARTBEAT_INTERVAL={args.interval}, "
                    f"HEARTBEAT_LEASE={args.lease}: {problem}")
    return beat.beat(RunFolder.at(args.storage_root, args.run_id).path, args.run_id, args.launcher_pid,
                     args.interval, args.lease)
