"""Worker pools stopped with what no worker has begun dropped, on Python 3.8 too
(formats/pools.py): there shutdown() has no cancel_futures, and postflight's close raised
TypeError at its end; and there the pool's manager thread can miss shutdown's one wake-up, which
hung postflight's close (and the unit suite) after a task was taken back."""
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from twgrpo.formats import pools


class Python38Pool:
    """ProcessPoolExecutor.shutdown as Python 3.8 has it: wait only."""

    def __init__(self):
        self.waits = []

    def shutdown(self, wait=True):
        self.waits.append(wait)


def test_on_python_38_the_futures_handed_out_are_cancelled_then_the_pool_stops():
    pending, done = Future(), Future()
    done.set_result(7)
    pool = Python38Pool()
    pools.stop(pool, [pending, done], wait=False)
    assert pool.waits == [False] and pending.cancelled() and done.result() == 7


def test_a_real_pool_stops():
    pool = ProcessPoolExecutor(max_workers=1)
    first = pool.submit(sum, [1, 2])
    assert first.result() == 3
    pools.stop(pool, [first])
    assert first.result() == 3
    try:
        pool.submit(sum, [1])
    except RuntimeError:  # "cannot schedule new futures after shutdown"
        return
    raise AssertionError("the pool still takes work after stop")


class Python38Manager:
    """The parts of a Python 3.8 ProcessPoolExecutor that stop() uses, with its manager thread
    as 3.8's behaves after a future was cancelled while it waited: shutdown's wake-up leaves it
    holding the cancelled item, so it ends only at the next one."""

    def __init__(self):
        self._shutdown_lock = threading.Lock()
        self._shutdown_thread = False
        self._queue_management_thread_wakeup = self
        self.woken = threading.Semaphore(0)
        self._queue_management_thread = threading.Thread(target=self._manage, daemon=True)
        self._queue_management_thread.start()

    def _manage(self):
        self.woken.acquire()  # shutdown's wake-up: the cancelled item is dropped, no end yet
        self.woken.acquire()

    def wakeup(self):
        self.woken.release()

    def shutdown(self, wait=True):
        self.wakeup()
        if wait:
            self._queue_management_thread.join()


def stops_within(seconds, pool, futures=(), wait=True):
    stopping = threading.Thread(target=pools.stop, args=(pool, futures, wait), daemon=True)
    stopping.start()
    stopping.join(seconds)
    return not stopping.is_alive()


def test_a_38_manager_that_misses_shutdowns_wake_up_is_woken_until_it_ends():
    pool = Python38Manager()
    ended = stops_within(10, pool)
    if not ended:
        pool.wakeup()  # free the thread left waiting before failing
    assert ended and pool._shutdown_thread and not pool._queue_management_thread.is_alive()


def test_a_38_manager_is_woken_until_it_ends_by_a_stop_without_wait_too():
    """3.8's shutdown(wait=False) closes the wake-up pipe at once: a manager thread still waiting
    then is never woken again (nor joined by the exit handler, which fails first)."""
    pool = Python38Manager()
    ended = stops_within(10, pool, wait=False)
    alive = pool._queue_management_thread.is_alive()
    if alive:
        pool.wakeup()
    assert ended and not alive


def test_a_pool_stopped_right_after_a_future_was_cancelled_stops():
    """On 3.8 a stop right after a cancel hung 18 times in 30 without the wake-ups; on 3.9 and
    later shutdown's cancel_futures drops the cancelled item itself."""
    for _ in range(30):
        pool = ProcessPoolExecutor(max_workers=1)
        assert pool.submit(abs, -1).result() == 1
        cancelled = pool.submit(int, "not begun")
        cancelled.cancel()  # what a task taken back does, as postflight ends
        assert stops_within(20, pool, [cancelled])


def begin_then_sleep(marker):
    open(marker, "w").close()
    time.sleep(60)


def test_a_pool_whose_worker_is_killed_while_it_stops_stops(tmp_path):
    """The wake-ups end with the manager thread, which ends on a lost worker too: a worker
    KILLed while stop waits for its task leaves no stop waiting."""
    pool = ProcessPoolExecutor(max_workers=1)
    marker = tmp_path / "begun"
    running = pool.submit(begin_then_sleep, str(marker))
    queued = pool.submit(abs, -2)
    for _ in range(200):
        if marker.exists():
            break
        time.sleep(0.05)
    stopping = threading.Thread(target=pools.stop, args=(pool, [running, queued]), daemon=True)
    stopping.start()
    stopping.join(0.5)
    assert stopping.is_alive()  # it waits for the task a worker has begun
    for pid in list(pool._processes or {}):
        os.kill(pid, signal.SIGKILL)
    stopping.join(20)
    assert not stopping.is_alive() and isinstance(running.exception(timeout=5), BrokenProcessPool)
