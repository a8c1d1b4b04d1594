#!/usr/bin/env python3
"""Summary: Print a Slurm batch script that runs one RUN_ID of a profile on a Slurm allocation.

Usage: prep/sbatch.py --run-id ID [--profile NAME] [--storage-root DIR] [--bundle DIR]
                      [--partition P] [--account A] [--time T] [--gpus N] [--container KIND]
                      [--image IMAGE] [--join-timeout S] [--ray-port P] [--var KEY=VALUE]...

The script asks for the profile's NODES nodes, one task each (and GPUS_PER_NODE GPUs per node
unless --gpus 0), starts a Ray head on the allocation's first node and a Ray node on each other
one (srun, one per node, with the GPUs Slurm gave), waits until every node has joined (naming
those that did not, SLURM-E001), runs the same Driver command as `make submit` with the same
environment as its RuntimeEnv, stops Ray and exits with the run's verdict (the launcher's exit
status, 0 for SUCCESS). Containers: --container pyxis (srun --container-image, the volume
mounted at STORAGE_ROOT) or apptainer (apptainer exec --nv --bind STORAGE_ROOT IMAGE).
Exit codes: 0 printed; 2 usage error.
"""
from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from prep import jobspec, site  # noqa: E402
from prep.jobs_api import JobsError  # noqa: E402
from prep.submit import job_variables  # noqa: E402
from twgrpo.run.findings import UsageError, say_usage, usage  # noqa: E402
from twgrpo.run.profile import DEFAULT_PROFILE  # noqa: E402

BODY = HERE / "slurm-job.bash"
CONTAINERS = ("", "none", "pyxis", "apptainer")
WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._,-]*\Z")  # partition, account
TIME = re.compile(r"^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}\Z")  # Slurm's time forms: M, H:M:S, D-H...
IMAGE = re.compile(r"^[A-Za-z0-9/][A-Za-z0-9._/:@#+-]*\Z")


def sbatch_lines(args, nodes: int, gpus: int) -> list:
    lines = [f"--job-name=twgrpo-{args.run_id}"[:64], f"--nodes={nodes}", "--ntasks-per-node=1",
             "--exclusive", f"--output=twgrpo-{args.run_id}-%j.out"]
    if gpus:
        lines.append(f"--gpus-per-node={gpus}")
    for flag, value, form, what in (("--partition", args.partition, WORD, "a partition name"),
                                    ("--account", args.account, WORD, "an account name"),
                                    ("--time", args.time, TIME, "a time limit, e.g. 2-00:00:00")):
        if value and not form.match(value):
            raise usage("SLURM-E004", None, f"SLURM_{flag[2:].upper()}={value!r} is not {what}")
        if value:
            lines.append(f"{flag}={value}")
    return [f"#SBATCH {line}" for line in lines]


def container(kind: str, image: str, storage_root: str):
    """(srun options, command prefix) for the container runtime, as bash array text."""
    if kind not in CONTAINERS:
        raise usage("SLURM-E004", None, f"SLURM_CONTAINER={kind!r} is not one of pyxis, apptainer or none")
    if kind in ("", "none"):
        return "()", "()"
    if not IMAGE.match(image):
        raise usage("SLURM-E004", None, f"SLURM_IMAGE={image!r} is not an image (pyxis: a registry "
                    "reference or .sqsh file; Apptainer: a .sif file)")
    mount = f"{storage_root}:{storage_root}"
    if kind == "pyxis":
        return (f"(--container-image={shlex.quote(image)} --container-mounts={shlex.quote(mount)})",
                "()")
    return "()", f"(apptainer exec --nv --bind {shlex.quote(mount)} {shlex.quote(image)})"


def script(args, spec: dict, profile, gpus: int) -> str:
    command = shlex.split(spec["entrypoint"])[2]  # `bash -c <the Driver command>`
    srun_opts, exec_prefix = container(args.container, args.image, args.storage_root)
    env = spec["runtime_env"].get("env_vars", {})
    exports = [f"export {name}={shlex.quote(str(value))}" for name, value in env.items()]
    head = ["#!/bin/bash",
            f"# Run {args.run_id} of profile {profile.PROFILE_NAME} on Slurm: {profile.NODES} node(s) x "
            f"{profile.GPUS_PER_NODE} GPU(s). Printed by `make sbatch`; submit with: sbatch <this file>",
            *sbatch_lines(args, profile.NODES, gpus),
            "",
            "# The run's settings, and the RuntimeEnv's variables (what make submit sends).",
            f"NODES={profile.NODES} GPUS_PER_NODE={profile.GPUS_PER_NODE} "
            f"JOIN_TIMEOUT={args.join_timeout} RAY_PORT={args.ray_port}",
            f"CONTAINER_SRUN={srun_opts}",
            f"CONTAINER_EXEC={exec_prefix}",
            *exports,
            "# shellcheck disable=SC2016  # the Driver command expands on the node, not here",
            f"DRIVER_COMMAND={shlex.quote(command)}",
            ""]
    return "\n".join(head) + "\n" + BODY.read_text(encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prep/sbatch.py", description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--storage-root", default=jobspec.bundle.DEFAULT_JOB_ROOT)
    parser.add_argument("--bundle", default="", help="the bundle folder (default: this checkout's)")
    parser.add_argument("--partition", default="")
    parser.add_argument("--account", default="")
    parser.add_argument("--time", default="")
    parser.add_argument("--gpus", default="", help="GPUs per node to ask Slurm for (empty: the "
                        "profile's GPUS_PER_NODE; 0: ask for none, use what the nodes have)")
    parser.add_argument("--container", default="")
    parser.add_argument("--image", default="")
    parser.add_argument("--join-timeout", default="300")
    parser.add_argument("--ray-port", default="6379", help="the Ray head's port on the first node")
    parser.add_argument("--var", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        bundle_dir = Path(args.bundle) if args.bundle else jobspec.bundle.BUNDLE
        variables = job_variables(args.var)
        variables["RUN_ID"] = args.run_id
        spec = jobspec.job_spec(args.storage_root, args.profile, bundle_dir, variables)
        profile = site.profile_of(bundle_dir, args.profile, DEFAULT_PROFILE)
        if args.gpus not in ("", "0", str(profile.GPUS_PER_NODE)):
            raise usage("SLURM-E004", None, f"SLURM_GPUS={args.gpus!r}: ask for the profile's "
                        f"{profile.GPUS_PER_NODE} GPUs per node (empty) or none (0)")
        if not args.join_timeout.isdigit() or not 1 <= int(args.join_timeout) <= 86400:
            raise usage("SLURM-E004", None, f"SLURM_JOIN_TIMEOUT={args.join_timeout!r} is not 1..86400 seconds")
        if not args.ray_port.isdigit() or not 1024 <= int(args.ray_port) <= 65535:
            raise usage("SLURM-E004", None, f"SLURM_RAY_PORT={args.ray_port!r} is not a port from 1024 to 65535")
        gpus = profile.GPUS_PER_NODE if args.gpus == "" else int(args.gpus)
        text = script(args, spec, profile, gpus)
    except (JobsError, jobspec.SpecError, UsageError) as exc:
        say_usage("sbatch", exc)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
