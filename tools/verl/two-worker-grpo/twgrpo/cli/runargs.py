"""Which run and which profile the command line names, turned into values once: a RunFolder
(run/runfolder.py: RunFolder.at applies the RUN_ID rule) and a Profile. The phases below take
those values and never see the command line.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Tuple

from ..run import runrecord
from ..run.findings import UsageError
from ..run.profile import Profile, load_profile, with_overrides
from ..run.runfolder import RUN_FILES, RunFolder, checked_run_id, refuse_symlinked


def run_folder(args: argparse.Namespace) -> RunFolder:
    """The run: --output-dir FOLDER, or --storage-root ROOT with --run-id RUN_ID; never a
    symlinked folder (it could point at another run)."""
    run_id = args.run_id
    if run_id == "":
        raise UsageError(f"no RUN_ID given: make {args.phase} RUN_ID=<run> (make runs lists "
                         "them; or --run-id RUN_ID)")
    if args.output_dir is not None:
        output_dir = logical_absolute(args.output_dir)  # `.` and `..` name their run too
        if run_id is not None and checked_run_id(run_id) != output_dir.name:
            raise UsageError(f"--run-id {run_id} and --output-dir {args.output_dir} name two runs: "
                             "pass the run folder alone, or --storage-root with --run-id")
        return RunFolder(refuse_symlinked(output_dir))
    if args.storage_root is None or run_id is None:
        raise UsageError("name the run: --output-dir RUN_FOLDER, or --storage-root ROOT --run-id "
                         f"RUN_ID (make {args.phase} RUN_ID=<run>)")
    return RunFolder(refuse_symlinked(RunFolder.at(args.storage_root, run_id).path))


def logical_absolute(path: Path) -> Path:
    """path made absolute as the shell sees it: from $PWD when that is this process's folder
    (os.getcwd() has no symlinks), so that `.` inside a symlinked run folder still ends in the
    link, which refuse_symlinked refuses; `..` is taken as the shell's cd takes it."""
    base = os.environ.get("PWD", "")
    try:
        logical = os.path.isabs(base) and os.path.samefile(base, ".")
    except OSError:
        logical = False
    return Path(os.path.normpath(os.path.join(base if logical else os.getcwd(), path)))


def sized(profile: Profile, args: argparse.Namespace) -> Profile:
    """The profile with the tutorial's size flags over it (preflight, postflight)."""
    return with_overrides(profile, TARGET_STEPS=args.target_steps,
                          TRAIN_BATCH_SIZE=args.train_batch_size, ROLLOUT_N=args.rollout_n,
                          NODES=args.expected_nodes, GPUS_PER_NODE=args.expected_gpus_per_node)


def judging_profile(folder: RunFolder, name: Optional[str],
                    phase: str) -> Tuple[Profile, Optional[str]]:
    """The profile to judge folder's run with, and why the run's own could not be read (the
    report says so): --profile when named, else the one run.json recorded, read once. A run.json
    that is there but gives no profile is refused (never judged against a guess); without one,
    the default profile, said."""
    if name:
        return load_profile(name), None
    found = runrecord.recorded_profile(folder)
    if isinstance(found, Profile):
        return found, None
    if folder.run_json.is_file():
        raise found.refusal()
    if phase == "postflight" and folder.path.is_dir():
        if not any((folder.path / file).exists() for file in RUN_FILES):
            raise UsageError(f"{folder.path} holds none of {', '.join(RUN_FILES)}: it is not a run "
                             "folder (check RUN_ID= and PREP_ROOT=; make runs lists runs)")
        print(f"postflight: {folder.run_json} is missing; judging with the default profile "
              f"{load_profile(None).PROFILE_NAME} (set PROFILE=<name> if the run used another)",
              file=sys.stderr, flush=True)
    return load_profile(None), found.note
