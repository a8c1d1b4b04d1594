"""Where a run's files live, and which run a phase is asked about.

A run folder is runs/verl/two-worker-grpo/<RUN_ID>/ under the storage root; the relative layout
is the same on every mount path, so the prep box finds a run the job wrote. run.json in it
records the profile the run used, which postflight and report read back.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Tuple

from .findings import UsageError
from .profile import NAME, Profile, env_lines, parse_profile_text
from .runfolder import refuse_symlinked


MAX_RUN_ID = 128  # the launcher's limit too: a run folder name must fit every file system
# A run folder holds at least one of these; a folder with none is not a run (nothing to judge).
RUN_FILES = ("run.json", "driver.log", "training.log", "inputs.json", "preflight.json")


def run_dir(storage_root: Path, run_id: str) -> Path:
    return Path(storage_root) / "runs" / "verl" / "two-worker-grpo" / run_id


def run_folder(args: argparse.Namespace) -> Tuple[Path, str]:
    """The run folder and RUN_ID: --output-dir, or --storage-root with --run-id."""
    run_id = args.run_id
    if run_id == "":
        raise UsageError(f"no RUN_ID given: make {args.phase} RUN_ID=<run> (make runs lists "
                         "them; or --run-id RUN_ID)")
    if run_id is not None and len(run_id) > MAX_RUN_ID:
        raise UsageError(f"RUN_ID is {len(run_id)} characters long; at most {MAX_RUN_ID} are "
                         "allowed (set a shorter RUN_ID)")
    if run_id is not None and not NAME.match(run_id):
        raise UsageError(f"RUN_ID {run_id!r} must match {NAME.pattern} (set RUN_ID=<run>)")
    if args.output_dir is not None:
        return refuse_symlinked(args.output_dir), run_id or args.output_dir.name
    if args.storage_root is None or not run_id:
        raise UsageError("name the run: --output-dir RUN_FOLDER, or --storage-root ROOT --run-id "
                         f"RUN_ID (make {args.phase} RUN_ID=<run>)")
    return refuse_symlinked(run_dir(args.storage_root, run_id)), run_id


def recorded_profile(record: Path) -> Profile:
    """The profile a run recorded in its run.json (a UsageError says what to do if unreadable)."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        values = data["profile"]["values"]
        text = env_lines(values)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{record}: cannot read the run's profile ({exc}); pass --profile")
    return parse_profile_text(text, f"{record} (profile {data['profile'].get('name')})")
