"""make submit's checks before it sends anything: on PREP_ROOT, in seconds, from files alone.

A job that would die in its first second (its bundle version not installed, a profile that is
not the installed one, RESUME_FROM without a complete checkpoint, a RUN_ID that ran before) is
refused here, on the prep box, before the cluster sees it, each with its finding id and fix.
The checks read PREP_ROOT (where this box mounts the job's volume); without it they cannot run,
and the one warning says so. Standard library only; the bundle's readers (twgrpo) do the reading.
"""
from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import List, Optional

from prep import bundle, site
from twgrpo.checks.checkpoint import checkpoint
from twgrpo.checks.resume.resume import TRACKER
from twgrpo.formats import bounded
from twgrpo.run.findings import Finding, finding
from twgrpo.run import runid
from twgrpo.run.profile import DEFAULT_PROFILE, Profile
from twgrpo.run.runfolder import RunFolder

MAX_STEPS_TRIED = 20  # checkpoint folders looked at, newest first: bounded on any volume
MAX_ENTRIES = 100_000  # names read from a checkpoints/ folder


def _sha256(path: Path) -> Optional[str]:
    """A regular file's sha256 (never a FIFO or device), or None when it cannot be read."""
    try:
        stream, _ = bounded.open_regular(path)
    except OSError:
        return None
    digest = hashlib.sha256()
    with stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_bundle_installed(prep_root: Path, rel: str, bundle_dir: Path) -> List[Finding]:
    """The launcher the Driver command pins is installed, byte for byte, where the job looks."""
    launcher = bundle_dir / bundle.LAUNCHER_NAME
    there = prep_root / rel / bundle.LAUNCHER_NAME
    want, have = _sha256(launcher), _sha256(there)
    if have is None:
        latest = prep_root / bundle.BUNDLES_REL / "LATEST"
        try:
            newest = bounded.read_text(latest, 256).strip() or "none"
        except bounded.Unreadable:
            newest = "none"
        return [finding("SUB-E130", str(prep_root / rel), f"bundle {Path(rel).name} of this "
                        f"Driver command is not installed on PREP_ROOT (the newest installed is "
                        f"{newest})")]
    if have != want:
        return [finding("SUB-E130", str(there), f"the installed launcher differs from the one the "
                        f"Driver command pins (sha256 expected {want}, actual {have}); an installed "
                        "version is never overwritten, so that folder must move away first")]
    return []


def check_profile_installed(prep_root: Path, rel: str, bundle_dir: Path,
                            profile: str) -> List[Finding]:
    """The profile the job will read is the one this submission was built from."""
    name = f"{profile or DEFAULT_PROFILE}.env"
    sent, there = bundle_dir / "profiles" / name, prep_root / rel / "profiles" / name
    want, have = _sha256(sent), _sha256(there)
    if have is None or have != want:
        state = "is not there" if have is None else f"differs (sha256 {have[:12]}… there, " \
            f"{(want or 'unreadable')[:12]}… sent)"
        return [finding("SUB-E131", str(there), f"profile {name} {state}: the job would run "
                        "another profile than the one checked here")]
    return []


def check_run_id_new(prep_root: Path, run_id: str) -> List[Finding]:
    if not runid.is_run_id(run_id):
        return []  # no folder to look for: the job's spec refuses such a RUN_ID (jobspec.py)
    folder = RunFolder.at(prep_root, run_id).path
    if folder.exists() or folder.is_symlink():
        return [finding("SUB-E013", str(folder), f"{folder} exists: RUN_ID {run_id} has run "
                        "before")]
    return []


def _present(paths, sizes=None) -> dict:
    """A cheap stand-in for shards.check_files: each file is there, regular and not empty
    (the launcher's resume phase reads every shard; this only has to be right in seconds)."""
    found = {}
    for path in paths:
        try:
            info = bounded.regular(path)
            found[path] = None if info.st_size else ("empty", "an empty file")
            if sizes is not None and info.st_size:
                sizes[path] = info.st_size
        except bounded.Unreadable as exc:
            found[path] = ("missing", str(exc)) if str(exc) == "missing" else ("layout", str(exc))
    return found


def check_resume_from(prep_root: Path, resume_from: str, run_id: str,
                      world_size: int) -> List[Finding]:
    """RESUME_FROM names a run on this volume that ended without SUCCESS and holds a complete
    checkpoint (every shard file of the profile's world size, its FSDP config and data.pt).
    RESUME_FROM=auto is the launcher's to resolve (it may rightly start fresh)."""
    if not resume_from or resume_from == "auto":
        return []
    if not runid.is_run_id(resume_from):  # never a path: no ../ walks
        return [finding("SUB-E132", resume_from, f"RESUME_FROM={resume_from!r} is not a RUN_ID")]
    folder = RunFolder.at(prep_root, resume_from).path
    if resume_from == run_id or not folder.is_dir() or folder.is_symlink():
        return [finding("SUB-E132", str(folder), f"RESUME_FROM={resume_from} names no earlier "
                        "run on PREP_ROOT")]
    if (folder / "SUCCESS").exists():
        return [finding("SUB-E133", str(folder), f"run {resume_from} succeeded: there is nothing "
                        "to resume")]
    try:
        text = bounded.read_text(folder / "checkpoints" / TRACKER, 32).strip()
    except bounded.Unreadable as exc:
        return [finding("SUB-E133", str(folder / "checkpoints"), f"run {resume_from} saved no "
                        f"checkpoint ({TRACKER} is {exc})")]
    latest = int(text) if bounded.ascii_digits(text) else 0
    names = itertools.islice((folder / "checkpoints").glob("global_step_*"), MAX_ENTRIES)
    steps = sorted((int(p.name[12:]) for p in names if bounded.ascii_digits(p.name[12:])
                    and len(p.name) < 32 and 0 < int(p.name[12:]) <= latest), reverse=True)
    reason = "" if steps else f"{TRACKER} holds {text!r}, and no step folder is at or before it"
    for step in steps[:MAX_STEPS_TRIED]:
        problems, _ = checkpoint.step_findings(folder, step, world_size, check_files=_present)
        if not problems:
            return []
        reason = reason or f"global_step_{step}: ({problems[0].id}) {problems[0].message}"
    return [finding("SUB-E133", str(folder / "checkpoints"), f"run {resume_from} has no "
                    f"complete checkpoint ({reason})")]


def before_sending(prep_root: str, rel: str, bundle_dir: Path, profile: str, run_id: str,
                   resume_from: str, loaded: Profile) -> List[Finding]:
    """Every check, all run; an empty list lets the job go. Without PREP_ROOT: one warning."""
    root = Path(prep_root) if prep_root else None
    if root is None or not root.is_dir():
        return [finding("SUB-W001", prep_root or "PREP_ROOT", "PREP_ROOT is not mounted on this "
                        "box: the bundle version, profile, RESUME_FROM and RUN_ID were not "
                        "checked before sending")]
    found = check_bundle_installed(root, rel, bundle_dir)
    if site.is_site(profile):  # beside every version, under its own sha256
        wrong = site.installed(root, loaded)
        found += [] if wrong is None else [finding(
            "SUB-E131", str(loaded.path), f"site profile {loaded.PROFILE_NAME} (sha256 "
            f"{loaded.sha256[:12]}…, in {loaded.path.parent}) {wrong}: the job would not find the "
            "profile checked here")]
    elif not found:  # its profile is worth comparing only once the version is there
        found = check_profile_installed(root, rel, bundle_dir, profile)
    return [*found, *check_run_id_new(root, run_id),
            *check_resume_from(root, resume_from, run_id, loaded.world_size)]
