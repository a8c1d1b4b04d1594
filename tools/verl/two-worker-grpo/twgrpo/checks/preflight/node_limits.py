"""Preflight's judgement of what each node's Ray worker may use (limits_probe.py answers on the
node): process and thread limits, locked memory on IB profiles, Ray's session and spill space,
one address family for Gloo, one MTU on the interfaces NCCL uses, and on IB profiles the RoCE
GID each node's ports hold at the profile's NCCL_IB_GID_INDEX and links that went down.

ctx is preflight's context (ctx.answered(), ctx.node_name(), ctx.profile, ctx.is_gpu_node()).
"""
from __future__ import annotations

from typing import Any, Dict, List

from ...run.findings import Finding, Skip, finding
from .network import hca_selected

MIB, GIB = 1 << 20, 1 << 30
# verl #719: a worker that cannot start threads hangs; each GPU's trainer, rollout engine and
# Ray's own threads take hundreds (torch, gRPC, OpenMP pools).
PROCS_BASE = 2048
PROCS_PER_GPU = 1024
MEMLOCK_MIN = 1 * GIB  # NCCL registers its IB buffers; 64 KiB / 8 MiB / 64 MiB defaults fail
RAY_FULL = 0.90  # Ray stops creating objects at 95 % full (file_system_monitor)
RAY_FREE_MIN = 256 * MIB


def majority(values: List[Any]) -> Any:
    """The value most nodes have; on a tie the first node's (the head's), so with two nodes
    the other one is named."""
    return max(values, key=values.count)


def _limits(ctx):
    return [(o, r, r.get("limits") or {}) for o, r in ctx.answered()]


def check_process_limits(ctx) -> List[Finding]:
    """ulimit -u (RLIMIT_NPROC) and the cgroup's pids.max against the threads a node's ranks need."""
    need = PROCS_BASE + PROCS_PER_GPU * ctx.profile.GPUS_PER_NODE
    found = []
    for ordinal, _, limits in _limits(ctx):
        name = ctx.node_name(ordinal)
        soft = (limits.get("nproc") or {}).get("soft")
        if soft is not None and soft < need:
            # The kernel does not hold root (of the host's user namespace) to RLIMIT_NPROC.
            root = limits.get("uid") == 0
            found.append(finding("PRE-W105" if root else "PRE-E220", name, f"ulimit -u (processes "
                                 f"and threads) in the Ray worker is {soft}, less than {need} "
                                 f"({PROCS_BASE} + {PROCS_PER_GPU} x {ctx.profile.GPUS_PER_NODE} GPUs)"
                                 + ("; the worker runs as root, which the kernel exempts unless "
                                    "the container maps root to another user" if root else ""),
                                 soft=soft, need=need, uid=limits.get("uid")))
        pids = limits.get("pids") or {}
        if pids.get("max") is not None and pids["max"] < need:
            found.append(finding("PRE-E221", name, f"the cgroup's pids.max is {pids['max']} "
                                 f"({pids.get('current')} in use, {pids.get('path')}), less than "
                                 f"{need} processes and threads", pids=pids, need=need))
    return found


def check_locked_memory(ctx) -> List[Finding]:
    answered = _limits(ctx)
    if ctx.profile.NCCL_TRANSPORT != "ib":
        raise Skip("NCCL_TRANSPORT=socket: nothing registers memory for RDMA")
    found = []
    for ordinal, _, limits in answered:
        soft = (limits.get("memlock") or {}).get("soft", 0)
        if ctx.is_gpu_node(ordinal) and soft is not None and soft < MEMLOCK_MIN:
            found.append(finding("PRE-E222", ctx.node_name(ordinal), f"ulimit -l (locked memory) "
                                 f"in the Ray worker is {soft // 1024} KiB: NCCL cannot register "
                                 "its InfiniBand buffers (ibv_reg_mr: Cannot allocate memory)",
                                 soft=soft, need=MEMLOCK_MIN))
    return found


def check_ray_space(ctx) -> List[Finding]:
    """Free space where each node's Ray keeps its session and spills objects."""
    found = []
    for ordinal, _, limits in _limits(ctx):
        session = (limits.get("ray_dirs") or {}).get("session") or {}
        total, free = session.get("total_bytes"), session.get("free_bytes")
        if not total or free is None:
            continue
        used = 1 - free / total
        if used >= RAY_FULL or free < RAY_FREE_MIN:
            found.append(finding("PRE-E223", ctx.node_name(ordinal), f"Ray's session folder "
                                 f"{session['path']} is {used:.0%} full ({free // MIB} MiB free): "
                                 "Ray stops creating objects at 95 % and cannot spill",
                                 free=free, total=total))
    return found


