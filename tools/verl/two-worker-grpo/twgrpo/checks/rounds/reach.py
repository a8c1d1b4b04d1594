"""TCP reachability between the nodes, on the address NCCL will use, before training.

A second round after the node probes: one task per node, all in flight. Each listens on its
NCCL address (the first IPv4 of NCCL_SOCKET_IFNAME's interface, else Ray's node IP), writes
address and port into the run folder (shared storage, already proved by the probes), waits for
its targets' files and connects to each, while it accepts theirs. Everything is bounded by
REACH_SECONDS; a peer that cannot be reached is named with its address.

Which peers each node tries is peers.plan(): every pair up to a few nodes, beyond that a plan
linear in the nodes drawn from the run id; each node's report is aggregated (a count of good
connections, the failed ones named up to a bound), so the driver holds a few hundred bytes a
node. A block between two particular nodes outside the plan is left to the collective probe,
whose NCCL rings cross every node.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

from ...run.findings import Finding, Skip, finding
from ...run.records import write_json
from . import cluster, peers
from ..nodeside.probe_system import interfaces
from ...run.runfolder import RunFolder

REACH_SECONDS = 10.0
CONNECT_SECONDS = 3.0


def nccl_address(node_ip: str, ifname: str = "") -> Dict[str, str]:
    """The address NCCL's socket transport would bind: NCCL_SOCKET_IFNAME's first match."""
    if not ifname or ifname.startswith("^"):
        return {"address": node_ip, "interface": ""}
    exact = ifname.startswith("=")
    wanted = [w for w in ifname.lstrip("=").split(",") if w]
    for item in interfaces():
        if item["up"] and item["ipv4"] and any(
                item["name"] == w if exact else item["name"].startswith(w) for w in wanted):
            return {"address": item["ipv4"], "interface": item["name"]}
    return {"address": node_ip, "interface": ""}


def reach_node(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Runs on one node: listen, publish, connect to its targets, count who connected."""
    import os
    import ray
    where = nccl_address(ray.util.get_node_ip_address(), os.environ.get("NCCL_SOCKET_IFNAME", ""))
    return reach_from(spec, where)


def reach_from(spec: Dict[str, Any], where: Dict[str, str]) -> Dict[str, Any]:
    """reach_node's work from the address `where`: spec names the node's ordinal, its targets,
    how many peers will connect to it (expect_in), the run folder, the token and the seconds."""
    ordinal, targets = spec["ordinal"], spec["targets"]
    folder = Path(spec["folder"])
    deadline = time.monotonic() + spec["seconds"]
    report: Dict[str, Any] = {"ordinal": ordinal, **where, "ok": 0, "failed": {},
                              "failed_count": 0, "incoming": 0}
    failures = peers.Failures()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind((where["address"], 0))
        server.listen(spec["expect_in"] + 4)
    except OSError as exc:
        server.close()
        report["error"] = f"cannot listen on {where['address']}: {exc.strerror or exc}"
        return report
    server.settimeout(0.2)
    report["port"] = server.getsockname()[1]
    incoming: List[int] = []

    def accept() -> None:
        while time.monotonic() < deadline and len(incoming) < spec["expect_in"]:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(CONNECT_SECONDS)
                try:
                    text = conn.recv(32).decode("ascii", "replace").strip()
                except OSError:
                    continue
            if text.isdigit():
                incoming.append(int(text))
    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    write_json(folder / f"node-{ordinal}.json", {"ordinal": ordinal, "token": spec["token"],
                                                  "address": where["address"], "port": report["port"]})
    todo = [p for p in targets if p != ordinal]

    failed = failures.add
    while todo and time.monotonic() < deadline:
        for peer in list(todo):
            try:
                seen = json.loads((folder / f"node-{peer}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if seen.get("token") != spec["token"]:
                continue
            todo.remove(peer)
            target = (str(seen.get("address")), int(seen.get("port", 0)))
            try:
                with socket.create_connection(target, timeout=min(CONNECT_SECONDS, max(
                        deadline - time.monotonic(), 0.1))) as conn:
                    conn.sendall(f"{ordinal}\n".encode("ascii"))
                report["ok"] += 1
            except OSError as exc:
                failed(peer, {"target": f"{target[0]}:{target[1]}", "ok": False,
                              "error": f"{type(exc).__name__}: {exc}"})
        if todo:
            time.sleep(0.1)
    for peer in todo:
        failed(peer, {"target": None, "ok": False, "error": "the peer never published its address"})
    acceptor.join(max(deadline - time.monotonic(), 0))
    server.close()
    report.update(incoming=len(incoming), failed=failures.named, failed_count=failures.count)
    return report


def check_reachability(ctx) -> List[Finding]:
    """One reach task per node that answered its probe; every failed pair is a finding."""
    # The nodes meet through the run folder: only those that read the driver's sentinel there.
    answered = [(o, r) for o, r in ctx.answered() if r.get("sentinel_ok")]
    if len(answered) < 2:
        raise Skip("fewer than two nodes share the run folder (shared-storage says why)")
    folder = RunFolder(ctx.run_dir).preflight_reach
    folder.mkdir(exist_ok=True)
    targets = peers.plan([ordinal for ordinal, _ in answered], ctx.run_id)
    ctx.peer_plans["reachability"] = peers.record(targets, ctx.run_id)
    incoming = peers.expected_incoming(targets)
    jobs = []
    for ordinal, report in answered:
        spec = {"ordinal": ordinal, "targets": targets[ordinal], "expect_in": incoming[ordinal],
                "folder": str(folder), "token": ctx.token.strip(), "seconds": REACH_SECONDS}
        jobs.append(cluster.Job(ordinal, report["node_id"], (spec,)))
    answers = cluster.on_nodes(ctx.ray, cluster.remote_task(ctx.ray, reach_node), jobs,
                               REACH_SECONDS + 20)
    ctx.reach_seconds = answers.seconds
    found = [finding("PRE-E047", ctx.node_name(ordinal), "the reachability task did not answer "
                     f"within {REACH_SECONDS + 20:g} s") for ordinal in answers.late]
    for ordinal, exc in answers.errors.items():  # any Ray error is evidence
        found.append(finding("PRE-E047", ctx.node_name(ordinal), "the reachability task "
                             f"failed: {type(exc).__name__}: {str(exc).strip()[:300]}"))
    results = answers.values
    if not results:
        raise Skip("no reachability task answered")
    return found + judge(ctx, results)


def judge(ctx, results: Dict[int, Dict[str, Any]]) -> List[Finding]:
    """Findings from the nodes' reach reports: a node that could not listen, each failed pair."""
    found = []
    for ordinal, result in sorted(results.items()):
        if "error" in result:
            found.append(finding("PRE-E047", ctx.node_name(ordinal), result["error"]))
            continue
        for peer, outcome in sorted(result["failed"].items(), key=lambda kv: int(kv[0])):
            target = results.get(int(peer), {})
            found.append(finding("PRE-E046", ctx.node_name(int(peer)), f"{ctx.node_name(ordinal)} "
                                 f"cannot open a TCP connection to it at {outcome['target']} "
                                 f"(interface {target.get('interface') or 'of the node IP'}): "
                                 f"{outcome['error']}", source=ordinal, **outcome))
        more = result["failed_count"] - len(result["failed"])
        if more > 0:
            found.append(finding("PRE-E046", ctx.node_name(ordinal), f"{more} more peers it could "
                                 "not connect to (not named)", source=ordinal))
    return found
