"""Preflight's judgement of each node's operating system (probe_system.py answers on the node):
/dev/shm, the open-file limit, memory and space against the profile's needs, GPUs already in
use, the same low-level versions on every node and the pinned verl's minimums. The network
identity is node_network.py's.

ctx is preflight's context (ctx.answered(), ctx.node_name(), ctx.nodes, ctx.profile, ctx.ray).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...run.findings import Finding, Skip, finding, mismatch

GIB = 1 << 30
MIB = 1 << 20
SHM_PER_GPU = 256 * MIB  # NCCL's SHM segments and the rollout engine's broadcast buffers
SHM_MIN = 512 * MIB
NOFILE_MIN = 8192  # verl #2047: 1024 breaks Ray; KubeRay and NeMo-RL start Ray with 65536
NOFILE_PER_CPU = 32
NOFILE_ADVISED = 65536
HEADROOM = 1.3
PROCESS_BASE = 1 * GIB  # one Ray worker process with torch imported, per GPU
FILES_PER_RANK = 3  # model, optim and extra_state shards per rank and save
CHECKPOINT_FACTOR = 7  # weights (2 B/param) -> HF copy 2 + fp32 shards 4 + Adam 8 = 14 B/param


def _system(ctx, at_least: int = 1):
    return [(o, r, r.get("system") or {}) for o, r in ctx.answered(at_least)]


def check_shared_memory(ctx) -> List[Finding]:
    need = max(SHM_MIN, SHM_PER_GPU * ctx.profile.GPUS_PER_NODE)
    found = []
    for ordinal, report, system in _system(ctx):
        shm, name = system.get("shm", {}), ctx.node_name(ordinal)
        if "free_bytes" not in shm:
            found.append(finding("PRE-E048", name, f"/dev/shm cannot be read: {shm.get('error')}"))
            continue
        if shm["free_bytes"] < need:
            found.append(finding("PRE-E048", name, f"/dev/shm has {shm['free_bytes'] // MIB} MiB "
                                 f"free, less than {need // MIB} MiB ({SHM_PER_GPU // MIB} MiB x "
                                 f"{ctx.profile.GPUS_PER_NODE} GPUs)", free=shm["free_bytes"], need=need))
            continue
        store = ctx.nodes[ordinal].get("Resources", {}).get("object_store_memory")
        if store and shm["free_bytes"] < store:
            found.append(finding("PRE-W012", name, f"/dev/shm has {shm['free_bytes'] // MIB} MiB free, "
                                 f"less than Ray's object store there ({int(store) // MIB} MiB)"))
    return found


def check_open_files(ctx) -> List[Finding]:
    found = []
    for ordinal, report, system in _system(ctx):
        soft = system.get("nofile", {}).get("soft")
        if soft is None or soft < 0:  # RLIM_INFINITY
            continue
        cpus = ctx.nodes[ordinal].get("Resources", {}).get("CPU", 0)
        need = max(NOFILE_MIN, int(NOFILE_PER_CPU * cpus))
        name = ctx.node_name(ordinal)
        if soft < need:
            found.append(finding("PRE-E049", name, f"ulimit -n in the Ray worker is {soft}, less "
                                 f"than {need} (max of {NOFILE_MIN} and {NOFILE_PER_CPU} x "
                                 f"{cpus:g} Ray CPUs)", soft=soft, need=need))
        elif soft < NOFILE_ADVISED:
            found.append(finding("PRE-W013", name, f"ulimit -n in the Ray worker is {soft}, less "
                                 f"than the {NOFILE_ADVISED} Ray clusters are usually started with"))
    return found


def weights_bytes(ctx) -> int:
    try:
        return (Path(ctx.model_root) / ctx.profile.MODEL_WEIGHTS).stat().st_size
    except OSError:
        return 0


def memory_need(profile, weights: int) -> int:
    """Host memory one node needs: a CPU copy of the weights per rank at load, the offloaded fp32
    parameters and Adam states of its ranks' shards, a baseline per process; 30 % headroom."""
    params = weights / 2  # bf16 safetensors
    offload = (4 if profile.PARAM_OFFLOAD == "true" else 0) + (8 if profile.OPTIMIZER_OFFLOAD == "true" else 0)
    per_node = profile.GPUS_PER_NODE * (weights + PROCESS_BASE) + params * offload / profile.NODES
    return int(per_node * HEADROOM)


def check_host_memory(ctx) -> List[Finding]:
    weights = weights_bytes(ctx)
    need = memory_need(ctx.profile, weights)
    found = []
    for ordinal, report, system in _system(ctx):
        mem, name = system.get("memory", {}), ctx.node_name(ordinal)
        have = [v for v in (mem.get("MemAvailable"), mem.get("cgroup_limit")) if v]
        if not have:
            continue
        if min(have) < need:
            what = "cgroup limit" if mem.get("cgroup_limit") == min(have) else "MemAvailable"
            found.append(finding("PRE-E050", name, f"{what} {min(have) / GIB:.1f} GiB is less than "
                                 f"the {need / GIB:.1f} GiB this profile needs per node", need=need,
                                 memory=mem, weights_bytes=weights))
    return found


def saves(profile) -> int:
    return profile.TARGET_STEPS // profile.SAVE_FREQ + (1 if profile.TARGET_STEPS % profile.SAVE_FREQ else 0)


