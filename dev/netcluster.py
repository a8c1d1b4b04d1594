#!/usr/bin/env python3
"""Summary: A real multi-host Ray cluster on one machine, for tests and benchmarks (needs root).

Usage: dev/netcluster.py up DIR --nodes N [--gpus-per-node G] [--real-gpus] | down DIR
       dev/netcluster.py driver DIR -- COMMAND...   (run COMMAND on the head host)

Each node is a host of its own: a network namespace on a private bridge (10.231.0.0/24, the
bridge itself in a switch namespace, so the machine's own network is never touched), its own
hostname (UTS namespace), mount namespace, /etc/hosts naming every node, /dev/shm and Ray temp
dir, and `ray start --node-ip-address`. Namespaces and links are dev/nslinks.py's (pyroute2, so
iproute2 is not needed). Every node sees the shared storage DIR/storage (a tmpfs) and has a
stub nvidia-smi on PATH that reports the GPUs in DIR/nN/gpus.csv (dev/stubgpus.py; each host's
environment is dev/hostenv.py's); with --real-gpus every node gets the machine's own nvidia-smi
and GPU 0 instead (CUDA_VISIBLE_DEVICES=0: the hosts share one GPU, which NCCL accepts because
their hostnames differ). Teardown goes by process id,
SIGKILL after a short grace (a Ray head can ignore SIGTERM for long), then removes the
namespaces, also when the caller failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repo root, so that dev's modules import
    sys.path.insert(0, str(REPO))

from dev import nslinks  # noqa: E402
from dev.hostenv import host_env  # noqa: E402
from dev.procgroups import group_alive, kill, kill_group  # noqa: E402
from dev.stubgpus import gpus_csv  # noqa: E402

SUBNET = "10.231.0"
GCS_PORT = 6379
DASHBOARD_PORT = 8265  # the head's job server, when the cluster has one (dashboard=True)
SHARED_GPU0 = {"CUDA_VISIBLE_DEVICES": "0"}  # --real-gpus: every host on the machine's GPU 0


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


@dataclasses.dataclass
class Node:
    index: int
    ns: str
    ip: str
    hostname: str
    holder: int = 0  # a process that keeps the node's UTS and mount namespaces
    ray_pid: int = 0  # `ray start --block`, leader of its own process group


class Cluster:
    created = 0  # clusters made by this process: each gets its own namespace names

    def __init__(self, root: Path, tag: Optional[str] = None, stub_gpus: bool = True,
                 cpus_per_node: int = 3, dashboard: bool = False):
        self.root = Path(root)
        Cluster.created += 1
        self.tag = tag or f"twg{os.getpid() % 100000}c{Cluster.created}"  # short: <= 15-char links
        self.state = self.root / "cluster.json"
        self.nodes: List[Node] = []
        self.storage = self.root / "storage"
        self.env: Dict[str, str] = {}
        self.node_envs: List[Dict[str, str]] = []
        self.stub_gpus = stub_gpus  # False on a GPU machine: the real nvidia-smi answers
        self.cpus_per_node = cpus_per_node  # verl asks 1 per GPU and 1 for its TaskRunner
        self.dashboard = dashboard  # the head serves the Ray job API on DASHBOARD_PORT
        self.wrappers: Dict[int, List[str]] = {}  # node index -> command put before `ray start`
        if self.state.is_file():
            data = json.loads(self.state.read_text())
            self.tag = data["tag"]
            self.nodes = [Node(**n) for n in data["nodes"]]
            self.env, self.node_envs = data["env"], data.get("node_envs", [])
            self.stub_gpus = data.get("stub_gpus", True)
            self.cpus_per_node = data.get("cpus_per_node", 3)
            self.dashboard = data.get("dashboard", False)

    # ------------------------------------------------------------------ namespaces
    @property
    def switch(self) -> str:
        return f"{self.tag}-sw"

    @property
    def ray_temp(self) -> Path:  # short: Ray's socket paths must fit 107 bytes
        return Path("/tmp") / f"{self.tag}-ray"

    def save(self) -> None:
        self.state.write_text(json.dumps({"tag": self.tag, "env": self.env, "node_envs": self.node_envs,
                                          "stub_gpus": self.stub_gpus, "cpus_per_node": self.cpus_per_node,
                                          "dashboard": self.dashboard,
                                          "nodes": [dataclasses.asdict(n) for n in self.nodes]}))

    def create_switch(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(exist_ok=True)
        if not os.path.ismount(self.storage):
            sh("mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", str(self.storage))
        nslinks.create_switch(self.switch)

    def add_host(self, index: int) -> Node:
        node = Node(index, f"{self.tag}-n{index}", f"{SUBNET}.{10 + index}", f"node-{index}")
        nslinks.wire(node.ns, self.switch, f"{self.tag}v{node.index}", f"{self.tag}p{node.index}",
                     node.ip)
        (self.root / f"n{index}").mkdir(parents=True, exist_ok=True)
        self.ray_temp.mkdir(parents=True, exist_ok=True)
        # The holder gets its own hostname and mounts, then waits; commands join it by nsenter.
        # Ray takes its temp dir from the head, one path for all nodes: a private tmpfs on that
        # path gives each node its own, as separate hosts have.
        # Each host resolves every node's name to its IP (its own /etc/hosts), as cluster DNS does.
        hosts = self.hosts_file(node)
        self.write_hosts(extra=[node])
        script = (f"hostname {node.hostname} && mount --make-rprivate / && "
                  f"mount --bind {hosts} /etc/hosts && "
                  f"mount -t tmpfs -o size=1g tmpfs /dev/shm && "
                  f"mount -t tmpfs -o size=1g tmpfs {self.ray_temp} && exec sleep infinity")
        holder = subprocess.Popen(["nsenter", f"--net={nslinks.NETNS_DIR}/{node.ns}", "unshare", "--uts",
                                   "--mount", "sh", "-c", script], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        node.holder = holder.pid
        for _ in range(50):  # wait until the holder's namespace has its hostname
            out = sh("nsenter", "-t", str(node.holder), "--uts", "hostname", check=False)
            if out.stdout.strip() == node.hostname:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{node.hostname}: namespace holder did not start")
        return node

    def hosts_file(self, node: Node) -> Path:
        return self.root / f"n{node.index}" / "hosts"

    def write_hosts(self, extra: List[Node] = (), override: Optional[Dict[int, str]] = None) -> None:
        """Every node's /etc/hosts: localhost and each node's hostname -> IP, written in place
        (a bind mount follows the file, not its name); override[i] replaces node i's text."""
        nodes = {n.index: n for n in [*self.nodes, *extra]}
        lines = ["127.0.0.1 localhost"] + [f"{n.ip} {n.hostname}" for _, n in sorted(nodes.items())]
        for index, node in nodes.items():
            text = (override or {}).get(index, "\n".join(lines) + "\n")
            with open(self.hosts_file(node), "w") as stream:
                stream.write(text)

    def enter(self, node: Node) -> List[str]:
        return ["nsenter", "-t", str(node.holder), "--net", "--uts", "--mount", "--"]

    # ------------------------------------------------------------------ Ray
    def node_env(self, node: Node, extra: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
        per_node = self.node_envs[node.index] if node.index < len(self.node_envs) else {}
        table = self.root / f"n{node.index}" / "gpus.csv" if self.stub_gpus else None
        return host_env(self.root, table, {**self.env, **per_node}, extra)

    def start_ray(self, node: Node, gpus: int, extra_env: Optional[Dict[str, Optional[str]]] = None) -> None:
        head = self.nodes[0]
        dashboard = (["--include-dashboard=true", f"--dashboard-host={node.ip}",
                      f"--dashboard-port={DASHBOARD_PORT}"] if self.dashboard
                     else ["--include-dashboard=false"])
        role = (["--head", f"--port={GCS_PORT}", *dashboard,
                 f"--temp-dir={self.ray_temp}"] if node is head
                else [f"--address={head.ip}:{GCS_PORT}"])
        log = open(self.root / f"n{node.index}" / "ray-start.log", "ab")
        process = subprocess.Popen(
            self.enter(node) + self.wrappers.get(node.index, []) + ["ray", "start", "--block", *role, f"--node-ip-address={node.ip}",
                                f"--num-gpus={gpus}", f"--num-cpus={self.cpus_per_node}",
                                "--disable-usage-stats"],
            env=self.node_env(node, extra_env), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        node.ray_pid = process.pid
        self.save()

    def stop_ray(self, node: Node, grace: float = 2.0) -> None:
        """TERM the node's Ray process group, KILL it after the grace, and anything left."""
        if node.ray_pid:
            kill_group(node.ray_pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and group_alive(node.ray_pid):
                time.sleep(0.1)
            kill_group(node.ray_pid, signal.SIGKILL)
            node.ray_pid = 0
        for pid in self.ns_pids(node):  # daemons Ray started outside the group
            if pid != node.holder:
                kill(pid, signal.SIGKILL)
        self.save()

    def ns_pids(self, node: Node) -> List[int]:
        return nslinks.ns_pids(node.ns)

    def isolated_interface(self, index: int, address: str, name: str = "eth1"):
        """A second interface on host index, on a subnet no other host reaches (a context)."""
        return nslinks.isolated_interface(self.nodes[index].ns, address, name)

    def wait_nodes(self, count: int, timeout: float = 120.0) -> None:
        code = ("import ray, sys; ray.init(address='auto', logging_level='ERROR', log_to_driver=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            dead = [n.hostname for n in self.nodes if n.ray_pid and not group_alive(n.ray_pid)]
            if dead:
                raise RuntimeError(f"ray start exited on {dead}: see {self.root}/n*/ray-start.log")
            out = self.driver([sys.executable, "-c", code], check=False, timeout=60)
            last = (out.stdout + out.stderr).strip()
            if out.returncode == 0 and out.stdout.strip() == str(count):
                return
            time.sleep(1)
        raise RuntimeError(f"cluster did not reach {count} live nodes: {last[-500:]}")

    def driver(self, command: List[str], env: Optional[Dict[str, str]] = None, check: bool = True,
               timeout: Optional[float] = None) -> subprocess.CompletedProcess:
        """Run a command on the head host, with RAY_ADDRESS set as a managed platform does."""
        head = self.nodes[0]
        full_env = {**self.node_env(head), "RAY_ADDRESS": f"{head.ip}:{GCS_PORT}", **(env or {})}
        return subprocess.run(self.enter(head) + command, env=full_env, capture_output=True,
                              text=True, check=check, timeout=timeout, stdin=subprocess.DEVNULL)

    # ------------------------------------------------------------------ whole cluster
    def up(self, nodes: int, gpus_per_node: int = 2, env: Optional[Dict[str, str]] = None,
           prepare=None, node_envs: Optional[List[Dict[str, str]]] = None,
           head_gpus: Optional[int] = None) -> "Cluster":
        """Bring the cluster up; ``prepare(storage)`` fills the shared storage before Ray starts.
        ``node_envs[i]`` adds to node i's environment (CUDA_VISIBLE_DEVICES, say); head_gpus=0
        makes the head a CPU-only node (the KubeRay/Anyscale layout), workers keep gpus_per_node."""
        gpus = [gpus_per_node if head_gpus is None or index else head_gpus for index in range(nodes)]
        self.env = dict(env or {})
        self.node_envs = list(node_envs or [])
        self.create_switch()
        try:
            if prepare:
                prepare(self.storage)
            for index in range(nodes):
                node = self.add_host(index)
                self.nodes.append(node)
                if self.stub_gpus:
                    gpus_csv(self.root / f"n{index}" / "gpus.csv", gpus[index])
                self.save()
            self.start_ray(self.nodes[0], gpus[0])
            self.wait_nodes(1)
            for node in self.nodes[1:]:
                self.start_ray(node, gpus[node.index])
            self.wait_nodes(nodes)
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        for node in reversed(self.nodes):
            self.stop_ray(node, grace=1.0)
            kill(node.holder, signal.SIGKILL)
            nslinks.remove_netns(node.ns)
        nslinks.remove_netns(self.switch)
        shutil.rmtree(self.ray_temp, ignore_errors=True)
        if os.path.ismount(self.storage):
            sh("umount", "-l", str(self.storage), check=False)
        self.nodes = []
        if self.root.is_dir():
            self.save()

    def restart_node(self, index: int, gpus: int, extra_env: Optional[Dict[str, Optional[str]]] = None) -> None:
        """Replace a node's Ray (a new node id); the cluster then has the same count alive."""
        node = self.nodes[index]
        self.stop_ray(node)
        if index:  # the head's death takes the cluster with it; a worker's is seen by the head
            self.wait_nodes(len(self.nodes) - 1)
        self.start_ray(node, gpus, extra_env)
        self.wait_nodes(len(self.nodes))


def ray_missing() -> Optional[str]:
    """Why this Python has no ray for the nodes, or None: found, not imported (the nodes import it)."""
    if importlib.util.find_spec("ray") is None:
        return "needs ray in this Python (make test installs it in .venv)"
    return None


def missing_prerequisites() -> Optional[str]:
    """Why this machine cannot host the cluster, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and mounts)"
    for tool in ("unshare", "nsenter", "mount"):
        if not shutil.which(tool):
            return f"needs {tool} (util-linux)"
    if nslinks.netns is None:
        return "needs pyroute2 in this Python (tests/requirements.txt; make test installs it in .venv)"
    reason = ray_missing()
    if reason:
        return reason
    probe = f"twgprobe{os.getpid()}"
    try:
        nslinks.netns.create(probe)
    except Exception as exc:  # pyroute2 raises OSError, or its own errors from the child
        return f"cannot create network namespaces here ({exc})"
    nslinks.remove_netns(probe)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up")
    p.add_argument("dir", type=Path)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=2)
    p.add_argument("--real-gpus", action="store_true",
                   help="the real nvidia-smi and GPU 0 on every node instead of the stub")
    p = sub.add_parser("down")
    p.add_argument("dir", type=Path)
    p = sub.add_parser("driver")
    p.add_argument("dir", type=Path)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    reason = missing_prerequisites()
    if reason and args.command != "down":
        print(f"netcluster: {reason}", file=sys.stderr)
        return 2
    cluster = Cluster(args.dir)
    if args.command == "up":
        if args.real_gpus:
            cluster.stub_gpus = False
        node_envs = [SHARED_GPU0] * args.nodes if args.real_gpus else None
        cluster.up(args.nodes, args.gpus_per_node, node_envs=node_envs)
        print(f"netcluster: {args.nodes} nodes up; storage {cluster.storage}")
    elif args.command == "down":
        cluster.down()
    else:
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        out = cluster.driver(cmd, check=False)
        sys.stdout.write(out.stdout)
        sys.stderr.write(out.stderr)
        return out.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
