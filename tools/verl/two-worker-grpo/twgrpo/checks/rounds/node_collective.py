"""Each node's own collective, before the cross-node round: do a node's GPUs meet each other?

The cross-node probe (collective.py) puts one rank on each node, so the paths between a node's
own GPUs (PCIe P2P, NVLink, NVSwitch: what training uses most) are never exercised before
training; a broken one hangs the first step until NCCL's watchdog (verl #3350). Here, on every
GPU node at once, one task per local GPU (a GPU each) forms a group of that node's GPUs and runs
collective_rank.py's stages (rendezvous through the run folder, init, a 1-element and a 64 MiB
all-reduce over NCCL, then Gloo), all within the collective timeout. A rank that fails or does
not finish is named with its node and stage; each node's bus bandwidth is recorded and a node
far below the others is named as degraded. COLLECTIVE_PROBE=gloo runs the same groups over Gloo
(the test clusters' stub GPUs), off skips it.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List

from ...run.findings import Finding, Skip, finding
from . import cluster
from .collective import _progress, gather, nccl_lines, reports
from ..nodeside.collective_rank import collective_rank
from ...run.runfolder import RunFolder

DEGRADED_RATIO = 0.5  # a node below half the nodes' median bus bandwidth slows every step
MAX_LOCAL_RANKS = 16


def check_node_collective(ctx) -> List[Finding]:
    if ctx.collective_mode == "off":
        raise Skip("COLLECTIVE_PROBE=off")
    nodes = [(o, r) for o, r in ctx.answered() if r.get("sentinel_ok") and ctx.is_gpu_node(o)]
    if not nodes:
        raise Skip("no GPU node shares the run folder (shared-storage says why)")
    nccl = ctx.collective_mode == "nccl"
    seconds = ctx.collective_timeout
    jobs, folders, worlds = [], {}, {}
    for ordinal, report in nodes:
        world = min(int(ctx.nodes[ordinal].get("Resources", {}).get("GPU", 0)), MAX_LOCAL_RANKS)
        folder = RunFolder(ctx.run_dir).preflight_node_collective / f"node-{ordinal}"
        folder.mkdir(parents=True, exist_ok=True)
        folders[ordinal], worlds[ordinal] = folder, world
        for rank in range(world):
            spec = {"rank": rank, "world": world, "ordinal": ordinal, "folder": str(folder),
                    "token": ctx.token.strip(), "seconds": seconds, "nccl": nccl}
            jobs.append(cluster.Job((ordinal, rank), report["node_id"], (spec,)))
    answers = gather(ctx.ray, cluster.remote_task(ctx.ray, collective_rank, num_gpus=1), jobs,
                     seconds)
    results = reports(answers, {job.key: job.key[0] for job in jobs})
    waited = answers.seconds
    for ordinal, rank in answers.late:
        results[(ordinal, rank)] = {"late": True, **_progress(folders[ordinal], rank, ctx.token.strip())}
    record = ctx.node_collective
    record.update(backend="nccl+gloo" if nccl else "gloo", seconds=round(waited, 3), nodes=[])
    found = []
    for ordinal, _ in nodes:
        ranks = {rank: results.get((ordinal, rank), {}) for rank in range(worlds[ordinal])}
        found += judge_node(ctx.node_name(ordinal), ranks, folders[ordinal], waited)
        rates = [r["bus_gbps"] for r in ranks.values() if r.get("bus_gbps") is not None]
        record["nodes"].append({"ordinal": ordinal, "world": worlds[ordinal],
                                "bus_gbps": min(rates) if rates else None,
                                "stages": {rank: r.get("stage") for rank, r in ranks.items()}})
    return found + judge_degraded(ctx, record["nodes"])


def judge_node(name: str, ranks: Dict[int, Dict[str, Any]], folder, waited: float) -> List[Finding]:
    world, found = len(ranks), []
    for rank, result in sorted(ranks.items()):
        where = f"{name} local rank {rank} of {world}"
        lines = nccl_lines(folder / f"nccl-{rank}.log")
        tail = f"; NCCL: {' | '.join(lines)}" if lines else ""
        if result.get("late"):
            found.append(finding("PRE-E211", where, "the node's own collective across its "
                                 f"{world} GPUs had not finished when preflight stopped waiting "
                                 f"({waited:.0f} s): its last stage was "
                                 f"{result.get('stage') or 'none (the task never started)'}{tail}",
                                 stage=result.get("stage"), nccl_lines=lines))
        elif "error" in result:
            found.append(finding("PRE-E210", where, "the node's own collective across its "
                                 f"{world} GPUs failed after stage {result.get('stage') or 'none'}: "
                                 f"{result['error']}{tail}", stage=result.get("stage"),
                                 nccl_lines=lines))
        else:
            wrong = [(key, result.get(key)) for key in ("small_sum", "gloo_sum")
                     if result.get(key) != float(world)]
            if result.get("big_ok") is False:
                wrong.append(("64 MiB all-reduce", "wrong values"))
            if wrong:
                found.append(finding("PRE-E212", where, f"the all-reduce of ones over the node's "
                                     f"{world} GPUs gave {wrong} instead of {world}"))
    return found


def judge_degraded(ctx, nodes: List[Dict[str, Any]]) -> List[Finding]:
    """A node whose own bus bandwidth is far below the other nodes' (same GPUs per node)."""
    rates = [n["bus_gbps"] for n in nodes if n.get("bus_gbps")]
    if len(rates) < 2:
        return []
    median = statistics.median(rates)
    return [finding("PRE-W102", ctx.node_name(n["ordinal"]), f"its GPUs all-reduce at "
                    f"{n['bus_gbps']:g} GB/s bus bandwidth, below {DEGRADED_RATIO:g} x the nodes' "
                    f"median {median:g} GB/s: every step waits for the slowest node",
                    bus_gbps=n["bus_gbps"], median=median)
            for n in nodes if n.get("bus_gbps") and n["bus_gbps"] < DEGRADED_RATIO * median]
