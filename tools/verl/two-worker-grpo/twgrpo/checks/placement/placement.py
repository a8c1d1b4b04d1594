"""Rank placement from the training log: which process on which node held each rank.

Evidence, all from the log: one NCCL communicator of world size W whose ranks 0..W-1 each
logged Init START and COMPLETE from one consistent process (host, pid, devices), each rank's
Gloo full mesh (W-1 peers), the profile's NCCL transport (socket: NCCL_IB_DISABLE=1 and NET/Socket
on the node's IP; ib: NET/IB with its devices and the IB network), and G ranks on each of the N
nodes that preflight.json recorded.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ...run import humane
from ...run.findings import Finding, finding, mismatch
from ...formats import bounded
from ...formats.rankevidence import Transport
from ...formats.trainlog import InitEvent, LogScan
from ...run.runfolder import NAME

KEPT = ("hostname", "node_id", "node_ip", "gpu_node")
Unreadable = bounded.Unreadable


def read_preflight(path, size: Any) -> Any:
    """What placement needs from preflight.json: its status and each worker's hostname, node id
    and IP (a value that is not an object is returned as it is, for the caller to name), read
    within the run's budget (size: run/budget.Size), as every view reads it. Raises bounded.Unreadable."""
    record = bounded.read_json(path, size.record_bytes, size.record_memory)
    if not isinstance(record, dict):
        return record
    kept = {k: record[k] for k in ("status", "workers") if k in record}
    if isinstance(kept.get("workers"), list):
        kept["workers"] = [{k: w[k] for k in KEPT if k in w} if isinstance(w, dict) else w
                           for w in kept["workers"]]
    return kept


def rank_ranges(ranks: List[int]) -> str:
    """0-7, 16, 18-19: sorted ranks as short ranges."""
    parts, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}-{rank}")
            start = None
    return ", ".join(parts)


def communicators(scan: LogScan, world: int) -> Dict[str, Dict[int, Dict[str, List[InitEvent]]]]:
    comms: Dict[str, Dict[int, Dict[str, List[InitEvent]]]] = {}
    for (comm, rank), phases in scan.inits.items():
        for events in phases.values():
            if any(e.nranks == world for e in events):
                comms.setdefault(comm, {})[rank] = phases
                break
    return comms


def comm_problems(comm: str, ranks: Dict[int, Dict[str, List[InitEvent]]],
                  world: int) -> Tuple[List[Finding], List[InitEvent]]:
    """A world-size communicator's findings, and each rank's first Init START in rank order
    (every rank's where there are no findings)."""
    found: List[Finding] = []
    starts = []
    get = ranks.get
    for rank in range(world):
        phases = get(rank)
        # The usual rank, one START and one COMPLETE of one process: judged without a set
        if phases is not None and len(phases) == 2:
            start, complete = phases.get("START"), phases.get("COMPLETE")
            if start is not None and complete is not None and len(start) == 1 == len(complete):
                a, b = start[0], complete[0]
                if a.pid == b.pid and a.host == b.host and a.cuda == b.cuda and a.nvml == b.nvml \
                        and a.bus == b.bus:
                    starts.append(a)
                    continue
        problems = _rank_problems(comm, rank, phases or {}, world)
        if problems:
            found += problems
        else:
            starts.append(phases["START"][0])
    extra = sorted(r for r in ranks if r >= world)
    if extra:
        found.append(finding("POST-E009", f"commId {comm}", f"ranks {extra} exceed world size {world}"))
    if not found:
        processes = {(e.host, e.pid) for e in starts}
        if len(processes) != world:
            found.append(finding("POST-E009", f"commId {comm}", f"{world} ranks run in only "
                                 f"{len(processes)} processes"))
    return found, starts


def _rank_problems(comm: str, rank: int, phases: Dict[str, List[InitEvent]], world: int) -> List[Finding]:
    """A rank that is not the usual one: a missing START or COMPLETE, or several processes."""
    start, complete = phases.get("START"), phases.get("COMPLETE")
    if not start or not complete:
        missing = [p for p, events in (("START", start), ("COMPLETE", complete)) if not events]
        return [finding("POST-E008", f"commId {comm} rank {rank}", f"no Init {' or '.join(missing)} "
                        f"line for rank {rank} of this world-size-{world} communicator")]
    places = {e.placement() for events in phases.values() for e in events}
    if len(places) > 1:
        return [finding("POST-E009", f"commId {comm} rank {rank}",
                        f"rank {rank} is claimed by {len(places)} processes: "
                        + "; ".join(f"{h} pid {p} cudaDev {c}" for h, p, c, _, _ in sorted(places)))]
    return []


def socket_problems(transport: Optional[Transport], node_ip: str) -> List[str]:
    """NCCL_TRANSPORT=socket (the tutorial's): IB disabled, the Socket network on the node's IP."""
    if transport is None:
        return ["no NCCL transport lines"]
    problems = []
    if transport.ib_disable != ["1"] * len(transport.ib_disable) or not transport.ib_disable:
        problems.append(f"NCCL_IB_DISABLE set by environment to {transport.ib_disable or 'nothing'}")
    if transport.networks != {"Socket"}:
        problems.append(f"network {sorted(transport.networks) or 'not logged'}, not Socket")
    if node_ip not in transport.socket_ips:
        problems.append(f"NET/Socket uses {sorted(transport.socket_ips) or 'nothing'}, not "
                        f"the node IP {node_ip}")
    return problems


