"""Where a run's files live, and which run a phase is asked about.

A run folder is runs/verl/two-worker-grpo/<RUN_ID>/ under the storage root; the relative layout
is the same on every mount path, so the prep box finds a run the job wrote. run.json in it
records the profile the run used, which postflight and report read back.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import List, Tuple

from ..formats import bounded
from . import typed

from .findings import UsageError
from .profile import ADDED_LATER, NAME, SHA256, Profile, env_lines, parse_profile_text
from .runfolder import refuse_symlinked


MAX_RUN_JSON = 1 << 20  # run.json is a few KiB (a resumed 64-node run's lineage some 200 KiB)
PROFILE = {"name": str, "sha256": str, "values": typed.Need(typed.Map(str))}
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
    wrong: List[str] = []
    try:  # bounded: a 1 GiB or FIFO run.json is refused, never read whole or waited on
        data = typed.read_record(record, {"profile": typed.Need(PROFILE)}, wrong, MAX_RUN_JSON)
    except bounded.Unreadable as exc:
        raise UsageError(f"{record}: cannot read the run's profile ({exc}); pass --profile")
    if "profile" not in data:
        raise UsageError(f"{record}: cannot read the run's profile ("
                         f"{wrong[0] if wrong else 'no profile values'}); pass --profile")
    name = data["profile"].get("name", "?")
    values = data["profile"]["values"]  # a run recorded before a key existed did not pin it
    try:
        text = env_lines({**{key: "" for key in ADDED_LATER}, **values})
    except ValueError as exc:
        raise UsageError(f"{record}: cannot read the run's profile ({exc}); pass --profile")
    profile = parse_profile_text(text, f"{record} (profile {name[:80]})")
    digest = data["profile"].get("sha256", "")  # of the file the run read (older runs: none)
    return dataclasses.replace(profile, sha256=digest) if SHA256.match(digest) else profile
