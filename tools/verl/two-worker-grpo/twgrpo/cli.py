"""Command line of verify-two-worker-grpo-v1.py: it parses, picks the profile and dispatches;
each phase's work lives in its own module (inputs, preflight, postflight, report, launch).

Exit codes: 0 every check passed, 1 a check failed, 2 usage error or missing input.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from .checks.inputs import inputs
from .checks.postflight import postflight
from .checks.preflight import preflight
from .checks.rules import recipe
from .checks.watch import stall
from . import launch
from .report import compare, runs, summary
from .run import failedchecks, findingsout
from .run.catalog import markdown_page, markdown_table
from .run.findings import EXIT_FAILED, EXIT_USAGE, UsageError, say_usage, usage
from .run.profile import Profile, load_profile, with_overrides
from .run.records import RecordError
from .run import runrecord
from .run.runfolder import RUN_FILES, RunFolder
from .run.runpaths import run_folder


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
    p.add_argument("--collective-timeout", type=float, default=60.0,
                   help="seconds the collective probe's ranks have to meet and all-reduce (default 60)")
    p.add_argument("--collective", choices=("nccl", "gloo", "off"), default="nccl",
                   help="the collective probe: NCCL on GPU nodes and Gloo (default), Gloo alone "
                        "(no GPU asked: simulated GPUs), or off")

    p = sub.add_parser("postflight", parents=[common], help="judge a finished run from its files")
    sizes(p)
    p.add_argument("--storage-root", type=Path,
                   help="with --run-id instead of --output-dir: the volume's mount path here")
    p.add_argument("--training-log", type=Path, help="default: <output-dir>/training.log")
    p.add_argument("--world-size", type=int)
    p.add_argument("--audit", action="store_true", help="the same checks, nothing written, no "
                   "marker moved: for a read-only mount or a copy (exit 3: checkpoint not here)")
    p.add_argument("--fan-out", action="store_true", help="check the checkpoint's shards on every "
                   "node of the Ray cluster that is up (the launcher's in-job call; needs ray)")

    p = sub.add_parser("report", parents=[common], help="human summary of a run folder")
    p.add_argument("--output-dir", type=Path, help="the run folder")
    p.add_argument("--storage-root", type=Path, help="with --run-id: the volume's mount path here")
    p.add_argument("--run-id")
    p.add_argument("--html", help="where to write the page (default: report.html in the run folder)")
    p.add_argument("--reference", help="a run beside this one whose scalars the charts draw as a "
                   "second series (default: a resumed run's parent; none: no reference)")

    p = sub.add_parser("runs", help="list every run on the volume with its verdict")
    p.add_argument("--storage-root", type=Path, required=True, help="the volume's mount path here")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="json: one object per run, one per line (for scripts)")
    compare.add_parser(sub)

    for name, text in (("env", "print the driver environment, NUL-separated (launcher)"),
                       ("command", "print the training command, NUL-separated (launcher)")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("--storage-root", type=Path, required=True)
        p.add_argument("--run-id", required=True)

    p = sub.add_parser("failed-checks", help="print FAILED's cause: each failed check of the run "
                       "with its finding ids, on one line (launcher)")
    p.add_argument("--run-dir", type=Path, required=True)

    sub.add_parser("request", help="check the job's variables, profile and volume; print the "
                   "launcher's settings (launcher)")

    p = sub.add_parser("check-profile", parents=[common], help="every rule on the profile that "
                       "needs no cluster (batch sizes, rollout TP and lengths, EXTRA_OVERRIDES, pins)")
    p.add_argument("--storage-root", type=Path, help="the volume here: EXTRA_OVERRIDES are checked "
                   "against the profile's verl checkout on it")
    p.add_argument("--verl-root", type=Path, help="a verl checkout (default: from the profile)")

    p = sub.add_parser("runtime-env", parents=[common], help="print the RuntimeEnv JSON to paste")
    p.add_argument("--storage-root", type=Path, required=True)
    p.add_argument("--bundle-version", help="the installed version folder (bundle-<12 hex>) whose "
                   "rollout/ goes on PYTHONPATH for ROLLOUT_ENGINE=hf (default: a flat install)")

    p = sub.add_parser("record-run", parents=[common], help="write run.json (launcher)")
    p.add_argument("--storage-root", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--bundle-sums-sha256", required=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--launcher", help="the launcher's path: its sha256 is recorded")
    which.add_argument("--launcher-sha256")
    p.add_argument("--save-freq", type=int, help="checkpoint every N steps (default: the profile's)")

    p = sub.add_parser("resume", parents=[common], help="check the run to resume from and record "
                       "the lineage in run.json (launcher, RESUME_FROM)")
    p.add_argument("--storage-root", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--resume-from", required=True, help="the earlier, preempted run's RUN_ID")

    p = sub.add_parser("heartbeat", parents=[common], help="keep heartbeat.json fresh while the "
                       "launcher lives (launcher)")
    p.add_argument("--storage-root", type=Path, required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--launcher-pid", type=int, default=0)
    p.add_argument("--interval", type=int, required=True, help="seconds between beats")
    p.add_argument("--lease", type=int, required=True, help="seconds without a beat: lost")

    p = sub.add_parser("watch-training", help="stop the training phase when no step line comes "
                       "in time; write stall.json (launcher, inside the training phase)")
    p.add_argument("--run-dir", type=Path, required=True, help="the run folder with training.log")
    p.add_argument("--first-step-seconds", type=float, default=3600.0,
                   help="seconds until the first step line (model load, first rollout)")
    p.add_argument("--stall-factor", type=float, default=5.0,
                   help="later: this many times the slowest step so far")
    p.add_argument("--stall-floor", type=float, default=900.0, help="but never fewer seconds")
    p.add_argument("--kill-grace", type=float, default=10.0,
                   help="seconds between TERM and KILL when stopping a stalled phase")
    p.add_argument("--no-cluster", action="store_true",
                   help="gather evidence on this host only (no Ray cluster to ask)")
    p.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)

    p = sub.add_parser("catalog", help="print every finding id with its fix (markdown table)")
    p.add_argument("--page", action="store_true", help="the whole docs/findings.md page")
    for phase in findingsout.PHASES:  # the phases that print findings: --format text|json
        findingsout.add_format(sub.choices[phase])
    return parser


def profile_for(args: argparse.Namespace) -> Profile:
    """The profile, from the run's own record when there is one, then the command line."""
    name = getattr(args, "profile", None)
    profile = None
    if not name and args.phase in ("postflight", "report"):
        folder = RunFolder(run_folder(args)[0])
        record = folder.run_json
        if record.is_file():
            profile = runrecord.profile(folder)
        elif args.phase == "postflight" and folder.path.is_dir():
            if not any((folder.path / file).exists() for file in RUN_FILES):
                raise UsageError(f"{folder} holds none of {', '.join(RUN_FILES)}: it is not a run "
                                 "folder (check RUN_ID= and PREP_ROOT=; make runs lists runs)")
            print(f"postflight: {record} is missing; judging with the default profile "
                  f"{load_profile(None).PROFILE_NAME} (set PROFILE=<name> if the run used another)",
                  file=sys.stderr, flush=True)
    profile = profile or load_profile(name)
    if args.phase in ("preflight", "postflight"):  # the tutorial's size flags
        profile = with_overrides(profile, TARGET_STEPS=args.target_steps,
                                 TRAIN_BATCH_SIZE=args.train_batch_size, ROLLOUT_N=args.rollout_n,
                                 NODES=args.expected_nodes, GPUS_PER_NODE=args.expected_gpus_per_node)
    return profile