def check_address_families(ctx) -> List[Finding]:
    """Gloo connects ranks with the address their hostname resolves to first: IPv4 on one node
    and IPv6 on another never meet (ss1.ss_family == ss2.ss_family)."""
    answered = [(o, r, l) for o, r, l in _limits(ctx) if l.get("families")]
    if len(answered) < 2:
        raise Skip("fewer than two nodes resolved their hostname")
    gloo_if = {o for o, r, _ in answered
               if ((r.get("system") or {}).get("network") or {}).get("socket_env", {}).get("GLOO_SOCKET_IFNAME")}
    firsts = {o: l["families"][0] for o, _, l in answered if o not in gloo_if}
    if len(set(firsts.values())) < 2:
        return []
    common = majority([firsts[o] for o in sorted(firsts)])
    return [finding("PRE-E224", ctx.node_name(o), f"its hostname resolves first to {family}, "
                    f"the other nodes' to {common}: Gloo cannot connect ranks of two address "
                    "families", families=[l for oo, _, l in answered if oo == o][0]["families"])
            for o, family in sorted(firsts.items()) if family != common]


def _nccl_interface(report: Dict[str, Any], limits: Dict[str, Any]):
    """The interface NCCL's socket transport binds (reach.nccl_address's rule): the first that is
    up with an IPv4 address and matches NCCL_SOCKET_IFNAME, else the one holding the node IP."""
    named = (report.get("env") or {}).get("NCCL_SOCKET_IFNAME") or ""
    items = [i for i in limits.get("interfaces") or [] if i.get("up") and i.get("ipv4")]
    if named and not named.startswith("^"):
        exact, wanted = named.startswith("="), [w for w in named.lstrip("=").split(",") if w]
        for item in items:
            if any(item["name"] == w if exact else item["name"].startswith(w) for w in wanted):
                return item
    return next((i for i in items if i["ipv4"] == report["node_ip"]), None)


def check_mtu(ctx) -> List[Finding]:
    """The interfaces NCCL will use carry the same MTU on every node (NVIDIA/nccl #1524)."""
    seen = [(o, _nccl_interface(r, l)) for o, r, l in _limits(ctx)]
    seen = [(o, i) for o, i in seen if i and i.get("mtu")]
    if len(seen) < 2:
        raise Skip("fewer than two nodes named the MTU of their NCCL interface")
    common = majority([i["mtu"] for _, i in seen])
    return [finding("PRE-E225", ctx.node_name(o), f"interface {i['name']} has MTU {i['mtu']}, the "
                    f"other nodes' {common}: large NCCL messages stall or fail between them",
                    mtu=i["mtu"], common=common)
            for o, i in seen if i["mtu"] != common]


def check_roce_gids(ctx) -> List[Finding]:
    """On IB profiles: each RoCE port NCCL uses holds a RoCE v2 GID at NCCL_IB_GID_INDEX (the
    index often differs between pods: NVIDIA/nccl #718), and no link went down (#1333)."""
    p, answered = ctx.profile, _limits(ctx)
    if p.NCCL_TRANSPORT != "ib":
        raise Skip("NCCL_TRANSPORT=socket: NCCL uses no RDMA port")
    found = []
    for ordinal, _, limits in answered:
        name = ctx.node_name(ordinal)
        for port in limits.get("rdma_ports") or []:
            if port.get("state") != "ACTIVE" or not hca_selected(p.NCCL_IB_HCA, port["device"], port["port"]):
                continue
            where = f"{port['device']} port {port['port']}"
            if port.get("link_downed"):
                found.append(finding("PRE-W103", name, f"{where} went down {port['link_downed']} "
                                     "time(s) since boot (link_downed): a flapping link stops "
                                     "NCCL mid-run", port=port))
            if port.get("link_layer") != "Ethernet" or p.NCCL_IB_GID_INDEX == "":
                continue
            gid = port["gids"].get(p.NCCL_IB_GID_INDEX)
            if gid is None or gid.get("type") != "RoCE v2":
                v2 = sorted((i for i, g in port["gids"].items()
                             if g.get("type") == "RoCE v2" and g.get("ipv4")), key=int)
                found.append(finding("PRE-E226", name, f"{where} has "
                                     f"{'no GID' if gid is None else gid.get('type') or 'an untyped GID'} "
                                     f"at NCCL_IB_GID_INDEX={p.NCCL_IB_GID_INDEX}; its RoCE v2 "
                                     f"IPv4 GID is at index {', '.join(v2) or 'none'}",
                                     gids=port["gids"]))
    return found
