"""Worker processes, for the readers here and the checks above: how many cores this process may
use, and stopping a ProcessPoolExecutor with what no worker has begun dropped and without
hanging, on every Python the verifier runs on.

shutdown's cancel_futures is Python 3.9's. On 3.8 the futures handed out are cancelled first (a
cancelled future is never begun), and the pool's manager thread is woken until it ends: 3.8's
can miss shutdown's one wake-up. Woken, it still holds the item of a future cancelled while it
waited (so it does not end), drops that item on its next turn, then waits for a result that
never comes (a stop right after a cancel hung 18 times in 30 on 3.8.18). There a stop without
wait waits for the manager thread all the same: 3.8's shutdown(wait=False) closes the wake-up
pipe under a manager thread that may still need it, and its exit handler then fails before it
joins the pool's threads.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

WAKE_EVERY = 0.05  # seconds between wake-ups of a 3.8 manager thread that has not ended yet


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def stop(pool: Any, futures: Iterable[Any] = (), wait: bool = True) -> None:
    """Stop the pool: what no worker has begun is dropped; with wait, return once the workers
    have ended (a task a worker has begun is finished first; on 3.8 always, see above)."""
    try:
        pool.shutdown(wait=wait, cancel_futures=True)
    except TypeError:  # Python 3.8: no cancel_futures
        for future in futures:
            future.cancel()
        _wake_until_ended(pool)
        pool.shutdown(wait=wait)


def _wake_until_ended(pool: Any) -> None:
    """Flag a 3.8 pool's shutdown and wake its manager thread until it ends (shutdown() then
    has nothing left to wait for). A pool without these parts is left to shutdown()."""
    thread = getattr(pool, "_queue_management_thread", None)
    wakeup = getattr(pool, "_queue_management_thread_wakeup", None)
    lock = getattr(pool, "_shutdown_lock", None)
    if thread is None or wakeup is None or lock is None:
        return
    with lock:
        pool._shutdown_thread = True
    while thread.is_alive():
        wakeup.wakeup()
        thread.join(WAKE_EVERY)
