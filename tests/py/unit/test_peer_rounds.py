"""Preflight's node-to-node rounds (reachability, storage trial, Ray ports) on many nodes without
a cluster: the peers each node tries come from one plan drawn from the run id and recorded in
preflight.json, and what the driver sends and keeps a node stays the same size as nodes grow."""
import json

from test_preflight_checks import context
from twgrpo.checks.rounds import cluster, node_agents, peers, reach, storage_trial


def fake_rounds(monkeypatch, answer):
    """cluster.on_nodes without Ray: every job answered by answer(spec); the specs are kept."""
    sent = {}

    def on_nodes(ray, task, jobs, timeout, **kwargs):
        for job in jobs:
            sent[job.key] = job.args[0]
        return cluster.Answers({k: answer(spec) for k, spec in sent.items()}, {}, [], 0.1)
    monkeypatch.setattr(cluster, "on_nodes", on_nodes)
    monkeypatch.setattr(cluster, "remote_task", lambda ray, function, **kw: function)
    return sent


def test_the_reach_plan_is_drawn_from_the_run_id_and_recorded(tmp_path, monkeypatch):
    ctx = context(tmp_path, nodes=40)
    sent = fake_rounds(monkeypatch, lambda spec: {"ok": len(spec["targets"]), "failed": {},
                                                  "failed_count": 0, "interface": "", "incoming": 0})
    assert reach.check_reachability(ctx) == []
    plan = ctx.peer_plans["reachability"]
    assert plan["seed"] == "exp-001" and plan["nodes"] == 40 and plan["pairs"] <= 40 * 6
    assert {int(o): t for o, t in plan["targets"].items()} == peers.plan(list(range(40)), "exp-001")
    assert {o: spec["targets"] for o, spec in sent.items()} == peers.plan(list(range(40)), "exp-001")
    json.dumps(plan)  # it goes into preflight.json


def test_every_pair_is_the_rule_on_a_few_nodes():
    record = peers.record(peers.plan([0, 1, 2], "r"), "r")
    assert (record["rule"], record["pairs"]) == ("all pairs", 6)
    assert peers.record(peers.plan(list(range(9)), "r"), "r")["rule"].startswith("ring neighbours")


def test_the_storage_trial_looks_only_at_its_planned_peers(tmp_path, monkeypatch):
    ctx = context(tmp_path, nodes=40)
    sent = fake_rounds(monkeypatch, lambda spec: {"bytes": 64, "write_seconds": 0.1, "seen": len(
        spec["targets"]), "unseen": {}, "unseen_count": 0})
    assert storage_trial.check_storage_trial(ctx) == []
    targets = peers.plan(list(range(40)), "exp-001")
    assert {o: spec["targets"] for o, spec in sent.items()} == targets
    assert ctx.peer_plans["storage-trial"]["pairs"] == sum(map(len, targets.values()))
    assert [n["seen"] for n in ctx.storage_record["nodes"]] == [len(targets[o]) for o in range(40)]


def test_a_node_that_sees_none_of_many_peers_names_a_few_and_counts_the_rest(tmp_path):
    (tmp_path / "trial").mkdir()
    spec = {"folder": str(tmp_path / "trial"), "token": "t", "bytes": 64, "seconds": 0.2,
            "ordinal": 0, "targets": list(range(1, 41))}
    report = storage_trial.storage_trial(spec)
    assert (report["seen"], report["unseen_count"], len(report["unseen"])) == (0, 40, peers.NAMED_PEERS)
    found = storage_trial.judge(context(tmp_path, nodes=41), {0: report})
    assert [f.id for f in found] == ["PRE-E231"] * (peers.NAMED_PEERS + 1)
    assert "did not see 24 more peers' renamed files" in found[-1].message


def test_the_ray_ports_a_node_tries_are_its_planned_peers(tmp_path):
    ctx = context(tmp_path, nodes=3)
    for node in ctx.nodes:
        node.update(NodeManagerPort=1, ObjectManagerPort=2, RuntimeEnvAgentPort=3)
    assert [t[2] for t in node_agents.targets_of(ctx, 0, [2])] == [
        "node manager of node 2", "object manager of node 2", "runtime-env agent of node 2"]


def per_node(nodes, size):
    """Bytes a node of what the driver sends and keeps for the three rounds on `nodes` nodes."""
    ctx = type("Ctx", (), {"nodes": [{"NodeManagerAddress": f"10.{o >> 8}.{o & 255}.1",
                                      "NodeManagerPort": 40000, "ObjectManagerPort": 40001,
                                      "RuntimeEnvAgentPort": 40002} for o in range(nodes)]})()
    plan = peers.plan(list(range(nodes)), "exp-001")
    sent = [node_agents.targets_of(ctx, o, plan[o]) for o in range(nodes)]
    return size([peers.record(plan, "exp-001"), sent]) / nodes


def test_what_the_driver_holds_a_node_is_flat_from_250_to_2000_nodes():
    def size(value):
        return len(json.dumps(value))
    assert per_node(2000, size) < 1.2 * per_node(250, size)
