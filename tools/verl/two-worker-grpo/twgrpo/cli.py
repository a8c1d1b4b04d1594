"""Command line of verify-two-worker-grpo-v1.py: one subcommand per phase, plus launcher helpers.

Exit codes: 0 every check passed, 1 a check failed, 2 usage error or missing input.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import List, Optional

from . import command, inputs
from .catalog import CATALOG
from .findings import (EXIT_FAILED, EXIT_USAGE, UsageError, phase_record, print_findings, run_checks,
                       utc_now, verdict)
from .profile import NAME as RUN_ID
from .profile import Profile, load_profile, with_overrides
from .records import RecordError, write_json
from .runfolder import record_phase, refuse_symlinked

MAX_RUN_ID = 128  # the launcher's limit too: a run folder name must fit every file system


# A run folder holds at least one of these; a folder with none is not a run (nothing to judge).
RUN_FILES = ("run.json", "driver.log", "training.log", "inputs.json", "preflight.json")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verify-two-worker-grpo-v1.py",
        description="Check the inputs, cluster and results of a verl GRPO run "
                    "(exit 0 passed, 1 a check failed, 2 usage or missing input).")
    sub = parser.add_subparsers(dest="phase", required=True, metavar="PHASE")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", help="profile name in profiles/ or a path to a .env file "
                        "(default: the tutorial's 2x2 A100 profile)")

    def roots(p: argparse.ArgumentParser, required: bool) -> None:
        p.add_argument("--storage-root", type=Path, required=required,
                       help="the shared volume's mount path on this machine")
        p.add_argument("--verl-root", type=Path, help="verl checkout (default: from the profile)")
        p.add_argument("--model-root", type=Path, help="model folder (default: from the profile)")
        p.add_argument("--data-root", type=Path, help="parquet folder (default: from the profile)")

    def sizes(p: argparse.ArgumentParser) -> None:  # the tutorial's flags override the profile
        p.add_argument("--run-id")
        p.add_argument("--output-dir", type=Path, help="the run folder")
        p.add_argument("--target-steps", type=int)
        p.add_argument("--train-batch-size", type=int)
        p.add_argument("--rollout-n", type=int)
        p.add_argument("--expected-nodes", type=int)
        p.add_argument("--expected-gpus-per-node", type=int)

    p = sub.add_parser("inputs", parents=[common], help="verify verl, model and data on the volume")
    roots(p, required=True)
    p.add_argument("--output-dir", type=Path, help="also write inputs.json into this run folder")

    p = sub.add_parser("preflight", parents=[common], help="probe every Ray node (needs ray)")
    roots(p, required=True)
    sizes(p)
    p.add_argument("--probe-timeout", type=float, default=120.0,
                   help="seconds to wait for all node probes (default 120)")

    p = sub.add_parser("postflight", parents=[common], help="judge a finished run from its files")
    sizes(p)
    p.add_argument("--storage-root", type=Path,
                   help="with --run-id instead of --output-dir: the volume's mount path here")
    p.add_argument("--training-log", type=Path, help="default: <output-dir>/training.log")
    p.add_argument("--world-size", type=int)

    p = sub.add_parser("report", parents=[common], help="human summary of a run folder")
    p.add_argument("--output-dir", type=Path, help="the run folder")
    p.add_argument("--storage-root", type=Path, help="with --run-id: the volume's mount path here")
    p.add_argument("--run-id")
    p.add_argument("--html", help="where to write the page (default: report.html in the run folder)")

    p = sub.add_parser("runs", help="list every run on the volume with its verdict")
    p.add_argument("--storage-root", type=Path, required=True, help="the volume's mount path here")

    for name, text in (("paths", "print the run's paths as KEY=value lines (launcher)"),
                       ("env", "print the driver environment, NUL-separated (launcher)"),
                       ("command", "print the training command, NUL-separated (launcher)")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("--storage-root", type=Path, required=True)
        p.add_argument("--run-id", required=True)

    p = sub.add_parser("runtime-env", parents=[common], help="print the RuntimeEnv JSON to paste")
    p.add_argument("--storage-root", type=Path, required=True)

    p = sub.add_parser("record-run", parents=[common], help="write run.json (launcher)")
    p.add_argument("--storage-root", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--bundle-sums-sha256", required=True)
    p.add_argument("--launcher-sha256", required=True)

    sub.add_parser("catalog", help="print every finding id with its fix (markdown table)")
    return parser


def run_folder(args: argparse.Namespace):
    """The run folder and RUN_ID: --output-dir, or --storage-root with --run-id."""
    run_id = args.run_id
    if run_id == "":
        raise UsageError(f"no RUN_ID given: make {args.phase} RUN_ID=<run> (make runs lists "
                         "them; or --run-id RUN_ID)")
    if run_id is not None and len(run_id) > MAX_RUN_ID:
        raise UsageError(f"RUN_ID is {len(run_id)} characters long; at most {MAX_RUN_ID} are "
                         "allowed (set a shorter RUN_ID)")
    if run_id is not None and not RUN_ID.match(run_id):
        raise UsageError(f"RUN_ID {run_id!r} must match {RUN_ID.pattern} (set RUN_ID=<run>)")
    if args.output_dir is not None:
        return refuse_symlinked(args.output_dir), run_id or args.output_dir.name
    if args.storage_root is None or not run_id:
        raise UsageError("name the run: --output-dir RUN_FOLDER, or --storage-root ROOT --run-id "
                         f"RUN_ID (make {args.phase} RUN_ID=<run>)")
    return refuse_symlinked(command.run_dir(args.storage_root, run_id)), run_id


def profile_for(args: argparse.Namespace) -> Profile:
    """The profile, from the run's own record when there is one, then the command line."""
    name = getattr(args, "profile", None)
    if not name and args.phase in ("postflight", "report"):
        folder = run_folder(args)[0]
        record = folder / "run.json"
        if record.is_file():
            return _profile_from_record(record)
        if args.phase == "postflight" and folder.is_dir():
            if not any((folder / name).exists() for name in RUN_FILES):
                raise UsageError(f"{folder} holds none of {', '.join(RUN_FILES)}: it is not a run "
                                 "folder (check RUN_ID= and PREP_ROOT=; make runs lists runs)")
            print(f"postflight: {record} is missing; judging with the default profile "
                  f"{load_profile(None).PROFILE_NAME} (set PROFILE=<name> if the run used another)",
                  file=sys.stderr, flush=True)
    return load_profile(name)


