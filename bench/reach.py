#!/usr/bin/env python3
"""Summary: preflight's node-to-node rounds at 250 to 2,000 simulated nodes, without Ray: for
reachability, the storage trial and the Ray-ports round, the pairs tried (each a peer file read
on shared storage, or a connection), and the driver's peak memory for the plan, its record in
preflight.json, the nodes' reports (as the nodes return them, every peer good) and their judging.

Then the whole of preflight's driver side at the same counts: every node's probe report (the
unit tests' healthy report of the default profile), every check that judges them, the three
rounds and preflight.json's nodes and peer plans as text.

Usage: bench/reach.py [SCRATCH]
The driver's memory must grow linearly with the nodes: the last column, each count's KiB a node
over 250 nodes', stays near 1.00x. The all-pairs rounds these replaced are simulated up to 500
nodes only (they grow with the square of the nodes: measured at 2,000 nodes, 139 MiB of storage
reports and 1.7 GB of Ray-port target lists).
"""
import contextlib
import io
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The unit tests' healthy probe reports (test_preflight_checks.report) stand in for the nodes'.
sys.path[:0] = [str(REPO / "tools" / "verl" / "two-worker-grpo"), str(REPO / "tests" / "py" / "unit"),
                str(REPO / "tests" / "lib"), str(REPO)]
from test_preflight_checks import context  # noqa: E402
from twgrpo.checks.preflight import preflight  # noqa: E402
from twgrpo.checks.rounds import node_agents, peers, reach, storage_trial  # noqa: E402
from twgrpo.run.findings import Check, run_checks  # noqa: E402

SEED = "2026-01-01-grpo-2000"


class Ctx:
    """What the rounds' driver side reads of preflight's context."""

    class profile:  # noqa: N801 - a stand-in for the Profile
        MODEL_WEIGHTS = "model.safetensors"

    def __init__(self, nodes):
        self.run_id, self.model_root = SEED, "/nonexistent"
        self.peer_plans, self.storage_record = {}, {}
        self.nodes = [{"NodeManagerAddress": _ip(o), "NodeManagerPort": 40000,
                       "ObjectManagerPort": 40001, "RuntimeEnvAgentPort": 40002}
                      for o in range(nodes)]

    @staticmethod
    def node_name(ordinal):
        return f"node {ordinal} (worker node-{ordinal:04d})"


def _ip(ordinal):
    return f"10.{ordinal >> 8}.{ordinal & 255}.1"


def reach_round(ctx, ordinals):
    targets = peers.plan(ordinals, ctx.run_id)
    ctx.peer_plans["reachability"] = peers.record(targets, ctx.run_id)
    incoming = peers.expected_incoming(targets)
    results = {o: {"ordinal": o, "address": _ip(o), "interface": "ib0", "port": 40000 + o,
                   "ok": len(targets[o]), "failed": {}, "failed_count": 0,
                   "incoming": incoming[o]} for o in targets}
    return targets, reach.judge(ctx, results)


def storage_round(ctx, ordinals):
    targets = peers.plan(ordinals, ctx.run_id)
    ctx.peer_plans["storage-trial"] = peers.record(targets, ctx.run_id)
    results = {o: {"ordinal": o, "bytes": 64 << 20, "write_seconds": 1.0, "read_seconds": 0.5,
                   "seen": len(targets[o]), "unseen": {}, "unseen_count": 0} for o in targets}
    ctx.storage_record = {"nodes": [{"ordinal": o, **r} for o, r in sorted(results.items())]}
    return targets, storage_trial.judge(ctx, results)


def ports_round(ctx, ordinals):
    targets = peers.plan(ordinals, ctx.run_id)
    ctx.peer_plans["ray-ports"] = peers.record(targets, ctx.run_id)
    sent = {o: node_agents.targets_of(ctx, o, targets[o]) for o in ordinals}  # alive at once
    return targets, node_agents.judge_ports(ctx, {o: [] for o in sent})


def all_pairs_storage(nodes):
    """The former storage trial's reports: every node listed every other it saw."""
    return {o: {"seen": [p for p in range(nodes) if p != o], "unseen": {}} for o in range(nodes)}


def all_pairs_ports(ctx, nodes):
    """The former Ray-ports round's target lists: every other node's three ports."""
    return {o: node_agents.targets_of(ctx, o, list(range(nodes))) for o in range(nodes)}


def whole(nodes, scratch):
    """Preflight's driver side on `nodes` healthy nodes: reports, node checks, rounds, record."""
    ctx = context(scratch, nodes=nodes)
    checks = [Check("node-probes", lambda c: [])] + [c for c in preflight.CHECKS if c.needs == preflight.PROBED]
    with contextlib.redirect_stdout(io.StringIO()):  # the checks' status lines
        results = run_checks("preflight", checks, ctx)
    found = [f for r in results for f in r.findings]
    ordinals = sorted(ctx.reports)
    for work in (reach_round, storage_round, ports_round):
        found += work(ctx, ordinals)[1]
    text = json.dumps({"nodes": [ctx.reports.get(i) for i in range(nodes)], "workers": preflight.topology(ctx),
                       "peer_plans": ctx.peer_plans, "storage_trial": ctx.storage_record})
    return found, text


def peak(work, *args):
    tracemalloc.start()
    kept = work(*args)
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return top


def main() -> int:
    base = {}
    for nodes in (250, 500, 1000, 2000):
        for name, work in (("reachability", reach_round), ("storage trial", storage_round),
                           ("ray ports", ports_round)):
            ctx = Ctx(nodes)
            tracemalloc.start()
            targets, found = work(ctx, list(range(nodes)))
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            pairs = sum(len(t) for t in targets.values())
            per_node = top / nodes / 1024
            base.setdefault(name, per_node)
            line = (f"{nodes:5d} nodes, {name:13s}: {pairs:6d} pairs tried ({pairs / nodes:.1f} a "
                    f"node), driver peak {top / 2**20:6.2f} MiB ({per_node:.2f} KiB a node, "
                    f"{per_node / base[name]:.2f}x of 250 nodes'), {len(found)} findings")
            if nodes <= 500 and name != "reachability":
                old = (peak(all_pairs_storage, nodes) if name == "storage trial"
                       else peak(all_pairs_ports, ctx, nodes))
                line += (f"; all pairs: {nodes * (nodes - 1)} pairs, {old / 2**20:.0f} MiB "
                         f"({old / nodes / 1024:.0f} KiB a node)")
            print(line, flush=True)
    base = None
    for nodes in (250, 500, 1000, 2000):
        with tempfile.TemporaryDirectory() as scratch:
            tracemalloc.start()
            found, text = whole(nodes, Path(scratch))
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        per_node = top / nodes / 1024
        base = base or per_node
        print(f"{nodes:5d} nodes, all of preflight's driver side: peak {top / 2**20:6.1f} MiB "
              f"({per_node:.1f} KiB a node, {per_node / base:.2f}x of 250 nodes'), preflight.json "
              f"{len(text) / 2**20:.1f} MiB, {len(found)} findings", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
