"""Worker pools stopped with what no worker has begun dropped, on Python 3.8 too (run/pools.py):
there shutdown() has no cancel_futures, and postflight's close raised TypeError at its end."""
from concurrent.futures import Future, ProcessPoolExecutor

from twgrpo.run import pools


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
