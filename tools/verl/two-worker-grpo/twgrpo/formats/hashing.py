"""SHA-256 of many files at once: hashlib releases the GIL, so threads use every core."""
from __future__ import annotations

import hashlib
import os
import errno
import stat
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterable, List, Optional, TextIO, Tuple, Union

CHUNK = 8 << 20


class Progress:
    """Prints bytes hashed so far to stderr every few seconds, for large inputs only."""

    def __init__(self, total: int, label: str, out: Optional[TextIO] = None, every: float = 2.0):
        # stderr looked up now, not at import: a default holding the stream would travel with
        # this class when a Ray task ships the package by value, and a stream cannot
        self.total, self.label, self.every = total, label, every
        self.out = out if out is not None else sys.stderr
        self.done = 0
        self.lock = threading.Lock()
        self.started = self.last = time.monotonic()

    def add(self, nbytes: int) -> None:
        with self.lock:
            self.done += nbytes
            now = time.monotonic()
            if now - self.last >= self.every:
                self.last = now
                rate = self.done / max(now - self.started, 1e-9) / (1 << 20)
                print(f"{self.label}: hashed {self.done / (1 << 30):.2f} of "
                      f"{self.total / (1 << 30):.2f} GiB ({100 * self.done // max(self.total, 1)}%, "
                      f"{rate:.0f} MiB/s)", file=self.out, flush=True)


def sha256_file(path: Union[str, Path], progress: Optional[Progress] = None) -> str:
    digest = hashlib.sha256()
    # O_NONBLOCK and the fstat: a FIFO or device listed by mistake fails at once instead of
    # blocking or reading forever.
    fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with open(fd, "rb", buffering=0) as stream:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        while True:
            n = stream.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
            if progress:
                progress.add(n)
    return digest.hexdigest()


def hash_files(paths: Iterable[Path], label: str = "sha256",
               workers: Optional[int] = None) -> Dict[Path, Union[str, OSError]]:
    """Hash every path in parallel; a file that cannot be read maps to its OSError."""
    paths = list(paths)
    sizes = {}
    for p in paths:
        try:
            sizes[p] = p.stat().st_size
        except OSError:
            sizes[p] = 0
    progress = Progress(sum(sizes.values()), label)
    # Largest first, so one big file does not start last and finish alone.
    ordered = sorted(paths, key=lambda p: -sizes[p])
    workers = workers or min(8, os.cpu_count() or 1)

    def one(path: Path) -> Tuple[Path, Union[str, OSError]]:
        try:
            return path, sha256_file(path, progress)
        except OSError as exc:
            return path, exc

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return dict(pool.map(one, ordered))


def mismatches(folder: Path, entries: Iterable[Tuple[str, str]],
               label: str) -> List[Tuple[Path, str, Union[str, OSError]]]:
    """(path, expected, actual digest or OSError) of each listed file that does not match."""
    expected = {folder / name: digest for digest, name in entries}
    results = hash_files(expected, label=label)
    return [(path, digest, results[path]) for path, digest in expected.items()
            if results[path] != digest]
