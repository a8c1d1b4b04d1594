"""Ray tasks pinned to nodes, all in flight, and one bounded wait for their answers: the way
every check that asks the cluster's nodes something (preflight's probes, shared-storage trial,
reachability, collectives; postflight's shard checks; the stall's evidence) sends its work.

Each task is the bundle's function wrapped by isolated.task (the standard library first on the
worker's path) with the bundle's twgrpo shipped by value, so nodes need no copy of it; it asks
no CPU, is never retried, and runs only on its node (hard affinity). What did not answer is
reported, not raised: a task that raised or whose worker or node died is in ``errors``, one
still out at the timeout is cancelled and in ``late``.
"""
from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Tuple

from ..nodeside import isolated

# A nil or malformed node id makes Ray's C++ core abort the driver instead of raising.
NODE_ID = re.compile(r"^[0-9a-f]{56}$")


def usable_node_id(node_id: str) -> bool:
    """Whether a task may be pinned to this node id: 56 hex digits, not all 0 or all f."""
    return bool(NODE_ID.match(node_id)) and bool(set(node_id) - {"0"}) and bool(set(node_id) - {"f"})


def alive_nodes(ray) -> List[Dict[str, Any]]:
    """ray.nodes()'s live nodes whose ids a task can be pinned to."""
    return [node for node in ray.nodes()
            if node.get("Alive") and usable_node_id(str(node.get("NodeID")))]


@dataclasses.dataclass
class Job:
    """One task: its key in the answers, the node it must run on, its arguments, and the GPUs
    it asks for (None: the task's own default)."""
    key: Hashable
    node_id: str
    args: Tuple[Any, ...] = ()
    gpus: Optional[float] = None


@dataclasses.dataclass
class Answers:
    """Every job's outcome by key, in the order the jobs were sent."""
    values: Dict[Hashable, Any]  # what the task returned
    errors: Dict[Hashable, BaseException]  # the task raised, or its worker or node died
    late: List[Hashable]  # no answer within the timeout: cancelled
    seconds: float  # the wait, from the last task sent to the last answer or the timeout


def remote_task(ray, function: Callable, **resources):
    """function as a Ray task for the nodes (see the module's docstring); resources go to
    ray.remote (num_gpus, say)."""
    import twgrpo
    ray.cloudpickle.register_pickle_by_value(twgrpo)  # nodes need no copy of the bundle
    return ray.remote(num_cpus=0, max_retries=0, **resources)(isolated.task(ray, function))


def on_nodes(ray, task, jobs: Iterable[Job], timeout: float, cancel_late: bool = True,
             after_failure: Optional[float] = None,
             failed: Callable[[Any], bool] = lambda value: False) -> Answers:
    """Send every job's task to its node, then wait at most timeout seconds for all of them.
    With after_failure, once a task raises or returns a value that failed() calls a failure,
    the others get at most after_failure seconds more (the ranks of a collective cannot finish
    without it, but may still report their own side)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    pending: Dict[Any, Hashable] = {}
    for job in jobs:
        options: Dict[str, Any] = {"scheduling_strategy": NodeAffinitySchedulingStrategy(
            node_id=job.node_id, soft=False)}
        if job.gpus is not None:
            options["num_gpus"] = job.gpus
        pending[task.options(**options).remote(*job.args)] = job.key
    started = time.monotonic()
    deadline = started + timeout
    values: Dict[Hashable, Any] = {}
    errors: Dict[Hashable, BaseException] = {}
    out = list(pending)
    while out and time.monotonic() < deadline:
        one = after_failure is not None  # one at a time, to see a failure as it comes
        ready, out = ray.wait(out, num_returns=1 if one else len(out),
                              timeout=max(deadline - time.monotonic(), 0))
        for ref in ready:
            try:
                values[pending[ref]] = ray.get(ref)
            except Exception as exc:  # any Ray error is evidence, reported by the caller
                errors[pending[ref]] = exc
            if one and (pending[ref] in errors or failed(values[pending[ref]])):
                deadline = min(deadline, time.monotonic() + after_failure)
    seconds = time.monotonic() - started
    still = set(out)
    if cancel_late:
        for ref in out:
            ray.cancel(ref, force=True)
    order = list(pending.values())
    return Answers({k: values[k] for k in order if k in values},
                   {k: errors[k] for k in order if k in errors},
                   [key for ref, key in pending.items() if ref in still], seconds)
