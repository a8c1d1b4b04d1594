"""verify-two-worker-grpo-v1.py's entry point: parse, pick the subcommand's handler (phases.py,
launcher.py), and turn what goes wrong into one line and an exit code.

Exit codes: 0 every check passed, 1 a check failed, 2 usage error or missing input.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Dict, List, Optional, Tuple

from .parser import parser
from ..run import findingsout, gcpace
from ..run.findings import EXIT_FAILED, EXIT_USAGE, UsageError, say_usage, usage
from ..run.records import RecordError

# name -> (module of cli/, function): a module is imported only when its subcommand runs
HANDLERS: Dict[str, Tuple[str, str]] = {
    "inputs": ("phases", "inputs"), "preflight": ("phases", "preflight"),
    "postflight": ("phases", "postflight"), "report": ("phases", "report"),
    "runs": ("phases", "runs"), "compare": ("phases", "compare"),
    "check-profile": ("phases", "check_profile"), "watch-training": ("phases", "watch_training"),
    "failed-checks": ("phases", "failed_checks"), "catalog": ("phases", "catalog"),
    "env": ("launcher", "env"),
    "command": ("launcher", "training_command"), "runtime-env": ("launcher", "runtime_env"),
    "record-run": ("launcher", "record_run"), "resume": ("launcher", "resume"),
    "request": ("launcher", "check_request"), "heartbeat": ("launcher", "heartbeat")}


def main(argv: Optional[List[str]] = None) -> int:
    try:
        args = findingsout.parse(parser(), argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    # --format json: the findings and the verdict as JSON lines on stdout, the rest on stderr
    return findingsout.printed_as(args, lambda: judge(args))


def judge(args: argparse.Namespace) -> int:
    """The phase's exit code; a refusal is printed here as its one line and HINT."""
    try:
        module, function = HANDLERS[args.phase]
        with gcpace.paced():  # a large run's views hold millions of objects (gcpace.py)
            return getattr(importlib.import_module(f".{module}", __package__), function)(args)
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
