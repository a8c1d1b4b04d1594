#!/usr/bin/env python3
"""Summary: Remove old installed bundle versions from PREP_ROOT, keeping every one still needed.

Usage: prep/prune.py --prep-root DIR --keep N

Every `make install-tools` after a change adds a version folder,
tools/verl/two-worker-grpo/bundle-<version>/, and none is ever overwritten. This removes the old
ones, never a version that:
  - is one of the KEEP most recently installed (LATEST among them),
  - this checkout's Driver command pins (make driver-command prints it),
  - a recorded run names (its run.json: postflight, report and resume read that version's files),
  - a live run uses (a fresh heartbeat: its launcher runs from there).
It says what it kept and why, and what it removed. A folder is first renamed out of the way, so
a Driver command never finds half a version. Run it when no job is being started.
Exit codes: 0 done; 1 a folder could not be removed (GEN-E131); 2 usage error (GEN-E130).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from prep import bundle_layout  # noqa: E402
from twgrpo.formats import bounded  # noqa: E402
from twgrpo.run import heartbeat, runfolder, runrecord  # noqa: E402
from twgrpo.run.findings import say_usage, usage  # noqa: E402

MAX_RUNS = 100_000  # run folders read; past that the tool refuses rather than guess


def say(text: str) -> None:
    print(f"prune: {text}", flush=True)


def installed(parent: Path) -> List[Path]:
    """Version folders, most recently installed first (their folder's change time)."""
    found = [p for p in parent.iterdir() if bundle_layout.VERSION.match(p.name) and p.is_dir()
             and not p.is_symlink()] if parent.is_dir() else []
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def needed_by_runs(prep_root: Path) -> Dict[str, List[str]]:
    """version -> reasons, from every run.json under runs/ (and each run's heartbeat)."""
    reasons: Dict[str, List[str]] = {}
    runs = runfolder.runs_dir(prep_root)
    folders = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    if len(folders) > MAX_RUNS:
        raise usage("GEN-E130", None, f"{len(folders)} run folders under {runs}: more than "
                    f"{MAX_RUNS} to read")
    for folder in folders:
        # a folder the launcher never recorded ({}) names no version
        version = runrecord.read_or_empty(folder).get("bundle_version")
        if not isinstance(version, str) or not bundle_layout.VERSION.match(version):
            continue
        live = heartbeat.liveness(folder) == "alive"
        reasons.setdefault(version, []).append(
            f"run {folder.name} {'is running from it (fresh heartbeat)' if live else 'names it'}")
    return reasons


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prep/prune.py", description=__doc__.splitlines()[0])
    parser.add_argument("--prep-root", default="")
    parser.add_argument("--keep", default="")
    args = parser.parse_args(argv)
    if not args.keep.isdigit() or int(args.keep) < 1:
        say_usage("prune", usage("GEN-E130", None, f"KEEP={args.keep!r} is not a whole number of "
                                 "at least 1"))
        return 2
    root = Path(args.prep_root)
    if not args.prep_root or not root.is_dir():
        say_usage("prune", usage("GEN-E130", None, f"PREP_ROOT {args.prep_root!r} is not a directory"))
        return 2
    parent = root / bundle_layout.BUNDLES_REL
    versions = installed(parent)
    why: Dict[str, List[str]] = {v: list(r) for v, r in needed_by_runs(root).items()}
    for rank, folder in enumerate(versions[:int(args.keep)], 1):
        why.setdefault(folder.name, []).insert(0, f"installed {'most recently' if rank == 1 else f'#{rank} most recently'}")
    try:
        latest = bounded.read_text(parent / "LATEST", 256).strip()
        why.setdefault(latest, []).append("LATEST names it")
    except bounded.Unreadable:
        pass
    mine = bundle_layout.version_of(bundle_layout.BUNDLE / bundle_layout.LAUNCHER_NAME)
    why.setdefault(mine, []).append("this checkout's Driver command pins it")
    removed, failed = [], 0
    for folder in versions:
        if folder.name in why:
            say(f"kept {folder.name}: {'; '.join(why[folder.name][:4])}"
                + (f" (and {len(why[folder.name]) - 4} more runs)" if len(why[folder.name]) > 4 else ""))
            continue
        aside = parent / f".removing-{folder.name}"
        try:
            os.rename(folder, aside)  # the Driver command no longer finds it: never half a version
            shutil.rmtree(aside)
            removed.append(folder.name)
            say(f"removed {folder.name}: older than the {args.keep} newest, and no run names it")
        except OSError as exc:
            failed += 1
            say_usage("prune", usage("GEN-E131", None, f"{folder}: cannot remove it "
                                     f"({exc.strerror or exc})"))
    say(f"{len(versions) - len(removed) - failed} version(s) kept, {len(removed)} removed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
