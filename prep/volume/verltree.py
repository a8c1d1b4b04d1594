"""verl's checkout pinned by content: a SHA256SUMS of its tracked files, beside the checkout.

The manifest lives at ``code/verl/<commit>.SHA256SUMS`` (never inside the tree, so the tree
holds only what git tracks). It is written only after every tracked file's bytes on disk were
checked against the commit's own blobs (git's object ids, recomputed here from the bytes), so
neither git's index (skip-worktree, assume-unchanged, fsmonitor) nor its idea of where the work
tree is (core.worktree) can make an edited file pass. Where git still runs here it runs with the
checkout's own config neutralised: no fsmonitor, hooks, filters, pager or external diff, the
work tree and git dir given explicitly, no system or global config.
"""
from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

from twgrpo.formats import hashing, sums
from twgrpo.run.records import write_new_text

MAX_FILES = 100000  # verl has about a thousand tracked files
REGULAR_MODES = ("100644", "100755")


class TreeError(ValueError):
    """The checkout cannot be pinned; the message names what is wrong and what to do."""


def manifest_path(checkout: Path) -> Path:
    """code/verl/<commit>.SHA256SUMS for the checkout code/verl/<commit>/."""
    checkout = Path(checkout)
    return checkout.parent / f"{checkout.name}.{sums.NAME}"


def safe_git(checkout: Path, *args: str) -> str:
    """git on the checkout with every hook of its own config turned off; stdout, or TreeError."""
    checkout = Path(checkout)
    git_dir = checkout / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise TreeError(f"{git_dir} is not a folder (a .git file or link can send git elsewhere); "
                        "clone verl afresh with make prepare-inputs")
    with tempfile.TemporaryDirectory(prefix="twgrpo-git-home-") as home:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("GIT_") and key not in ("BASH_ENV", "ENV")}
        env.update(HOME=home, XDG_CONFIG_HOME=home, GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1",
                   GIT_DIR=str(git_dir), GIT_WORK_TREE=str(checkout),  # over core.worktree
                   GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat",
                   GIT_NO_REPLACE_OBJECTS="1", GIT_GRAFT_FILE=os.devnull)
        neutral = ["-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}",
                   "-c", "core.untrackedCache=false", "-c", "diff.external=",
                   "-c", "core.pager=cat", "-c", f"safe.directory={checkout}",
                   "-c", "core.sshCommand=false", "-c", "protocol.allow=never"]
        out = subprocess.run(["git", "--no-pager", "--no-replace-objects", *neutral, *args], cwd=home, env=env, capture_output=True, check=False)
    if out.returncode:
        raise TreeError(f"git {' '.join(args)} failed in {checkout}: "
                        f"{out.stderr.decode('utf-8', 'replace').strip()[:300]}")
    return out.stdout.decode("utf-8", "surrogateescape")


def tracked(checkout: Path, commit: str) -> List[Tuple[str, str, str]]:
    """(mode, blob id, path) of every file the commit tracks, from git's objects alone."""
    listing = safe_git(checkout, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = []
    for item in listing.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        mode, kind, blob = meta.split(" ")
        entries.append((mode, blob, path))
        if len(entries) > MAX_FILES:
            raise TreeError(f"{checkout}: more than {MAX_FILES} tracked files; not a verl tree")
    return entries


def index_flags(checkout: Path) -> List[str]:
    """Paths the index marks skip-worktree or assume-unchanged: git would not look at them."""
    flagged = []
    for item in safe_git(checkout, "ls-files", "-v", "-z").split("\0"):
        if len(item) > 2 and (item[0] == "S" or item[0].islower()):
            flagged.append(item[2:])
    return flagged


def blob_id(data: bytes) -> str:
    """git's object id of a file's bytes (sha1 of 'blob <size>\\0' and the bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _files_on_disk(checkout: Path) -> List[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(checkout):
        rel = Path(dirpath).relative_to(checkout)
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d != ".git"]
        dirnames.sort()
        found += [(rel / name).as_posix() for name in filenames]
        found += [(rel / name).as_posix() for name in dirnames if (Path(dirpath) / name).is_symlink()]
        if len(found) > MAX_FILES:
            raise TreeError(f"{checkout}: more than {MAX_FILES} files")
    return found


def tree_manifest(checkout: Path, commit: str) -> str:
    """The SHA256SUMS text of the checkout's tracked files, after proving each on-disk file is
    the commit's blob, nothing is flagged in the index and nothing untracked lies in the tree."""
    checkout = Path(checkout)
    head = safe_git(checkout, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}").strip()
    if head != commit:
        raise TreeError(f"{checkout}: {commit} names commit {head}")
    problems = [f"{p}: marked skip-worktree or assume-unchanged in git's index"
                for p in index_flags(checkout)]
    entries = tracked(checkout, commit)
    lines: Dict[str, str] = {}
    for mode, blob, path in entries:
        full = checkout / path
        try:
            info = os.lstat(full)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror}")
            continue
        if mode not in REGULAR_MODES or not stat.S_ISREG(info.st_mode):
            problems.append(f"{path}: not a regular file (git mode {mode}); only regular files "
                            "can be pinned by content")
            continue
        data = full.read_bytes()
        if blob_id(data) != blob:
            problems.append(f"{path}: differs from the commit's blob {blob[:12]}")
            continue
        lines[path] = hashlib.sha256(data).hexdigest()
    untracked = sorted(set(_files_on_disk(checkout)) - set(lines) - {p for _, _, p in entries})
    problems += [f"{p}: not tracked by {commit[:12]} (the job would refuse it)" for p in untracked]
    if problems:
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        raise TreeError(f"{checkout} is not the pinned commit's tree: {shown} — clone verl afresh "
                        "(move the folder aside, then make prepare-inputs)")
    return sums.format_sums((lines[p], p) for p in sorted(lines))


def ensure_manifest(checkout: Path, commit: str) -> str:
    """Write code/verl/<commit>.SHA256SUMS unless an identical one exists; its sha256.

    A manifest that exists with other contents is refused, never overwritten."""
    text = tree_manifest(checkout, commit)
    target = manifest_path(checkout)
    if not write_new_text(target, text):
        try:
            existing = sums.read(target)
        except OSError:
            existing = None
        if existing is None or existing.problems or \
                hashing.sha256_file(target) != hashlib.sha256(text.encode("utf-8")).hexdigest():
            raise TreeError(f"{target} exists and differs from the checkout's tracked files; "
                            "nothing was overwritten — move it aside and pin again")
    return hashing.sha256_file(target)
