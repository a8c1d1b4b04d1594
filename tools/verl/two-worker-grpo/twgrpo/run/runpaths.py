"""Which run a phase is asked about: the command line's run folder (run/runfolder.py).

A phase names its run by --output-dir RUN_FOLDER, or by --storage-root ROOT with --run-id
RUN_ID (the RUN_ID rule: run/runid.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Tuple

from . import runid
from .findings import UsageError
from .runfolder import refuse_symlinked, run_dir


def run_folder(args: argparse.Namespace) -> Tuple[Path, str]:
    """The run folder and RUN_ID: --output-dir, or --storage-root with --run-id."""
    run_id = args.run_id
    if run_id == "":
        raise UsageError(f"no RUN_ID given: make {args.phase} RUN_ID=<run> (make runs lists "
                         "them; or --run-id RUN_ID)")
    if run_id is not None and len(run_id) > runid.MOST:
        raise UsageError(f"RUN_ID is {len(run_id)} characters long; at most {runid.MOST} are "
                         "allowed (set a shorter RUN_ID)")
    if run_id is not None and not runid.FORM.match(run_id):
        raise UsageError(f"RUN_ID {run_id!r} must match {runid.FORM.pattern} (set RUN_ID=<run>)")
    if args.output_dir is not None:
        return refuse_symlinked(args.output_dir), run_id or args.output_dir.name
    if args.storage_root is None or not run_id:
        raise UsageError("name the run: --output-dir RUN_FOLDER, or --storage-root ROOT --run-id "
                         f"RUN_ID (make {args.phase} RUN_ID=<run>)")
    return refuse_symlinked(run_dir(args.storage_root, run_id)), run_id
