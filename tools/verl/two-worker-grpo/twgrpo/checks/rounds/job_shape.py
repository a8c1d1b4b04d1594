"""The job's real shape, before training: can Ray place the resources verl 0.6.0 will ask for?

verl's TaskRunner is an actor of 1 CPU (main_ppo.py: @ray.remote(num_cpus=1)); its trainer then
asks, for each of the NODES nodes, a placement group of GPUS_PER_NODE bundles {"CPU": 1, "GPU":
1} with strategy STRICT_PACK (ray_trainer.py's ResourcePoolManager: max_colocate_count=1;
single_controller/ray/base.py: RayResourcePool.get_placement_groups) and waits for them without
a timeout. If the CPUs are short (Slurm or --num-cpus limits, other actors), the GPUs stay idle
and nothing says why (verl PR #6663, ray #47792). Here the same groups are created, awaited a
bounded time and removed; groups that cannot be placed are named with what each node lacks.
"""
from __future__ import annotations

import time
from typing import Dict, List

from ...run.findings import Finding, Skip, finding

CPUS_PER_BUNDLE = 1  # verl 0.6.0's max_colocate_count for FSDP
TASK_RUNNER_CPUS = 1
PLACEMENT_SECONDS = 20.0
SETTLE_SECONDS = 5.0


def bundles(profile) -> List[List[Dict[str, float]]]:
    """verl's placement groups: one per node, GPUS_PER_NODE bundles each."""
    bundle = {"CPU": float(CPUS_PER_BUNDLE), "GPU": 1.0}
    return [[dict(bundle) for _ in range(profile.GPUS_PER_NODE)] for _ in range(profile.NODES)]


def _available(ray) -> Dict[str, Dict[str, float]]:
    state = getattr(getattr(ray, "_private", None), "state", None)
    per_node = getattr(getattr(state, "state", None), "available_resources_per_node", None)
    return per_node() if per_node else {}


def check_job_shape(ctx) -> List[Finding]:
    ctx.connected()
    ray = ctx.ray
    from ray.util.placement_group import placement_group, remove_placement_group
    gpu_nodes = [n for i, n in enumerate(ctx.nodes) if ctx.is_gpu_node(i)]
    if len(gpu_nodes) != ctx.profile.NODES or any(
            n.get("Resources", {}).get("GPU") != ctx.profile.GPUS_PER_NODE for n in gpu_nodes):
        raise Skip("the cluster's GPUs are not the profile's (node-count and gpu-resources say how)")
    # Ray's view of free resources lags the probes that just released the GPUs: a few seconds.
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        free = _available(ray)  # before our groups take anything
        held = [n for n in gpu_nodes if free.get(n.get("NodeID"), {}).get("GPU", 0) < n["Resources"]["GPU"]]
        if not held or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if held:
        raise Skip("another job holds GPUs (gpus-free says which): verl could not start either")
    shape = bundles(ctx.profile)
    groups = [placement_group([{"CPU": float(TASK_RUNNER_CPUS)}], strategy="PACK",
                              name=f"twgrpo-preflight-{ctx.run_id}-taskrunner")]
    groups += [placement_group(b, strategy="STRICT_PACK", name=f"twgrpo-preflight-{ctx.run_id}-{i}")
               for i, b in enumerate(shape)]
    started = time.monotonic()
    try:
        ready, _ = ray.wait([g.ready() for g in groups], num_returns=len(groups),
                            timeout=ctx.placement_timeout)
    finally:
        for group in groups:
            try:
                remove_placement_group(group)
            except Exception:  # a group Ray already dropped; nothing of ours is left
                pass
    ctx.shape_record = {"groups": len(shape), "bundles_per_group": ctx.profile.GPUS_PER_NODE,
                     "bundle": shape[0][0] if shape and shape[0] else {},
                     "task_runner_cpus": TASK_RUNNER_CPUS, "placed": len(ready),
                     "seconds": round(time.monotonic() - started, 3)}
    if len(ready) == len(groups):
        return []
    return [finding("PRE-E215", "cluster", f"verl's placement groups ({ctx.profile.NODES} x "
                    f"{ctx.profile.GPUS_PER_NODE} bundles of {{CPU: {CPUS_PER_BUNDLE}, GPU: 1}}, "
                    f"STRICT_PACK, and the TaskRunner's {TASK_RUNNER_CPUS} CPU) could not be placed "
                    f"within {ctx.placement_timeout:g} s: {missing(ctx, free)}",
                    available=free, groups=len(groups), placed=len(ready))]


def missing(ctx, free: Dict[str, Dict[str, float]]) -> str:
    """What each GPU node lacks for its group, from Ray's free resources before the groups."""
    gpus = ctx.profile.GPUS_PER_NODE
    need_cpus = gpus * CPUS_PER_BUNDLE
    short = []
    for ordinal, node in enumerate(ctx.nodes):
        if not ctx.is_gpu_node(ordinal):
            continue
        have = free.get(node.get("NodeID"), {})
        cpus, gpus_free = have.get("CPU", 0.0), have.get("GPU", 0.0)
        total_cpus = node.get("Resources", {}).get("CPU", 0.0)
        if cpus < need_cpus:
            short.append(f"{ctx.node_name(ordinal)} has {cpus:g} of {total_cpus:g} CPUs free, "
                         f"its group needs {need_cpus:g}"
                         + (f" while its {gpus_free:g} GPUs are free" if gpus_free >= gpus else ""))
        elif gpus_free < gpus:
            short.append(f"{ctx.node_name(ordinal)} has {gpus_free:g} GPUs free, its group needs {gpus}")
    spare = sum(max(free.get(n.get("NodeID"), {}).get("CPU", 0.0) -
                    (need_cpus if ctx.is_gpu_node(i) else 0), 0) for i, n in enumerate(ctx.nodes))
    if not short and spare < TASK_RUNNER_CPUS:
        short.append(f"no CPU is left for the TaskRunner beside the groups ({spare:g} spare)")
    return "; ".join(short) or "Ray placed some groups only (ray status lists the pending ones)"
