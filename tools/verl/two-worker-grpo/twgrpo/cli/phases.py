"""The phases' subcommands: each turns its parsed arguments into values once (runargs.py: the
run folder and the profile; the rest as keyword options) and calls its phase.
"""
from __future__ import annotations

import argparse
import sys

# Each phase's module is imported when that phase runs: postflight starts without the
# preflight, report and launcher modules (a tenth of a second of imports it never uses).
from ..run.profile import load_profile
from ..run.runfolder import RunFolder
from .runargs import judging_profile, run_folder, sized


def inputs(args: argparse.Namespace) -> int:
    from ..checks.inputs import inputs as inputs_phase
    folder = RunFolder(args.output_dir) if args.output_dir is not None else None
    return inputs_phase.run(load_profile(args.profile), args.storage_root, verl_root=args.verl_root,
                            model_root=args.model_root, data_root=args.data_root, folder=folder)


def preflight(args: argparse.Namespace) -> int:
    from ..checks.preflight import preflight as preflight_phase
    folder = run_folder(args)
    return preflight_phase.run(
        folder, sized(load_profile(args.profile), args), args.storage_root,
        verl_root=args.verl_root, model_root=args.model_root, data_root=args.data_root,
        probe_timeout=args.probe_timeout, collective_timeout=args.collective_timeout,
        collective_mode=args.collective)


def postflight(args: argparse.Namespace) -> int:
    from ..checks.postflight import postflight as postflight_phase
    folder = run_folder(args)
    profile, _ = judging_profile(folder, args.profile, "postflight")
    return postflight_phase.run(folder, sized(profile, args), training_log=args.training_log,
                                world_size=args.world_size, audit_only=args.audit,
                                fan_out=args.fan_out)


def report(args: argparse.Namespace) -> int:
    from ..report import summary
    folder = run_folder(args)
    profile, problem = judging_profile(folder, args.profile, "report")
    return summary.run(folder, profile, profile_problem=problem, html=args.html,
                       reference_run=args.reference)


def runs(args: argparse.Namespace) -> int:
    from ..report import runs as runs_listing
    return runs_listing.run(args.storage_root, args.format)


def compare(args: argparse.Namespace) -> int:
    from ..report import compare as compare_runs
    against = [one for given in (args.against or []) for one in given.split()]
    return compare_runs.run(args.storage_root, args.run_id, against, tolerance=args.tolerance,
                            html=args.html, fmt=args.format)


def check_profile(args: argparse.Namespace) -> int:
    from ..checks.rules import recipe
    profile = load_profile(args.profile)
    verl_root = args.verl_root or (profile.verl_root(args.storage_root) if args.storage_root else None)
    return recipe.run(profile, verl_root)


def watch_training(args: argparse.Namespace) -> int:
    from ..checks.watch import stall
    return stall.run(RunFolder(args.run_dir), first_step_seconds=args.first_step_seconds,
                     stall_factor=args.stall_factor, stall_floor=args.stall_floor,
                     kill_grace=args.kill_grace, poll=args.poll, cluster=not args.no_cluster)


def failed_checks(args: argparse.Namespace) -> int:
    from ..run import failedchecks
    print(failedchecks.cause(args.run_dir))
    return 0


def catalog(args: argparse.Namespace) -> int:
    from ..run.catalog import markdown_page, markdown_table
    sys.stdout.write(markdown_page() if args.page else markdown_table())
    return 0
