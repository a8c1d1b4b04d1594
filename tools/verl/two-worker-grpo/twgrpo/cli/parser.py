"""The verifier's command line: every subcommand, its options and their help (--help, make help).
The tutorial's size flags (--target-steps ...) override the profile in preflight and postflight.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..run import findingsout
from ..report.compare_defaults import COMPARE_FOLDER, DEFAULT_TOLERANCE


def parser() -> argparse.ArgumentParser:
    """Every subcommand and its options; the handlers are dispatch.py's."""
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
    _compare(sub)

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


def _compare(sub) -> None:
    p = sub.add_parser("compare", help="compare a run with one or more reference runs: what ran, "
                       "how it went, what it learned (exit 0 the same, 1 something differs)")
    p.add_argument("--storage-root", type=Path, required=True, help="the volume's mount path here")
    p.add_argument("--run-id", help="the run to compare")
    p.add_argument("--against", action="append", help="a reference RUN_ID (repeat, or several "
                   "separated by spaces)")
    p.add_argument("--tolerance", help=f"relative tolerance of a metric's end value (default "
                   f"{DEFAULT_TOLERANCE}; 5%% also works)")
    p.add_argument("--html", help=f"where to write the page (default: runs/verl/{COMPARE_FOLDER}/"
                   "<run>-vs-<reference>.html under the storage root)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="json: one JSON object on stdout for scripts (the page only with --html)")