def _profile_from_record(record: Path) -> Profile:
    from .profile import parse_profile_text
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        values = data["profile"]["values"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{record}: cannot read the run's profile ({exc}); pass --profile")
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    return parse_profile_text(text, f"{record} (profile {data['profile'].get('name')})")


def apply_size_flags(profile: Profile, args: argparse.Namespace) -> Profile:
    return with_overrides(profile, TARGET_STEPS=args.target_steps,
                          TRAIN_BATCH_SIZE=args.train_batch_size, ROLLOUT_N=args.rollout_n,
                          NODES=args.expected_nodes, GPUS_PER_NODE=args.expected_gpus_per_node)


def cmd_inputs(args: argparse.Namespace, profile: Profile) -> int:
    if not args.storage_root.is_dir():
        raise UsageError(f"storage root {args.storage_root} is not a directory: mount the shared "
                         "volume and set PREP_ROOT= to its path on this box (--storage-root)")
    ctx = inputs.InputsContext.build(profile, args.storage_root, args.verl_root, args.model_root,
                                     args.data_root)
    print(f"inputs: profile {profile.PROFILE_NAME}, storage {ctx.storage_root}", flush=True)
    results = run_checks("inputs", inputs.CHECKS, ctx)
    print_findings(results)
    code = verdict("inputs", results)
    if args.output_dir:
        record_phase(refuse_symlinked(args.output_dir), "inputs.json",
                     phase_record("inputs", results, profile=profile.PROFILE_NAME,
                                  storage_root=str(ctx.storage_root), evidence=ctx.evidence))
    return code


def _write_nul(items: List[str]) -> int:
    for item in items:
        if "\0" in item:
            raise UsageError(f"a value holds a NUL byte: {item!r}")
    sys.stdout.write("".join(f"{item}\0" for item in items))
    return 0


def cmd_paths(args: argparse.Namespace, profile: Profile) -> int:
    root = args.storage_root
    for key, value in (("PROFILE_NAME", profile.PROFILE_NAME), ("PROFILE_FILE", profile.path),
                       ("RUN_DIR", command.run_dir(root, args.run_id)),
                       ("VERL_ROOT", profile.verl_root(root)), ("MODEL_ROOT", profile.model_root(root)),
                       ("DATA_ROOT", profile.data_root(root)), ("WORLD_SIZE", profile.world_size)):
        if "\n" in str(value):
            raise UsageError(f"{key} holds a newline: {value!r}")
        print(f"{key}={value}")
    return 0


def cmd_env(args: argparse.Namespace, profile: Profile) -> int:
    env = command.driver_environment(profile, args.storage_root,
                                     command.run_dir(args.storage_root, args.run_id),
                                     os.environ.get("PYTHONPATH", ""))
    return _write_nul([f"{k}={v}" for k, v in sorted(env.items())])


def cmd_command(args: argparse.Namespace, profile: Profile) -> int:
    return _write_nul(command.training_command(profile, args.storage_root, args.run_id))


def cmd_runtime_env(args: argparse.Namespace, profile: Profile) -> int:
    print(json.dumps(command.runtime_env(profile, args.storage_root), indent=2))
    return 0


def cmd_record_run(args: argparse.Namespace, profile: Profile) -> int:
    import platform
    import socket
    run = refuse_symlinked(command.run_dir(args.storage_root, args.run_id))
    write_json(run / "run.json", {
        "run_id": args.run_id, "started_at": utc_now(), "storage_root": str(args.storage_root),
        "profile": profile.to_json(), "bundle_sums_sha256": args.bundle_sums_sha256,
        "launcher_sha256": args.launcher_sha256, "driver_host": socket.gethostname(),
        "python": platform.python_version(),
        "training_command": command.training_command(profile, args.storage_root, args.run_id)})
    return 0


def cmd_catalog(args: argparse.Namespace, profile: Optional[Profile]) -> int:
    print("| id | what it means | what to do |")
    print("| --- | --- | --- |")
    for fid, (title, hint) in CATALOG.items():
        print(f"| `{fid}` | {title} | {hint} |")
    return 0


def cmd_preflight(args: argparse.Namespace, profile: Profile) -> int:
    from . import preflight
    return preflight.main(args, apply_size_flags(profile, args))


def cmd_postflight(args: argparse.Namespace, profile: Profile) -> int:
    from . import postflight
    return postflight.main(args, apply_size_flags(profile, args))


def cmd_runs(args: argparse.Namespace, profile: Optional[Profile]) -> int:
    from . import runs
    return runs.main(args)


def cmd_report(args: argparse.Namespace, profile: Profile) -> int:
    from . import report
    return report.main(args, profile, *run_folder(args))


HANDLERS = {"inputs": cmd_inputs, "preflight": cmd_preflight, "postflight": cmd_postflight,
            "report": cmd_report, "paths": cmd_paths, "env": cmd_env, "command": cmd_command,
            "runtime-env": cmd_runtime_env, "record-run": cmd_record_run, "catalog": cmd_catalog,
            "runs": cmd_runs}


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        profile = None if args.phase in ("catalog", "runs") else profile_for(args)
        return HANDLERS[args.phase](args, profile)
    except UsageError as exc:
        print(f"verify-two-worker-grpo-v1: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `make report | head` closed the pipe: the reader has what it wants
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except RecordError as exc:  # a full or read-only disk: one line that names the cause
        print(f"verify-two-worker-grpo-v1: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:  # anything else the disk refuses: still one line, never a traceback
        print(f"verify-two-worker-grpo-v1: (GEN-E003) {exc.filename or args.phase}: "
              f"{exc.strerror or exc} — check the volume (space, permissions, mount)",
              file=sys.stderr)
        return EXIT_FAILED
