"""Between the nodes, through one small actor on each: Ray's own ports and the clocks.

reach.py proves TCP on the address NCCL will use; Ray itself moves objects and starts workers
through each node's node-manager and object-manager ports (and its runtime-env agent's), which
a firewall or network policy can block while small task replies still pass (ray #7632, #28191).
Each node's actor connects to its planned peers' Ray ports (peers.plan: every other node's on a
few nodes, a ring and random peers on many, so the driver never lists all pairs). The same actors answer the driver's
clock, sampled a few times: the offset with the shortest round trip is kept, and a node whose
clock is off by more than the bound is named (awsome-distributed-ai #180: timeouts from drift).
"""
from __future__ import annotations

import socket
import time
from typing import Any, Dict, List, Tuple

from ...run.findings import Finding, finding
from ..nodeside import isolated
from . import peers

AGENT_SECONDS = 20.0
CONNECT_SECONDS = 3.0
CLOCK_SAMPLES = 5
CLOCK_SKEW_SECONDS = 2.0
PORT_KEYS = (("NodeManagerPort", "node manager"), ("ObjectManagerPort", "object manager"),
             ("RuntimeEnvAgentPort", "runtime-env agent"))


class NodeAgent:
    def now(self) -> float:
        return time.time()

    def connect(self, targets: List[Tuple[str, int, str]]) -> List[Dict[str, Any]]:
        failed = []
        for host, port, label in targets[:64]:
            try:
                with socket.create_connection((host, port), timeout=CONNECT_SECONDS):
                    pass
            except OSError as exc:
                failed.append({"host": host, "port": port, "label": label,
                               "error": f"{type(exc).__name__}: {exc}"[:200]})
        return failed


def targets_of(ctx, ordinal: int, others: List[int]) -> List[Tuple[str, int, str]]:
    """The Ray ports of the nodes others names, as ray.nodes() advertises them."""
    found = []
    for other in others:
        node = ctx.nodes[other]
        if other == ordinal:
            continue
        for key, label in PORT_KEYS:
            port = node.get(key)
            if isinstance(port, int) and 0 < port < 65536:
                found.append((str(node.get("NodeManagerAddress")), port, f"{label} of node {other}"))
    return found


def check_node_agents(ctx) -> List[Finding]:
    nodes = ctx.answered(at_least=2)
    ray = ctx.ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    import twgrpo
    ray.cloudpickle.register_pickle_by_value(twgrpo)
    agent_class = ray.remote(num_cpus=0, max_restarts=0)(isolated.actor(ray, NodeAgent))
    agents = {o: agent_class.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id=r["node_id"], soft=False)).remote() for o, r in nodes}
    plan = peers.plan(list(agents), ctx.run_id)
    ctx.peer_plans["ray-ports"] = peers.record(plan, ctx.run_id)
    deadline = time.monotonic() + AGENT_SECONDS
    found: List[Finding] = []
    try:
        refs = {agents[o].call.remote("connect", targets_of(ctx, o, plan[o])): o for o in agents}
        clocks = {o: _clock(ray, agent, deadline) for o, agent in agents.items()}
        ready, late = ray.wait(list(refs), num_returns=len(refs),
                               timeout=max(deadline - time.monotonic(), 1))
        ports = {}
        for ref in ready:
            try:
                ports[refs[ref]] = ray.get(ref)
            except Exception as exc:  # the actor died: evidence, not a crash of preflight
                ports[refs[ref]] = [{"label": "the agent", "error": f"{type(exc).__name__}"}]
        for ref in late:
            ports[refs[ref]] = [{"label": "the agent", "error": "no answer in time"}]
    finally:
        for agent in agents.values():
            ray.kill(agent)
    ctx.agents_record = {"seconds": round(AGENT_SECONDS - (deadline - time.monotonic()), 3),
                         "clock_offsets": {str(o): c for o, c in clocks.items()},
                       "unreachable": {str(o): p for o, p in ports.items() if p}}
    found += judge_ports(ctx, ports)
    for ordinal, clock in sorted(clocks.items()):
        if clock.get("offset") is not None and abs(clock["offset"]) - clock["uncertainty"] > CLOCK_SKEW_SECONDS:
            found.append(finding("PRE-W104", ctx.node_name(ordinal), f"its clock is "
                                 f"{clock['offset']:+.1f} s off the driver's (+/- "
                                 f"{clock['uncertainty']:.2f} s): is NTP running there?", **clock))
    return found


def judge_ports(ctx, ports: Dict[int, List[Dict[str, Any]]]) -> List[Finding]:
    found = []
    for ordinal, failed in sorted(ports.items()):
        if failed:
            listed = "; ".join(f"{f['label']} at {f.get('host', '?')}:{f.get('port', '?')} "
                               f"({f['error']})" for f in failed[:6])
            found.append(finding("PRE-E227", ctx.node_name(ordinal), f"cannot connect to "
                                 f"{len(failed)} of the other nodes' Ray ports: {listed}",
                                 failed=failed[:32]))
    return found


def _clock(ray, agent, deadline: float) -> Dict[str, Any]:
    """The offset of the node's wall clock from this one's, at the shortest round trip."""
    best = None
    for _ in range(CLOCK_SAMPLES):
        before = time.time()
        try:
            remote = ray.get(agent.call.remote("now"), timeout=max(deadline - time.monotonic(), 0.5))
        except Exception:  # a dead or slow agent: the port check names it
            break
        after = time.time()
        sample = (after - before, remote - (before + after) / 2)
        best = sample if best is None or sample[0] < best[0] else best
    if best is None:
        return {"offset": None, "uncertainty": None}
    return {"offset": round(best[1], 3), "uncertainty": round(best[0] / 2, 3)}