def check_storage_space(ctx) -> List[Finding]:
    p = ctx.profile
    count = saves(p)
    need_bytes = int(weights_bytes(ctx) * CHECKPOINT_FACTOR * count * 1.2) + GIB
    need_inodes = count * (FILES_PER_RANK * p.world_size + 50) + 1000
    found = []
    for ordinal, report, system in _system(ctx):
        st, name = system.get("storage", {}), ctx.node_name(ordinal)
        if "free_bytes" not in st:
            continue  # shared-storage and storage-mount say why the root cannot be read
        if st["free_bytes"] < need_bytes:
            found.append(finding("PRE-E051", name, f"{st['path']} has {st['free_bytes'] / GIB:.1f} GiB "
                                 f"free, less than {need_bytes / GIB:.1f} GiB for {count} checkpoint "
                                 "saves", free=st["free_bytes"], need=need_bytes))
        if st.get("total_inodes") and st["free_inodes"] < need_inodes:
            found.append(finding("PRE-E052", name, f"{st['path']} has {st['free_inodes']} free inodes, "
                                 f"fewer than {need_inodes} for {count} checkpoint saves"))
    return found


def check_gpu_processes(ctx) -> List[Finding]:
    found = []
    for ordinal, report, system in _system(ctx):
        ours = {g["uuid"] for g in report["gpu_query"].get("gpus", [])}
        apps = [a for a in system.get("compute_apps", {}).get("apps", []) if a["gpu_uuid"] in ours]
        if apps:
            listed = "; ".join(f"pid {a['pid']} {a['name']} {a['used_mib']} MiB on {a['gpu_uuid']}"
                               for a in apps[:8])
            found.append(finding("PRE-E054", ctx.node_name(ordinal), f"{len(apps)} process(es) "
                                 f"already use the GPUs Ray gave the probe: {listed}", apps=apps[:32]))
    return found


def check_gpus_free(ctx) -> List[Finding]:
    """Ray's available GPUs per node against its total: another job or leftover actors hold some."""
    ctx.connected()
    state = getattr(getattr(ctx.ray, "_private", None), "state", None)
    per_node = getattr(getattr(state, "state", None), "available_resources_per_node", None)
    if per_node is None:
        raise Skip("this Ray has no per-node available resources")
    available = per_node()
    found = []
    for ordinal, node in enumerate(ctx.nodes):
        total = node.get("Resources", {}).get("GPU", 0)
        free = available.get(node.get("NodeID"), {}).get("GPU", 0)
        if total and free < total:
            found.append(finding("PRE-E053", ctx.node_name(ordinal), f"{total - free:g} of {total:g} "
                                 "Ray GPUs are already held by another job or leftover actors "
                                 "(ray status lists them)", total=total, available=free))
    return found


def _driver(report: Dict[str, Any]) -> str:
    return ", ".join(sorted({g["driver"] for g in report["gpu_query"].get("gpus", [])})) or "none"


def check_same_versions(ctx) -> List[Finding]:
    answered = _system(ctx, at_least=2)
    (base_ordinal, base, base_system), found = answered[0], []
    base_name = ctx.node_name(base_ordinal)
    # The driver is compared among GPU nodes only: a CPU-only node (a KubeRay head) has none.
    gpu_ordinals = [o for o, _, _ in answered if getattr(ctx, "is_gpu_node", lambda _: True)(o)]
    driver_base = next((r for o, r, _ in answered if o in gpu_ordinals), base)
    driver_base_name = ctx.node_name(gpu_ordinals[0]) if gpu_ordinals else base_name
    for ordinal, report, system in answered[1:]:
        name = ctx.node_name(ordinal)
        if ordinal in gpu_ordinals[1:] and _driver(report) != _driver(driver_base):
            found.append(mismatch("PRE-E055", name, f"NVIDIA driver (vs {driver_base_name})",
                                  _driver(driver_base), _driver(report)))
        want, have = base_system.get("versions", {}), system.get("versions", {})
        for key in sorted(set(want) | set(have)):
            if want.get(key) != have.get(key):
                found.append(mismatch("PRE-E056", name, f"{key} version (vs {base_name})",
                                      want.get(key) or "absent", have.get(key) or "absent"))
    return found


REQUIREMENT = re.compile(r"[\"'](?P<dist>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*(?P<version>\d+(?:\.\d+){0,3})")
FLOORED = ("ray", "torch", "transformers")


def version_floors(verl_root: Path) -> Dict[str, str]:
    """`pkg>=X` minimums from the pinned verl's setup.py / requirements.txt (FLOORED only)."""
    floors: Dict[str, str] = {}
    for file in ("setup.py", "requirements.txt"):
        try:
            text = (verl_root / file).read_text(encoding="utf-8", errors="replace")[:200000]
        except OSError:
            continue
        if file == "requirements.txt":
            text = "\n".join(f"'{line.strip()}'" for line in text.splitlines())
        for match in REQUIREMENT.finditer(text):
            if match["dist"].lower() in FLOORED:
                floors.setdefault(match["dist"].lower(), match["version"])
    return floors


def _tuple(version: str) -> Optional[tuple]:
    match = re.match(r"^(\d+(?:\.\d+){0,3})", version or "")
    if not match:
        return None
    numbers = [int(x) for x in match.group(1).split(".")]
    return tuple(numbers + [0] * (4 - len(numbers)))


def check_version_floors(ctx) -> List[Finding]:
    floors = version_floors(Path(ctx.verl_root))
    if not floors:
        raise Skip(f"no setup.py or requirements.txt with minimums under {ctx.verl_root}")
    found = []
    for ordinal, report in ctx.answered():
        for dist, floor in sorted(floors.items()):
            have = (report.get("packages", {}).get(dist) or {}).get("version")
            if have and _tuple(have) is not None and _tuple(have) < _tuple(floor):
                found.append(finding("PRE-E057", ctx.node_name(ordinal), f"{dist} {have} is older "
                                     f"than the {floor} the pinned verl requires", expected=f">= {floor}",
                                     actual=have))
    return found
