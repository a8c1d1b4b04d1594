"""One Ray task pinned to each node and one bounded wait (checks/rounds/cluster.py), on a real local
Ray head: the task runs on the node it names, under isolated.task, and what does not answer
(an error, a task past the timeout) comes back in the answers instead of being raised."""
import sys
import time

import pytest

from twgrpo.checks.rounds import cluster

NODE = "0123456789abcdef" * 3 + "01234567"  # 56 hex digits


@pytest.mark.parametrize("node_id, usable", [
    (NODE, True), ("0" * 56, False), ("f" * 56, False), (NODE[:-1], False),
    (NODE.upper(), False), ("", False),
])
def test_only_well_formed_node_ids_take_a_task(node_id, usable):
    assert cluster.usable_node_id(node_id) is usable


@pytest.fixture(scope="module")
def ray(ray_head):
    import ray
    ray.init(address=ray_head, log_to_driver=False, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    yield ray
    ray.shutdown()


def where(tag):
    import ray
    return {"tag": tag, "node_id": ray.get_runtime_context().get_node_id(),
            "stdlib_first": "site-packages" not in sys.path[0]}


def fail(_):
    raise ValueError("planted\nsecond line")


def nap(seconds):
    time.sleep(seconds)
    return seconds


def test_a_task_runs_on_every_alive_node_it_is_pinned_to(ray):
    nodes = cluster.alive_nodes(ray)
    assert nodes and all(cluster.usable_node_id(n["NodeID"]) for n in nodes)
    jobs = [cluster.Job(n["NodeID"], n["NodeID"], (f"t{i}",)) for i, n in enumerate(nodes)]
    answers = cluster.on_nodes(ray, cluster.remote_task(ray, where), jobs, timeout=120)
    assert (answers.errors, answers.late) == ({}, [])
    assert list(answers.values) == [n["NodeID"] for n in nodes]
    for i, (node_id, value) in enumerate(answers.values.items()):
        assert value == {"tag": f"t{i}", "node_id": node_id, "stdlib_first": True}


def test_an_error_and_a_task_past_the_timeout_are_reported_not_raised(ray):
    node = cluster.alive_nodes(ray)[0]["NodeID"]
    jobs = [cluster.Job("quick", node, (0,)), cluster.Job("slow", node, (60,))]
    started = time.monotonic()
    answers = cluster.on_nodes(ray, cluster.remote_task(ray, nap), jobs, timeout=20)
    assert time.monotonic() - started < 50
    assert answers.values == {"quick": 0} and answers.late == ["slow"] and answers.errors == {}
    assert 19 < answers.seconds < 50
    errors = cluster.on_nodes(ray, cluster.remote_task(ray, fail), [cluster.Job("bad", node, (1,))],
                              timeout=120).errors
    assert list(errors) == ["bad"] and "planted" in str(errors["bad"])


def test_after_a_failure_the_others_get_only_the_grace(ray):
    node = cluster.alive_nodes(ray)[0]["NodeID"]
    jobs = [cluster.Job("sleeper", node, (120,)), cluster.Job("failed", node, (-1,))]

    def sleep_or_fail(seconds):
        if seconds < 0:
            return {"error": "rendezvous failed"}
        time.sleep(seconds)
        return {}

    answers = cluster.on_nodes(ray, cluster.remote_task(ray, sleep_or_fail), jobs, timeout=120,
                               after_failure=2, failed=lambda value: "error" in value)
    assert answers.values == {"failed": {"error": "rendezvous failed"}}
    assert answers.late == ["sleeper"] and answers.seconds < 60
