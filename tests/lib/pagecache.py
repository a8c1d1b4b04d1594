"""Evict files from the page cache, so the next read of them is cold (benchmarks and the GPU
machine's read-floor script time both cold and warm reads)."""
import os
from pathlib import Path
from typing import Iterable, Union


def drop_cache(paths: Iterable[Union[str, Path]]) -> None:
    """Write back, then drop, every page of each file (posix_fadvise DONTNEED)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
