"""What one Ray node reports about its operating system: network identity, shared memory, open
files, memory, space on the storage root, GPUs already in use and the versions NCCL and the
rollout engine bring. Runs inside the probe task pinned to that node (probe.py calls
system_report); node_system.py judges the answers.

Standard library only; every probe is bounded and never raises: a failure is a value.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import resource
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

SIOCGIFADDR = 0x8915  # linux/sockios.h: an interface's primary IPv4 address
SIOCGIFFLAGS = 0x8913  # linux/sockios.h: an interface's flags
IFF_UP = 0x1
RESOLVE_SECONDS = 5.0
SMI_APPS = "gpu_uuid,pid,process_name,used_memory"
# Distributions whose versions must match on every node, beyond probe.PACKAGES.
VERSIONED = ("vllm", "flash_attn", "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12")
TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.M)
SOCKET_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def resolve(host: str, seconds: float = RESOLVE_SECONDS) -> Dict[str, Any]:
    """getaddrinfo(host) in a thread: a slow DNS must not hold the probe past its bound."""
    answer: Dict[str, Any] = {}

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
            answer["addresses"] = sorted({info[4][0] for info in infos})
        except OSError as exc:
            answer["error"] = f"{type(exc).__name__}: {exc}"
    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return {"error": f"no answer within {seconds:g} s"}
    return answer


def _ioctl(name: str, request: int) -> Optional[bytes]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            return fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None


def ipv4_of(name: str) -> Optional[str]:
    raw = _ioctl(name, SIOCGIFADDR)
    return socket.inet_ntoa(raw[20:24]) if raw else None


def interfaces() -> List[Dict[str, Any]]:
    """Each network interface of this process's network namespace: name, up (IFF_UP), primary
    IPv4 address. Asked of the kernel through a socket, not /sys/class/net, which shows the
    namespace of whoever mounted /sys."""
    found = []
    try:
        names = sorted(name for _, name in socket.if_nameindex())[:256]
    except OSError:
        return found
    for name in names:
        raw = _ioctl(name, SIOCGIFFLAGS)
        flags = struct.unpack("H", raw[16:18])[0] if raw else 0
        found.append({"name": name, "up": bool(flags & IFF_UP), "ipv4": ipv4_of(name)})
    return found


def network_identity(node_ip: str) -> Dict[str, Any]:
    hostname = socket.gethostname()
    return {"hostname": hostname, "node_ip": node_ip, "resolved": resolve(hostname),
            "interfaces": interfaces(),
            "socket_env": {key: os.environ.get(key) for key in SOCKET_ENV}}


def space(path: str) -> Dict[str, Any]:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": path, "error": f"{exc.strerror}"}
    return {"path": path, "total_bytes": st.f_blocks * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_frsize, "free_inodes": st.f_favail,
            "total_inodes": st.f_files}


def read_number(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def memory(proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")) -> Dict[str, Any]:
    info: Dict[str, Any] = {}
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    limit = read_number(cgroup / "memory.max")  # v2, as the container sees its own cgroup
    if limit is None:
        limit = read_number(cgroup / "memory" / "memory.limit_in_bytes")  # v1
    # v1 writes a huge number for no limit; anything above physical memory is no limit.
    if limit is not None and info.get("MemTotal") and limit >= info["MemTotal"]:
        limit = None
    info["cgroup_limit"] = limit
    return info


def nvidia_smi(query: str, timeout: int) -> Tuple[str, Optional[str]]:
    """(CSV output, None), or ("", why not): nvidia-smi with one --query-... flag, bounded."""
    try:
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return "", "nvidia-smi is not on PATH"
    except subprocess.TimeoutExpired:
        return "", f"nvidia-smi did not answer within {timeout} s"
    if out.returncode:
        return "", f"nvidia-smi exited {out.returncode}: {out.stderr.strip()[:300]}"
    return out.stdout, None


def compute_apps() -> Dict[str, Any]:
    """Processes holding GPU memory on this host (nvidia-smi --query-compute-apps)."""
    out, error = nvidia_smi(f"--query-compute-apps={SMI_APPS}", 30)
    if error:
        return {"error": error}
    apps = []
    for line in out.strip().splitlines()[:256]:
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 4 or not parts[1].isdigit():
            continue  # "[N/A]" rows and the like carry nothing to judge
        apps.append({"gpu_uuid": parts[0], "pid": int(parts[1]), "name": parts[2][:200],
                     "used_mib": int(parts[3]) if parts[3].isdigit() else None})
    return {"apps": apps}


def versions() -> Dict[str, Optional[str]]:
    """Versions of the libraries NCCL and the rollout engines come from, without importing them."""
    import importlib.metadata as metadata
    found: Dict[str, Optional[str]] = {}
    for dist in VERSIONED:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    found["torch-cuda"] = None
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        try:
            match = TORCH_CUDA.search((Path(spec.origin).parent / "version.py").read_text()[:20000])
            found["torch-cuda"] = match.group(1) if match else None
        except OSError:
            pass
    return found


def port_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> Optional[List[int]]:
    """The kernel's ephemeral port range (per network namespace)."""
    try:
        low, high = (int(x) for x in path.read_text().split()[:2])
    except (OSError, ValueError):
        return None
    return [low, high]


def rdma_devices(path: Path = Path("/sys/class/infiniband")) -> List[str]:
    """InfiniBand / RoCE devices the node has (NCCL's IB transport would use them)."""
    try:
        return sorted(os.listdir(path))[:64]
    except OSError:
        return []


def system_report(node_ip: str, storage_root: str) -> Dict[str, Any]:
    started = time.monotonic()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    report = {"network": network_identity(node_ip), "shm": space("/dev/shm"),
              "storage": space(storage_root), "nofile": {"soft": soft, "hard": hard},
              "cpus": os.cpu_count(), "memory": memory(), "compute_apps": compute_apps(),
              "versions": versions(), "port_range": port_range(), "rdma_devices": rdma_devices()}
    report["seconds"] = round(time.monotonic() - started, 3)  # what these probes add
    return report
