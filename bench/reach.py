#!/usr/bin/env python3
"""Summary: preflight's reachability round at 250 to 2,000 simulated nodes, without Ray: the
pairs tried, the peer files read, and the driver's memory for the plan, the nodes' reports (as
reach_from returns them, every connection good) and their judging, against all pairs.

Usage: bench/reach.py [SCRATCH]
The driver's memory must grow linearly with the nodes (the per-node figure stays flat). The
all-pairs reports of the former round are simulated up to 500 nodes only (they grow with the
square of the nodes: 1.6 GB at 2,000).
"""
import sys
import tracemalloc
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tools" / "verl" / "two-worker-grpo")]
from twgrpo.checks.rounds import reach  # noqa: E402


class Ctx:
    @staticmethod
    def node_name(ordinal):
        return f"node {ordinal} (worker node-{ordinal:04d})"


def report(ordinal, targets, incoming):
    return {"ordinal": ordinal, "address": f"10.{ordinal >> 8}.{ordinal & 255}.1", "interface": "ib0",
            "port": 40000 + ordinal, "ok": len(targets), "failed": {}, "failed_count": 0,
            "incoming": incoming}


def all_pairs_report(ordinal, nodes):
    return {"ordinal": ordinal, "address": "10.0.0.1", "interface": "ib0", "port": 40000,
            "outgoing": {str(p): {"target": f"10.{p >> 8}.{p & 255}.1:{40000 + p}", "ok": True}
                         for p in range(nodes) if p != ordinal}, "incoming": list(range(nodes - 1))}


def main() -> int:
    for nodes in (250, 500, 1000, 2000):
        tracemalloc.start()
        targets = reach.plan(list(range(nodes)), "exp token")
        incoming = reach.expected_incoming(targets)
        results = {o: report(o, targets[o], incoming[o]) for o in targets}
        found = reach.judge(Ctx(), results)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        pairs = sum(len(t) for t in targets.values())
        line = (f"{nodes:5d} nodes: {pairs:6d} pairs tried ({pairs / nodes:.1f} a node), {pairs:6d} "
                f"peer files read, driver peak {peak / 2**20:6.2f} MiB ({peak / nodes / 1024:.2f} KiB "
                f"a node), {len(found)} findings")
        if nodes <= 500:
            tracemalloc.start()
            old = {o: all_pairs_report(o, nodes) for o in range(nodes)}
            _, old_peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            del old
            line += (f"; all pairs: {nodes * (nodes - 1)} pairs, {old_peak / 2**20:.0f} MiB "
                     f"({old_peak / nodes / 1024:.0f} KiB a node)")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
