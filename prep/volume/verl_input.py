"""verl on the volume: a clone checked out at the profile's VERL_COMMIT into code/verl/<commit>/,
its files verified against the commit's tracked files, and its tree manifest written."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from prep.volume import layout, verltree
from prep.volume.prepared import PrepareError, say
from twgrpo.run.profile import Profile


def verl_problem(checkout: Path, commit: str) -> str:
    """'' if checkout's files are exactly the commit's tracked files (by content), else what is
    wrong; git runs with the checkout's own config neutralised (verltree.safe_git)."""
    try:
        verltree.tree_manifest(checkout, commit)
    except verltree.TreeError as exc:
        return str(exc)
    return ""


def prepare_verl(profile: Profile, root: Path, source: str) -> str:
    final = profile.verl_root(root)
    if final.exists():
        problem = verl_problem(final, profile.VERL_COMMIT)
        if problem:
            raise PrepareError(f"{final} exists but {problem}; nothing was changed. Fix or move it "
                               "aside, then run prepare-inputs again.")
        return "kept (its files are the pinned commit's), " + _manifest(final, profile)
    staging = layout.staging_for(final)
    staging.rmdir()  # git clone wants to create it
    say(f"verl: cloning {source}")
    clone = subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(staging)],
                           capture_output=True, text=True)
    if clone.returncode:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"git clone {source} failed: {clone.stderr.strip()} — check the "
                           "network, or pass VERL_MIRROR=<a local clone>")
    try:
        layout.git(staging, "checkout", "--quiet", "--detach", profile.VERL_COMMIT)
    except layout.LayoutError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"{source} has no commit {profile.VERL_COMMIT}: {exc}")
    problem = verl_problem(staging, profile.VERL_COMMIT)
    if problem:
        raise PrepareError(f"the fresh checkout is wrong: {problem}")
    return layout.publish(staging, final) + ", " + _manifest(final, profile)


def _manifest(checkout: Path, profile: Profile) -> str:
    """Write (or keep) code/verl/<commit>.SHA256SUMS; what happened, for the log."""
    try:
        digest = verltree.ensure_manifest(checkout, profile.VERL_COMMIT)
    except verltree.TreeError as exc:
        raise PrepareError(str(exc)) from None
    pinned = "matches the profile's pin" if digest == profile.VERL_SUMS_SHA256 else \
        f"sha256 {digest} (the profile pins {profile.VERL_SUMS_SHA256 or 'none'}: make pin-inputs)"
    return f"tree manifest {verltree.manifest_path(checkout).name} {pinned}"