def ib_problems(transport: Optional[Transport]) -> List[str]:
    """NCCL_TRANSPORT=ib: IB not disabled, NET/IB names its devices and the network is IB
    (a rank on Socket is POST-E150, judged by the caller)."""
    if transport is None:
        return ["no NCCL transport lines"]
    problems = []
    if "1" in transport.ib_disable:
        problems.append("NCCL_IB_DISABLE set by environment to 1")
    if transport.networks != {"IB"}:
        problems.append(f"network {sorted(transport.networks) or 'not logged'}, not IB")
    if not transport.ib_devices:
        problems.append("no NET/IB : Using line naming its IB devices")
    return problems


def _rank_obj(rank: int, event: InitEvent) -> str:
    return f"rank {rank} ({event.host} pid {event.pid})"


def place_ranks(scan: LogScan, preflight: Dict[str, Any], world: int, nodes: int,
                gpus_per_node: int, nccl_transport: str = "socket") -> Tuple[List[Finding], Dict[str, Any]]:
    """Findings and the actor-placement record."""
    record: Dict[str, Any] = {"expected_actors": world, "expected_nodes": nodes,
                              "gpus_per_node": gpus_per_node}
    comms = communicators(scan, world)
    if not comms:
        sizes = sorted({e.nranks for ph in scan.inits.values() for ev in ph.values() for e in ev})
        return [finding("POST-E008", NAME.training_log, f"no NCCL communicator of world size {world} "
                        f"initialized (sizes seen: {sizes or 'none'})")], record
    found: List[Finding] = []
    complete = {}
    for comm, ranks in sorted(comms.items()):
        problems, starts = comm_problems(comm, ranks, world)
        found += problems
        if not problems:
            complete[comm] = starts
    if not complete:
        return found, record
    record["comm_ids"] = sorted(complete)
    baseline_comm, actors = sorted(complete.items())[0]
    for comm, other in sorted(complete.items())[1:]:
        if [e.placement() for e in other] != [e.placement() for e in actors]:
            found.append(finding("POST-E026", f"commId {comm}", f"rank placement differs from "
                                 f"commId {baseline_comm}"))
    workers = {w["hostname"]: w for w in preflight.get("workers", []) if isinstance(w, dict)}
    fell_back: List[str] = []
    # Ranks go to the GPU nodes; a CPU-only node (head or worker) is recorded, never counted.
    rows, counts = [], {w["node_id"]: 0 for w in workers.values() if w.get("gpu_node", True)}
    strangers: Dict[str, List[int]] = {}
    sorted_devices: Dict[int, List[str]] = {}
    full_mesh, gloo_of, transport_of = (world - 1, world - 1), scan.gloo, scan.transport
    for rank, event in enumerate(actors):
        host, event_pid = event.host, event.pid
        worker = workers.get(host)
        row = {"rank": rank, "hostname": host, "pid": event_pid, "cuda_dev": event.cuda,
               "nvml_dev": event.nvml, "bus_id": event.bus, "class_name": "WorkerDict"}
        rows.append(row)
        if worker is None:
            strangers.setdefault(host, []).append(rank)
            continue
        node_id = row["node_id"] = worker["node_id"]
        row["node_ip"] = worker["node_ip"]
        counts[node_id] = counts.get(node_id, 0) + 1
        pid = event.prefix_pid if event.prefix_pid is not None else event_pid
        gloo = gloo_of.get((pid, rank), ())
        if full_mesh not in gloo:
            found.append(finding("POST-E012", _rank_obj(rank, event), f"no Gloo full-mesh line (connected "
                                 f"to {world - 1} of {world - 1} peers); seen: {sorted(gloo) or 'none'}"))
        else:
            row["connected_peer_ranks"] = world - 1
        transport = transport_of.get((host, event_pid))
        if nccl_transport == "ib":
            if transport is not None and "Socket" in transport.networks:
                fell_back.append(f"{rank} ({host})")
                continue
            problems = ib_problems(transport)
            if problems:
                found.append(finding("POST-E151", _rank_obj(rank, event), "; ".join(problems)))
            else:  # ranks name the same few sets of devices: each is sorted once (it is held,
                devices = transport.ib_devices  # so its id is its own while this runs)
                listed = sorted_devices.get(id(devices))
                if listed is None:
                    listed = sorted_devices[id(devices)] = sorted(devices)
                row.update(nccl_transport="IB", rdma_disabled=False, ib_devices=listed)
            continue
        problems = socket_problems(transport, worker["node_ip"])
        if problems:
            found.append(finding("POST-E013", _rank_obj(rank, event), "; ".join(problems)))
        else:
            row.update(nccl_transport="Socket", rdma_disabled=True)
    if strangers:  # one finding per unknown host; preflight's nodes named once
        found += [finding("POST-E010", f"host {host}", f"{len(ranks)} rank(s) ({rank_ranges(ranks)}) "
                          f"ran on host {host}, which is not among preflight's {len(workers)} nodes")
                  for host, ranks in sorted(strangers.items())]
        found.append(finding("POST-E010", NAME.preflight_json, f"preflight's {len(workers)} nodes: "
                             + humane.first_of(sorted(workers))))
    if fell_back:
        found.append(finding("POST-E150", f"{len(fell_back)} of {world} ranks",
                             f"NCCL_TRANSPORT=ib, but ranks {humane.first_of(fell_back)} used NCCL's "
                             "Socket network, not IB", ranks=fell_back))
    record["actors"] = rows
    record["node_counts"] = counts
    shape = sorted(counts.values(), reverse=True)
    if len(counts) != nodes or any(c != gpus_per_node for c in counts.values()):
        found.append(mismatch("POST-E011", "actor placement", "ranks per node",
                              humane.repeats([gpus_per_node] * nodes),
                              humane.repeats(shape) or "none", node_counts=counts))
    return found, record
