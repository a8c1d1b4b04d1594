"""What a node's Ray worker may use, read inside the probe task (probe.py calls limits_report);
node_limits.py judges it: the process and thread limits (RLIMIT_NPROC, the cgroup's pids.max),
locked memory (RLIMIT_MEMLOCK, for RDMA), free space where Ray keeps its session and spills
objects, the address family the hostname resolves to first (Gloo's pick), each interface's
MTU, and each RDMA port's GID table and link-down counter.

Standard library only; bounded; never raises: a failure is a value.
"""
from __future__ import annotations

import fcntl
import os
import resource
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from .probe_system import RESOLVE_SECONDS, interfaces, read_number, space

SIOCGIFMTU = 0x8921  # linux/sockios.h: an interface's MTU
SYS_IB = Path("/sys/class/infiniband")
MAX_DEVICES, MAX_PORTS, MAX_GIDS, MAX_INTERFACES = 16, 2, 16, 64
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"  # a GID made from an IPv4 address


def _limit(which: int) -> Dict[str, Optional[int]]:
    soft, hard = resource.getrlimit(which)
    return {"soft": None if soft == resource.RLIM_INFINITY else soft,
            "hard": None if hard == resource.RLIM_INFINITY else hard}


def pids_limit(proc_cgroup: Path = Path("/proc/self/cgroup"),
               root: Path = Path("/sys/fs/cgroup")) -> Dict[str, Any]:
    """pids.max and pids.current of this process's cgroup (v2, or v1's pids hierarchy); a
    container sees its own cgroup at the root. None for "max" (no limit)."""
    where = None
    try:
        for line in proc_cgroup.read_text().splitlines()[:64]:
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                where = root / "pids" / path.lstrip("/")
                break
            if controllers == "" and where is None:
                where = root / path.lstrip("/")
    except (OSError, ValueError):
        pass
    for folder in ([where] if where else []) + [root / "pids", root]:
        if (folder / "pids.max").is_file():
            return {"path": str(folder), "max": read_number(folder / "pids.max"),
                    "current": read_number(folder / "pids.current")}
    return {"path": None, "max": None, "current": None}


def ray_dirs() -> Dict[str, Any]:
    """Space where this Ray node keeps its session (logs, sockets) and spills objects: the
    session folder's file system (Ray spills under it unless told otherwise)."""
    try:
        import ray
        node = ray._private.worker.global_worker.node
        session = node.get_session_dir_path()
    except Exception as exc:  # an older or newer Ray may name it otherwise: say so
        return {"error": f"cannot find Ray's session folder: {type(exc).__name__}: {exc}"[:300]}
    return {"session": space(session)}


def families(hostname: str, seconds: float = RESOLVE_SECONDS) -> List[str]:
    """The address families the hostname resolves to, in the resolver's order (Gloo takes the
    first answer when GLOO_SOCKET_IFNAME is unset); asked in a thread, so a slow resolver
    cannot hold the probe past its bound."""
    answer: Dict[str, Any] = {"infos": []}

    def lookup() -> None:
        try:
            answer["infos"] = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
        except OSError:
            pass
    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(seconds)
    names = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}
    ordered: List[str] = []
    for info in list(answer["infos"])[:32]:
        family = names.get(info[0], str(info[0]))
        if family not in ordered:
            ordered.append(family)
    return ordered


def mtu_of(name: str) -> Optional[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            raw = fcntl.ioctl(sock.fileno(), SIOCGIFMTU, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return struct.unpack("i", raw[16:20])[0]


def mtus() -> List[Dict[str, Any]]:
    return [{**i, "mtu": mtu_of(i["name"])} for i in interfaces()[:MAX_INTERFACES]]


def _small(path: Path) -> str:
    try:
        with open(path, "rb") as stream:
            return stream.read(256).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def rdma_ports(root: Path = SYS_IB) -> List[Dict[str, Any]]:
    """Each RDMA port: state, link layer, GID table (index -> gid, type) and link_downed."""
    try:
        names = sorted(p.name for p in root.iterdir())[:MAX_DEVICES] if root.is_dir() else []
    except OSError:
        return []
    ports = []
    for name in names:
        try:
            numbers = sorted(p.name for p in (root / name / "ports").iterdir())[:MAX_PORTS]
        except OSError:
            continue
        for number in numbers:
            port = root / name / "ports" / number
            gids = {}  # index -> its type, and whether it carries an IPv4 address (RoCE v2 IPv4)
            for index in range(MAX_GIDS):
                gid = _small(port / "gids" / str(index))
                if gid and gid != ZERO_GID:
                    gids[str(index)] = {"type": _small(port / "gid_attrs" / "types" / str(index))[:16],
                                        "ipv4": gid.startswith(IPV4_MAPPED)}
            downed = _small(port / "counters" / "link_downed")
            ports.append({"device": name, "port": number,
                          "state": _small(port / "state").split(":", 1)[-1].strip(),
                          "link_layer": _small(port / "link_layer"), "gids": gids,
                          "link_downed": int(downed) if downed.isdigit() else None})
    return ports


def limits_report() -> Dict[str, Any]:
    started = time.monotonic()
    report = {"nproc": _limit(resource.RLIMIT_NPROC), "pids": pids_limit(),
              "memlock": _limit(resource.RLIMIT_MEMLOCK), "ray_dirs": ray_dirs(),
              "families": families(socket.gethostname()), "interfaces": mtus(),
              "rdma_ports": rdma_ports(), "uid": os.getuid()}
    report["seconds"] = round(time.monotonic() - started, 3)
    return report
