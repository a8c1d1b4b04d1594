"""The profile's NCCL transport, before any GPU time: each node's InfiniBand devices and port
state (read on the node from /sys/class/infiniband, as ibstat does), and the NCCL variables the
profile passes through. NCCL_TRANSPORT=socket needs none of it (IB is forced off); with ib every
GPU node must have an active port on the HCAs NCCL_IB_HCA selects, the same count on each.

infiniband() runs on the node inside the probe (standard library only); the checks run on the
driver with preflight's context.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ...run.command import nccl_env
from ...run.findings import Finding, Skip, finding, mismatch

SYS_IB = Path("/sys/class/infiniband")
MAX_DEVICES = 64
MAX_PORTS = 16


def _small(path: Path) -> str:
    try:
        with open(path, "rb") as stream:
            return stream.read(256).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def infiniband(root: Path = SYS_IB) -> Dict[str, Any]:
    """{"devices": [{"name", "ports": [{"port", "state", "link_layer", "rate"}]}]}: the node's
    RDMA devices as the kernel lists them; no folder means no device (not an error)."""
    try:
        names = sorted(p.name for p in root.iterdir())[:MAX_DEVICES] if root.is_dir() else []
    except OSError as exc:
        return {"devices": [], "error": f"{root}: {exc.strerror}"}
    devices = []
    for name in names:
        ports = []
        try:
            numbers = sorted((p.name for p in (root / name / "ports").iterdir()),
                             key=lambda n: (len(n), n))[:MAX_PORTS]
        except OSError:
            numbers = []
        for number in numbers:
            port = root / name / "ports" / number
            state = _small(port / "state")  # "4: ACTIVE"
            ports.append({"port": int(number) if number.isdigit() else number,
                          "state": state.split(":", 1)[-1].strip(),
                          "link_layer": _small(port / "link_layer"), "rate": _small(port / "rate")})
        devices.append({"name": name, "ports": ports})
    return {"devices": devices}


def hca_selected(spec: str, name: str, port: Any) -> bool:
    """NCCL_IB_HCA's rule (NCCL's docs): a comma list of name[:port] prefixes; '=' first means
    exact names, '^' first excludes the listed ones; empty selects every device."""
    if not spec:
        return True
    exclude, spec = spec.startswith("^"), spec.lstrip("^")
    exact, spec = spec.startswith("="), spec.lstrip("=")
    hit = False
    for entry in filter(None, spec.split(",")):
        want, _, want_port = entry.partition(":")
        if (name == want if exact else name.startswith(want)) and \
                (not want_port or str(port) == want_port):
            hit = True
    return hit != exclude


def active_ports(report: Dict[str, Any], spec: str) -> List[str]:
    ib = report.get("infiniband") or {}
    return [f"{d['name']}:{p['port']}" for d in ib.get("devices", []) for p in d.get("ports", [])
            if p.get("state") == "ACTIVE" and hca_selected(spec, d["name"], p["port"])]


def check_infiniband(ctx) -> List[Finding]:
    p = ctx.profile
    answered = ctx.answered()
    if p.NCCL_TRANSPORT != "ib":
        raise Skip("NCCL_TRANSPORT=socket: IB is off")
    found, counts = [], {}
    for ordinal, report in answered:
        if not ctx.is_gpu_node(ordinal):
            continue  # a CPU-only node runs no NCCL rank
        ports = active_ports(report, p.NCCL_IB_HCA)
        seen = [f"{d['name']}:{q['port']} {q.get('state') or '?'} {q.get('link_layer') or ''}".strip()
                for d in (report.get("infiniband") or {}).get("devices", []) for q in d["ports"]]
        if not ports:
            found.append(finding("PRE-E104", ctx.node_name(ordinal), "no active IB port"
                                 + (f" on the HCAs NCCL_IB_HCA={p.NCCL_IB_HCA} selects" if
                                    p.NCCL_IB_HCA else "") + f"; the node has: "
                                 f"{', '.join(seen) or 'no RDMA device in /sys/class/infiniband'}",
                                 devices=seen))
        else:
            counts[ordinal] = ports
    if len({len(v) for v in counts.values()}) > 1:
        first = min(counts)
        for ordinal, ports in sorted(counts.items()):
            if len(ports) != len(counts[first]):
                found.append(mismatch("PRE-E105", ctx.node_name(ordinal),
                                      f"active IB ports (vs {ctx.node_name(first)})",
                                      f"{len(counts[first])} ({', '.join(counts[first])})",
                                      f"{len(ports)} ({', '.join(ports)})"))
    return found


def check_nccl_passthrough(ctx) -> List[Finding]:
    """The profile's NCCL interface choices (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_IB_GID_INDEX)
    reach every node as set (NCCL_IB_DISABLE itself is nccl-env's)."""
    answered = ctx.answered()
    want = {k: v for k, v in nccl_env(ctx.profile).items() if k != "NCCL_IB_DISABLE"}
    if not want:
        raise Skip("the profile sets no NCCL interface variable")
    found = []
    for ordinal, report in answered:
        env = report.get("env") or {}
        for key, value in sorted(want.items()):
            if env.get(key) != value:
                found.append(mismatch("PRE-E103", ctx.node_name(ordinal), key, value,
                                      "unset" if env.get(key) is None else repr(env.get(key))))
    return found