def print_catalog(args: argparse.Namespace, profile: Optional[Profile]) -> int:
    sys.stdout.write(markdown_page() if args.page else markdown_table())
    return 0


def print_failed_checks(args: argparse.Namespace, profile: Optional[Profile]) -> int:
    print(failedchecks.cause(args.run_dir))
    return 0


def list_runs(args: argparse.Namespace, profile: Optional[Profile]) -> int:
    return runs.main(args)


HANDLERS = {"inputs": inputs.main, "preflight": preflight.main, "postflight": postflight.main,
            "report": summary.main, "runs": list_runs, "env": launch.env,
            "command": launch.training_command, "runtime-env": launch.runtime_env,
            "record-run": launch.record_run, "catalog": print_catalog,
            "resume": launch.resume, "request": launch.check_request,
            "heartbeat": launch.heartbeat, "check-profile": recipe.main,
            "watch-training": stall.main, "compare": lambda args, _: compare.main(args),
            "failed-checks": print_failed_checks}
NO_PROFILE = ("catalog", "runs", "request", "heartbeat", "watch-training", "compare", "failed-checks")  # judge no single run


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    try:
        args = findingsout.parse(parser, argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    # --format json: the findings and the verdict as JSON lines on stdout, the rest on stderr
    return findingsout.printed_as(args, lambda: judge(args))


def judge(args: argparse.Namespace) -> int:
    """The phase's exit code; a refusal is printed here as its one line and HINT."""
    try:
        profile = None if args.phase in NO_PROFILE else profile_for(args)
        return HANDLERS[args.phase](args, profile)
    except UsageError as exc:
        say_usage("verify-two-worker-grpo-v1", exc)
        return EXIT_USAGE
    except BrokenPipeError:  # `make report | head` closed the pipe: the reader has what it wants
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except RecordError as exc:  # a full or read-only disk: one line that names the cause
        say_usage("verify-two-worker-grpo-v1", exc)
        return EXIT_FAILED
    except OSError as exc:  # anything else the disk refuses: one line and its hint, no traceback
        say_usage("verify-two-worker-grpo-v1", usage("GEN-E003", None, f"{exc.filename or args.phase}: "
                                                     f"{exc.strerror or exc}"))
        return EXIT_FAILED
