"""Preflight's judgement of each node's network identity (probe_system.py answers on the node):
hostname resolution, distinct hostnames and IPs, the interface holding Ray's node IP, container
bridges, socket-interface settings, the ephemeral port range and unused RDMA devices.
Reachability between the nodes is reach.py's.

ctx is preflight's context (ctx.answered(), ctx.node_name(), ctx.nodes, ctx.profile).
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List

from ...run.findings import Finding, Skip, finding
from .node_system import _system

DOCKER_BRIDGE = ipaddress.ip_network("172.17.0.0/16")
BRIDGE_NAMES = re.compile(r"^(docker\d*|br-[0-9a-f]+|veth\w*|virbr\d*|cni\d*|flannel\.\d+)$")


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def check_hostname_resolution(ctx) -> List[Finding]:
    if ctx.profile.NODES < 2:
        raise Skip("one node: Gloo's loopback fallback still reaches every rank")
    found = []
    for ordinal, report, system in _system(ctx):
        net = system.get("network", {})
        name = ctx.node_name(ordinal)
        if net.get("socket_env", {}).get("GLOO_SOCKET_IFNAME"):
            continue  # Gloo binds the named interface and never looks the hostname up
        resolved = net.get("resolved", {})
        addresses = resolved.get("addresses") or []
        if not addresses or all(_is_loopback(a) for a in addresses):
            why = resolved.get("error") or f"only to {', '.join(addresses)}"
            found.append(finding("PRE-E040", name, f"hostname {net.get('hostname')!r} resolves "
                                 f"{'not at all: ' if not addresses else ''}{why}; Gloo would "
                                 "fall back to the loopback address", addresses=addresses))
        elif report["node_ip"] not in addresses:
            found.append(finding("PRE-W010", name, f"hostname {net.get('hostname')!r} resolves to "
                                 f"{', '.join(addresses)}, not to Ray's node IP {report['node_ip']}",
                                 addresses=addresses))
    return found


def check_distinct_identity(ctx) -> List[Finding]:
    answered = ctx.answered(at_least=2)
    found, hosts, ips = [], {}, {}
    for ordinal, report in answered:
        name = ctx.node_name(ordinal)
        if report["hostname"] in hosts:
            found.append(finding("PRE-E041", name, f"hostname {report['hostname']!r} is also "
                                 f"{hosts[report['hostname']]}'s; NCCL takes equal hostnames "
                                 "for one host"))
        if report["node_ip"] in ips:
            found.append(finding("PRE-E042", name, f"node IP {report['node_ip']} is also "
                                 f"{ips[report['node_ip']]}'s"))
        hosts.setdefault(report["hostname"], name)
        ips.setdefault(report["node_ip"], name)
    return found


def _candidates(interfaces: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [i for i in interfaces if i.get("up") and i.get("ipv4") and not _is_loopback(i["ipv4"])
            and not BRIDGE_NAMES.match(i["name"])]


def check_interfaces(ctx) -> List[Finding]:
    found = []
    for ordinal, report, system in _system(ctx):
        net = system.get("network", {})
        name, node_ip = ctx.node_name(ordinal), report["node_ip"]
        interfaces = net.get("interfaces", [])
        up = {i["name"]: i for i in interfaces if i.get("up")}
        holder = next((i for i in up.values() if i.get("ipv4") == node_ip), None)
        in_bridge = _in(node_ip, DOCKER_BRIDGE)
        if in_bridge or (holder and BRIDGE_NAMES.match(holder["name"])):
            found.append(finding("PRE-E044", name, f"Ray's node IP {node_ip} is a container bridge "
                                 f"address (interface {holder['name'] if holder else '?'}); peers "
                                 "on other hosts cannot reach it"))
        elif interfaces and holder is None:
            found.append(finding("PRE-E043", name, f"no interface that is up holds Ray's node IP "
                                 f"{node_ip} (up: {', '.join(sorted(up)) or 'none'})"))
        env = net.get("socket_env", {})
        for key, value in sorted(env.items()):
            if not value:
                continue
            wanted = [v for v in value.lstrip("=^").split(",") if v]
            # NCCL takes a prefix unless the value starts with '='; '^' excludes interfaces.
            exact, exclude = value.startswith("="), value.startswith("^")
            match = [n for n in up if any(n == w if exact else n.startswith(w) for w in wanted)
                     and up[n].get("ipv4")]
            if not exclude and not match:
                found.append(finding("PRE-E045", name, f"{key}={value} names no interface that is "
                                     f"up with an IPv4 address (up: {', '.join(sorted(up)) or 'none'})"))
        candidates = _candidates(interfaces)
        if len(candidates) > 1 and not any(env.values()):
            found.append(finding("PRE-W011", name, "interfaces "
                                 f"{', '.join(i['name'] + ' ' + i['ipv4'] for i in candidates)} "
                                 "are up and neither NCCL_SOCKET_IFNAME nor GLOO_SOCKET_IFNAME is set"))
    return found


def _in(address: str, network) -> bool:
    try:
        return ipaddress.ip_address(address) in network
    except ValueError:
        return False




RAY_WORKER_PORTS = (10002, 19999)  # ray start's default --min-worker-port / --max-worker-port
RAY_GCS_PORT = 6379


def check_port_range(ctx) -> List[Finding]:
    """Ray's worker ports and GCS port against the ephemeral range: an outgoing connection can
    take a port a server then fails to bind (EADDRINUSE; NeMo-RL keeps services below it)."""
    found = []
    for ordinal, report, system in _system(ctx):
        ports = system.get("port_range")
        if not ports:
            continue
        low, high = ports
        inside = [f"Ray's worker ports {RAY_WORKER_PORTS[0]}-{RAY_WORKER_PORTS[1]}"] if \
            low <= RAY_WORKER_PORTS[1] and high >= RAY_WORKER_PORTS[0] else []
        inside += [f"the GCS port {RAY_GCS_PORT}"] if low <= RAY_GCS_PORT <= high else []
        if inside:
            found.append(finding("PRE-W015", ctx.node_name(ordinal), f"the ephemeral port range "
                                 f"{low}-{high} holds {' and '.join(inside)}", port_range=ports))
    return found


def check_rdma_unused(ctx) -> List[Finding]:
    """A node with InfiniBand/RoCE devices while the profile runs NCCL over Socket: slow steps."""
    found = []
    for ordinal, report, system in _system(ctx):
        devices = system.get("rdma_devices") or []
        if devices and report["env"].get("NCCL_IB_DISABLE") == "1":
            found.append(finding("PRE-W014", ctx.node_name(ordinal), f"the node has RDMA devices "
                                 f"{', '.join(devices[:8])}, but NCCL_IB_DISABLE=1 sends NCCL over "
                                 "TCP sockets", devices=devices))
    return found
