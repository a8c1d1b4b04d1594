"""Write inputs in the volume layout: staged, hashed, then published by one rename.

Nothing that exists is overwritten: a finished folder that matches is kept, one that differs
is refused with what to do, and a half-written staging folder from a crash is redone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict

from twgrpo.formats import hashing, sums

# A fixed identity and date make a commit's hash depend only on the files.
GIT_ENV = {"GIT_AUTHOR_NAME": "two-worker-grpo", "GIT_AUTHOR_EMAIL": "inputs@two-worker-grpo.invalid",
           "GIT_AUTHOR_DATE": "2025-10-15T00:00:00+00:00", "GIT_COMMITTER_NAME": "two-worker-grpo",
           "GIT_COMMITTER_EMAIL": "inputs@two-worker-grpo.invalid",
           "GIT_COMMITTER_DATE": "2025-10-15T00:00:00+00:00"}


class LayoutError(Exception):
    pass


def file_digests(folder: Path) -> Dict[str, str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts)
    digests = hashing.hash_files(files, label=str(folder.name))
    out = {}
    for path in files:
        digest = digests[path]
        if isinstance(digest, OSError):
            raise LayoutError(f"cannot read {path}: {digest.strerror}")
        out[path.relative_to(folder).as_posix()] = digest
    return out


def write_sums(folder: Path) -> None:
    """SHA256SUMS over every file in the folder (but itself), sorted, sha256sum's format."""
    digests = {k: v for k, v in file_digests(folder).items() if k != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_text(sums.format_sums((d, n) for n, d in digests.items()),
                                       encoding="utf-8")


def staging_for(final: Path) -> Path:
    """A fresh staging folder beside ``final`` (same filesystem, so publishing is a rename)."""
    staging = final.parent / f".{final.name}.partial"
    if staging.exists():  # left by an interrupted run: redo it
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def publish(staging: Path, final: Path) -> str:
    """Rename staging to final; if final exists keep it when identical, else refuse."""
    if final.exists():
        ours, theirs = file_digests(staging), file_digests(final)
        shutil.rmtree(staging)
        if ours != theirs:
            changed = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
            raise LayoutError(f"{final} exists and differs in {len(changed)} files "
                              f"({', '.join(changed[:5])}); nothing was overwritten. Move it aside "
                              "to prepare it again, or keep it and pin it with make pin-inputs.")
        return "kept (identical)"
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(staging, final)
    return "written"


def git(folder: Path, *args: str) -> str:
    """git in a repository this tool made (generate-inputs); a checkout of the volume is read
    through verltree.safe_git instead. No hook or fsmonitor of any config runs either way."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(folder)}
    out = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false",
                          "-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}",
                          "-c", f"safe.directory={folder}", "-C", str(folder), *args],
                         capture_output=True, text=True, env=env)
    if out.returncode:
        raise LayoutError(f"git {' '.join(args)} failed in {folder}: {out.stderr.strip()}")
    return out.stdout.strip()


def commit_tree(folder: Path, message: str) -> str:
    """Commit every file in ``folder`` as a new repository; the commit hash is reproducible."""
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")
