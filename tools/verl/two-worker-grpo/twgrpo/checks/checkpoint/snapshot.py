"""The checkpoint a resumed run trains from, copied into its own run folder and hashed there.

The resume phase copies the earlier run's global_step_N folder, every file verl will load
(actor shards, optimizer and extra state, data.pt, the huggingface/ config and tokenizer), to
<run>/resume-from/<earlier>/checkpoints/global_step_N/, hashing each file's bytes as it writes
them; verl loads that copy (trainer.resume_from_path). Nothing the earlier run's folder holds
can then change what this run loads: a parent still writing, or a file swapped after hashing and
restored before postflight, touches only the original. A symlink (folder or file) whose target
leaves the earlier run's folder, a device or FIFO, or a link loop is refused, never followed.
Copied files are read-only; postflight hashes the copy again and refuses any link in it.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Dict, Iterator, Tuple

from ...run.runfolder import RunFolder

MAX_FILES = 10000       # at least: a checkpoint holds 3 shards per rank plus a few config files
# and at most the run's item budget (run/budget.py: 8 a rank), passed in as ``most``
CHUNK = 4 << 20


class SnapshotError(ValueError):
    """The checkpoint cannot be copied or hashed; fid names the finding."""

    def __init__(self, fid: str, message: str):
        super().__init__(message)
        self.fid = fid


def snapshot_dir(run_dir: Path, earlier: str, step: int) -> Path:
    return RunFolder(RunFolder(run_dir).resume_from / earlier).checkpoints / f"global_step_{step}"


def _inside(real: str, top: str) -> bool:
    return real == top or real.startswith(top + os.sep)


def files_of(step_dir: Path, root: Path, links: bool = True,
             most: int = MAX_FILES) -> Iterator[Tuple[str, str]]:
    """(relative name, real path) of every file under step_dir; a link whose target leaves
    root, a non-regular file, a loop or more than max(most, MAX_FILES) files raises
    SnapshotError. links=False refuses every link."""
    most = max(most, MAX_FILES)
    top = os.path.realpath(root)
    seen, count = set(), 0
    for dirpath, dirnames, filenames in os.walk(step_dir, followlinks=links):
        real_dir = os.path.realpath(dirpath)
        if not _inside(real_dir, top):
            raise SnapshotError("RES-E020", f"{dirpath} leads to {real_dir}, outside {root}")
        if real_dir in seen:
            raise SnapshotError("RES-E021", f"{dirpath} loops back to {real_dir}")
        seen.add(real_dir)
        dirnames.sort()
        for name in dirnames + sorted(filenames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and not links:
                raise SnapshotError("RES-E020", f"{path} is a symlink (to {os.readlink(path)})")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            real = os.path.realpath(path)
            if not _inside(real, top):
                raise SnapshotError("RES-E020", f"{path} leads to {real}, outside {root}")
            count += 1
            if count > most:
                raise SnapshotError("RES-E021", f"more than {most} files under {step_dir}: more "
                                    "than this run's size allows (run/budget.py)")
            yield os.path.relpath(path, step_dir), real


def _open_regular(real: str) -> int:
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SnapshotError("RES-E021", f"{real} is not a regular file")
    return fd


def copy_checkpoint(step_dir: Path, earlier_dir: Path, dest: Path, most: int = MAX_FILES) -> Dict[str, str]:
    """Copy step_dir to dest (which must not exist), hashing the bytes written; name -> sha256.
    most: the files the run's size allows (files_of)."""
    plan = list(files_of(step_dir, earlier_dir, most=most))  # every refusal before anything is written
    dest.mkdir(parents=True)
    hashes = {}
    for rel, real in plan:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            source = _open_regular(real)
        except OSError as exc:
            raise SnapshotError("RES-E021", f"{real}: {exc.strerror}") from None
        digest = hashlib.sha256()
        try:
            out = os.open(str(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
            try:
                while True:
                    chunk = os.read(source, CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view):]
                os.fsync(out)
            finally:
                os.close(out)
        except OSError as exc:
            raise SnapshotError("RES-E022", f"cannot write {target}: {exc.strerror}") from None
        finally:
            os.close(source)
        hashes[Path(rel).as_posix()] = digest.hexdigest()
    return dict(sorted(hashes.items()))


def tree_hashes(step_dir: Path, root: Path, links: bool = True, most: int = MAX_FILES) -> Dict[str, str]:
    """sha256 of every file under step_dir, with the refusals of files_of."""
    hashes = {}
    for rel, real in files_of(step_dir, root, links, most):
        try:
            fd = _open_regular(real)
        except OSError as exc:
            raise SnapshotError("RES-E021", f"{real}: {exc.strerror}") from None
        digest = hashlib.sha256()
        with os.fdopen(fd, "rb") as stream:
            for chunk in iter(lambda: stream.read(CHUNK), b""):
                digest.update(chunk)
        hashes[Path(rel).as_posix()] = digest.hexdigest()
    return dict(sorted(hashes.items()))
