"""The preflight phase: is the Ray cluster the one the profile describes, before any GPU time?

Connects to the running cluster (never starts one), sends one probe pinned to each live node,
all in flight at once, waits a bounded time, and judges what came back. Writes preflight.json
(status passed or failed) and prints one WORKER_TOPOLOGY line per node that answered.
"""
from __future__ import annotations

import dataclasses
import json
import secrets
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...run import humane
from ..rounds import cluster, rayimport
from . import network
from ..rules import recipe, sizes
from ...run.command import FIXED_ENV, IB_ENV
from ...run.findings import Check, Finding, Skip, finding, mismatch
from ...run.phase import run_phase
from .node_reports import (check_shared_storage, check_gpus, check_driver_version, check_storage_mount,
                           check_nccl_env, check_rollout_engine, check_node_inputs, check_same_inputs, check_same_packages)
from ..nodeside.probe import probe_node
from ..rounds import collective, reach
from . import node_network, node_system
from . import gpu_health, node_limits
from ..rounds import job_shape, node_agents, node_collective, storage_trial
from ...run.profile import Profile
from ...run.profile_keys import ROLLOUT_ENGINES
from ...run.records import write_text
from ...run.runfolder import RunFolder


@dataclasses.dataclass
class PreflightContext:
    profile: Profile
    run_id: str
    run_dir: Path
    storage_root: Path
    verl_root: Path
    model_root: Path
    data_root: Path
    probe_timeout: float
    token: str = ""
    ray: Any = None
    nodes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    driver_node_id: str = ""
    cluster_resources: Dict[str, float] = dataclasses.field(default_factory=dict)
    reports: Dict[int, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    probe_seconds: float = 0.0
    reach_seconds: float = 0.0
    collective_timeout: float = collective.COLLECTIVE_SECONDS
    collective_mode: str = "nccl"  # nccl (and Gloo), gloo alone, or off
    collective: Dict[str, Any] = dataclasses.field(default_factory=collective.empty_record)
    node_collective: Dict[str, Any] = dataclasses.field(default_factory=dict)
    placement_timeout: float = job_shape.PLACEMENT_SECONDS
    shape_record: Dict[str, Any] = dataclasses.field(default_factory=dict)
    storage_bytes: int = storage_trial.TRIAL_BYTES
    storage_seconds: float = storage_trial.TRIAL_SECONDS
    storage_record: Dict[str, Any] = dataclasses.field(default_factory=dict)
    agents_record: Dict[str, Any] = dataclasses.field(default_factory=dict)
    peer_plans: Dict[str, Any] = dataclasses.field(default_factory=dict)  # round: peers.record()

    def node_name(self, ordinal: int) -> str:
        report = self.reports.get(ordinal) or {}
        host = report.get("hostname") or self.nodes[ordinal].get("NodeManagerHostname") or "?"
        role = "head" if self.nodes[ordinal]["NodeID"] == self.driver_node_id else "worker"
        return f"node {ordinal} ({role} {host} {self.nodes[ordinal].get('NodeManagerAddress')})"

    def is_gpu_node(self, ordinal: int) -> bool:
        """A Ray node with GPUs; others (a CPU-only head, CPU workers) are recorded and allowed,
        and NODES x GPUS_PER_NODE describes the GPU nodes alone."""
        return self.nodes[ordinal].get("Resources", {}).get("GPU", 0) > 0

    def connected(self) -> None:
        if self.ray is None:
            raise Skip("not connected to a Ray cluster")

    def answered(self, at_least: int = 1):
        """(ordinal, report) of every node whose probe answered; Skip if fewer than at_least."""
        self.connected()
        if len(self.reports) < at_least:
            raise Skip("no node probe answered" if not self.reports else
                       f"{len(self.reports)} node answered: nothing to compare it with")
        return sorted(self.reports.items())


def check_batch_sizes(ctx: PreflightContext) -> List[Finding]:
    return sizes.check_batch_sizes(ctx.profile)


def check_ray_connection(ctx: PreflightContext) -> List[Finding]:
    try:
        rayimport.extend_path()  # PYTHONPATH and the user site, after the standard library
        import ray
    except ImportError as exc:
        return [finding("PRE-E010", "driver", f"cannot import ray: {exc}")]
    try:
        ray.init(address="auto", ignore_reinit_error=True, log_to_driver=False,
                 logging_level="WARNING")
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError...
        return [finding("PRE-E011", "driver", f"ray.init(address='auto') failed: {exc}")]
    ctx.ray = ray
    ctx.driver_node_id = str(ray.get_runtime_context().get_node_id())
    ctx.cluster_resources = dict(ray.cluster_resources())
    live = [node for node in ray.nodes() if node.get("Alive")]
    head = [node for node in live if node.get("NodeID") == ctx.driver_node_id]
    others = sorted((node for node in live if node.get("NodeID") != ctx.driver_node_id),
                    key=lambda node: (str(node.get("NodeManagerAddress")), str(node.get("NodeID"))))
    ctx.nodes = head + others
    return []


def check_node_count(ctx: PreflightContext) -> List[Finding]:
    """NODES counts the live nodes with GPUs; nodes without (a CPU-only head) are allowed."""
    ctx.connected()
    gpu_nodes = [n for i, n in enumerate(ctx.nodes) if ctx.is_gpu_node(i)]
    if len(gpu_nodes) != ctx.profile.NODES:
        what = "live Ray nodes" if len(gpu_nodes) == len(ctx.nodes) else "live Ray nodes with GPUs"
        return [mismatch("PRE-E012", "cluster", what, ctx.profile.NODES, len(gpu_nodes),
                         nodes=[n.get("NodeManagerAddress") for n in gpu_nodes],
                         cpu_only_nodes=[n.get("NodeManagerAddress") for n in ctx.nodes
                                         if n not in gpu_nodes])]
    return []


def check_gpu_resources(ctx: PreflightContext) -> List[Finding]:
    ctx.connected()
    found = []
    for ordinal, node in enumerate(ctx.nodes):
        gpus = node.get("Resources", {}).get("GPU", 0)
        if gpus and gpus != ctx.profile.GPUS_PER_NODE:
            found.append(mismatch("PRE-E013", ctx.node_name(ordinal), "Ray GPUs on the node",
                                  ctx.profile.GPUS_PER_NODE, gpus))
    total = ctx.cluster_resources.get("GPU", 0)
    # With the wrong number of nodes the total is wrong too: node-count already says so.
    gpu_nodes = sum(ctx.is_gpu_node(i) for i in range(len(ctx.nodes)))
    if total != ctx.profile.world_size and gpu_nodes == ctx.profile.NODES:
        found.append(mismatch("PRE-E013", "cluster", "Ray GPUs in total", ctx.profile.world_size,
                              total))
    return found


def _probe_spec(ctx: PreflightContext, ordinal: int, node_id: str) -> Dict[str, Any]:
    return {"ordinal": ordinal, "node_id": node_id, "run_dir": str(ctx.run_dir),
            "token": ctx.token, "storage_root": str(ctx.storage_root),
            "verl_root": str(ctx.verl_root), "model_root": str(ctx.model_root),
            "data_root": str(ctx.data_root), "env_keys": sorted(set(FIXED_ENV) | set(IB_ENV)),
            "engine_module": ROLLOUT_ENGINES[ctx.profile.ROLLOUT_ENGINE],
            "profile_text": ctx.profile.to_text(),
            "profile_source": str(ctx.profile.path)}


def check_node_probes(ctx: PreflightContext) -> List[Finding]:
    """One probe per live node, hard affinity, all in flight; a bounded wait for all of them."""
    ctx.connected()
    found, jobs = [], []
    for ordinal, node in enumerate(ctx.nodes):
        node_id = str(node.get("NodeID"))
        if not cluster.usable_node_id(node_id):
            found.append(finding("PRE-E014", ctx.node_name(ordinal), f"node id {node_id!r} is "
                                 "not 56 hex digits, or is nil; no probe sent"))
            continue
        # Asking for all of the node's GPUs makes Ray name them in CUDA_VISIBLE_DEVICES, so the
        # probe judges exactly the GPUs verl will get there.
        gpus = node.get("Resources", {}).get("GPU", 0)
        jobs.append(cluster.Job(ordinal, node_id, (_probe_spec(ctx, ordinal, node_id),), gpus))
    answers = cluster.on_nodes(ctx.ray, cluster.remote_task(ctx.ray, probe_node), jobs,
                               ctx.probe_timeout)
    ctx.probe_seconds = answers.seconds
    for ordinal in answers.late:
        found.append(finding("PRE-E015", ctx.node_name(ordinal),
                             f"the probe did not answer within {ctx.probe_timeout:g} s"))
    for job in jobs:
        ordinal = job.key
        if ordinal in answers.errors:  # the node or its worker died: any Ray error is evidence
            exc = answers.errors[ordinal]
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            found.append(finding("PRE-E015", ctx.node_name(ordinal),
                                 f"the probe failed: {type(exc).__name__}: {first[:300]}"))
        elif ordinal in answers.values:
            found += received(ctx, ordinal, answers.values[ordinal])
    return found


def received(ctx: PreflightContext, ordinal: int, report: Dict[str, Any]) -> List[Finding]:
    """Keep a node's report; it must come from the node the probe was pinned to."""
    ctx.reports[ordinal] = report
    if report["node_id"] != report["expected_node_id"]:
        return [mismatch("PRE-E016", ctx.node_name(ordinal), "node the probe ran on",
                         report["expected_node_id"], report["node_id"])]
    return []


CONNECTED = ("ray-connection",)
PROBED = ("node-probes",)
CHECKS = [
    Check("batch-sizes", check_batch_sizes),
    *recipe.RULES,
    Check("ray-connection", check_ray_connection),
    Check("node-count", check_node_count, needs=CONNECTED),
    Check("gpu-resources", check_gpu_resources, needs=CONNECTED),
    Check("gpus-free", node_system.check_gpus_free, needs=CONNECTED),
    Check("node-probes", check_node_probes, needs=CONNECTED),
    Check("shared-storage", check_shared_storage, needs=PROBED),
    Check("gpus", check_gpus, needs=PROBED),
    Check("driver-version", check_driver_version, needs=PROBED),
    Check("storage-mount", check_storage_mount, needs=PROBED),
    Check("nccl-env", check_nccl_env, needs=PROBED),
    Check("nccl-passthrough", network.check_nccl_passthrough, needs=PROBED),
    Check("infiniband", network.check_infiniband, needs=PROBED),
    Check("rollout-engine", check_rollout_engine, needs=PROBED),
    Check("node-inputs", check_node_inputs, needs=PROBED),
    Check("same-inputs", check_same_inputs, needs=PROBED),
    Check("same-packages", check_same_packages, needs=PROBED),
    Check("hostname-resolution", node_network.check_hostname_resolution, needs=PROBED),
    Check("distinct-identity", node_network.check_distinct_identity, needs=PROBED),
    Check("interfaces", node_network.check_interfaces, needs=PROBED),
    Check("gpu-health", gpu_health.check_gpu_health, needs=PROBED),
    Check("xid-errors", gpu_health.check_xid_errors, needs=PROBED),
    Check("nvlink", gpu_health.check_nvlink, needs=PROBED),
    Check("process-limits", node_limits.check_process_limits, needs=PROBED),
    Check("locked-memory", node_limits.check_locked_memory, needs=PROBED),
    Check("ray-space", node_limits.check_ray_space, needs=PROBED),
    Check("address-families", node_limits.check_address_families, needs=PROBED),
    Check("mtu", node_limits.check_mtu, needs=PROBED),
    Check("roce-gids", node_limits.check_roce_gids, needs=PROBED),
    Check("job-shape", job_shape.check_job_shape, needs=CONNECTED),
    Check("ray-ports-and-clocks", node_agents.check_node_agents, needs=CONNECTED + PROBED),
    Check("storage-trial", storage_trial.check_storage_trial, needs=PROBED + ("shared-storage",)),
    # It meets the other nodes through the run folder: it needs the shared storage proved.
    Check("reachability", reach.check_reachability, needs=PROBED + ("shared-storage",)),
    # Each node's own GPUs first (one process per GPU), then one rank per node across them.
    Check("node-collective", node_collective.check_node_collective, needs=PROBED + ("shared-storage",)),
    # It runs even when reachability failed: NCCL's own lines say more about a blocked peer.
    Check("collective", collective.check_collective, needs=PROBED + ("shared-storage",)),
    Check("shared-memory", node_system.check_shared_memory, needs=PROBED),
    Check("open-files", node_system.check_open_files, needs=PROBED),
    Check("host-memory", node_system.check_host_memory, needs=PROBED),
    Check("storage-space", node_system.check_storage_space, needs=PROBED),
    Check("gpu-processes", node_system.check_gpu_processes, needs=PROBED),
    Check("same-versions", node_system.check_same_versions, needs=PROBED),
    Check("version-floors", node_system.check_version_floors, needs=PROBED),
    Check("port-range", node_network.check_port_range, needs=PROBED),
    Check("rdma-unused", node_network.check_rdma_unused, needs=PROBED),
]


def topology(ctx: PreflightContext) -> List[Dict[str, Any]]:
    """What postflight needs to map ranks to nodes: hostname, node id and IP per node."""
    rows = []
    for ordinal, report in sorted(ctx.reports.items()):
        gpus = report["gpu_query"].get("gpus", [])
        rows.append({"ordinal": ordinal, "node_id": report["node_id"],
                     "node_ip": report["node_ip"], "hostname": report["hostname"],
                     "is_head": report["node_id"] == ctx.driver_node_id,
                     "gpu_node": ctx.is_gpu_node(ordinal),
                     "gpu_names": [g["name"] for g in gpus], "gpu_count": len(gpus),
                     "driver": sorted({g["driver"] for g in gpus}),
                     "mount_source": (report.get("mount") or {}).get("source")})
    return rows


def run(folder: RunFolder, profile: Profile, storage_root: Path, *,
        verl_root: Optional[Path] = None, model_root: Optional[Path] = None,
        data_root: Optional[Path] = None, probe_timeout: float = 120.0,
        collective_timeout: float = collective.COLLECTIVE_SECONDS, collective_mode: str = "nccl") -> int:
    """The preflight phase into folder; the roots default to the profile's under storage_root.
    collective_mode: nccl (and Gloo), gloo alone, or off."""
    run_dir, run_id = folder.path, folder.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    ctx = PreflightContext(profile, run_id, run_dir, storage_root,
                           verl_root or profile.verl_root(storage_root),
                           model_root or profile.model_root(storage_root),
                           data_root or profile.data_root(storage_root),
                           probe_timeout, collective_timeout=collective_timeout,
                           collective_mode=collective_mode)
    ctx.token = f"{run_id} {secrets.token_hex(8)}\n"
    write_text(folder.shared_storage_sentinel, ctx.token)
    header = (f"profile {profile.PROFILE_NAME}: "
              f"{humane.topology(profile.NODES, profile.GPUS_PER_NODE, profile.GPU_MODEL)}")
    try:
        code, _ = run_phase("preflight", header, CHECKS, ctx, folder.preflight_json, lambda: {
            "run_id": run_id, "profile": profile.to_json(), "expected_nodes": profile.NODES,
            "expected_gpus_per_node": profile.GPUS_PER_NODE, "world_size": profile.world_size,
            "cluster_resources": ctx.cluster_resources, "driver_node_id": ctx.driver_node_id,
            "probe_seconds": round(ctx.probe_seconds, 3), "workers": topology(ctx),
            "reach_seconds": round(ctx.reach_seconds, 3), "collective": ctx.collective,
            "node_collective": ctx.node_collective, "job_shape": ctx.shape_record,
            "storage_trial": ctx.storage_record, "node_agents": ctx.agents_record,
            "peer_plans": ctx.peer_plans,
            "nodes": [ctx.reports.get(i) for i in range(len(ctx.nodes))]})
    finally:
        if ctx.ray is not None:
            ctx.ray.shutdown()
    for row in topology(ctx):
        print("WORKER_TOPOLOGY " + json.dumps(row, sort_keys=True), flush=True)
    return code
