"""Stopping a ProcessPoolExecutor with what no worker has begun dropped, on every Python the
verifier runs on: shutdown's cancel_futures is Python 3.9's, so on 3.8 the futures handed out
are cancelled first (a cancelled future is never begun)."""
from __future__ import annotations

from typing import Any, Iterable


def stop(pool: Any, futures: Iterable[Any] = (), wait: bool = True) -> None:
    try:
        pool.shutdown(wait=wait, cancel_futures=True)
    except TypeError:  # Python 3.8: no cancel_futures
        for future in futures:
            future.cancel()
        pool.shutdown(wait=wait)
