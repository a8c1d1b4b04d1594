"""One rank of the collective probe, run as a Ray task on its node (collective.py sends it).

It meets the other ranks the way verl's workers will: torch.distributed over a TCPStore on the
node's NCCL address, NCCL on the node's GPU (Gloo alone on a node without one), then a Gloo
group beside it. As it goes it writes its stage to <folder>/rank-N.json and NCCL writes its INFO
lines to <folder>/nccl-N.log, so a rank that hangs is named by the driver with the stage it
reached and its interface lines. torch is imported here only, on the node, in the training
environment; every wait is bounded by the spec's seconds.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict

from ...run.records import read_json, write_json
from ..rounds.reach import nccl_address
from ...run.runfolder import RunFolder

BIG_BYTES = 64 << 20  # the bandwidth all-reduce: 64 MiB of float32
BIG_ROUNDS = 3


def collective_rank(spec: Dict[str, Any]) -> Dict[str, Any]:
    rank, world, folder = spec["rank"], spec["world"], Path(spec["folder"])
    deadline = time.monotonic() + spec["seconds"]
    report: Dict[str, Any] = {"rank": rank, "ordinal": spec["ordinal"], "stages": {}}
    started = time.monotonic()

    def progress(**extra: Any) -> None:  # what the driver reads of a rank that does not answer
        write_json(folder / f"rank-{rank}.json", {"rank": rank, "ordinal": spec["ordinal"],
                                                  "token": spec["token"], "stage": report.get("stage"),
                                                  "stages": report["stages"], **extra})

    def stage(name: str) -> None:
        report["stage"] = name
        report["stages"][name] = round(time.monotonic() - started, 3)
        progress()

    # Read by NCCL when its first communicator starts: set before any collective.
    os.environ["NCCL_DEBUG_FILE"] = str(folder / f"nccl-{rank}.log")
    os.environ.setdefault("NCCL_DEBUG", "INFO")
    stage("started")
    try:
        import datetime
        import torch
        import torch.distributed as dist
        use_nccl = spec["nccl"]
        if use_nccl and not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA GPU in this task (CUDA_VISIBLE_DEVICES="
                               f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')!r})")
        timeout = datetime.timedelta(seconds=max(deadline - time.monotonic(), 1.0))
        where = nccl_address(spec.get("node_ip") or _ray_node_ip(), os.environ.get("NCCL_SOCKET_IFNAME", ""))
        report.update(where)
        store = _rendezvous(dist, spec, where["address"], timeout, deadline)
        stage("rendezvous")
        backend = "nccl" if use_nccl else "gloo"
        report["backend"] = backend
        device = torch.device("cuda", 0) if use_nccl else torch.device("cpu")
        if use_nccl:
            torch.cuda.set_device(device)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        stage("initialised")
        one = torch.ones(1, device=device)
        dist.all_reduce(one)
        report["small_sum"] = float(one.item())
        stage("small-all-reduce")
        if use_nccl:
            report["bus_gbps"], report["big_ok"] = _bandwidth(torch, dist, device, world)
            stage("big-all-reduce")
            gloo = dist.new_group(backend="gloo", timeout=timeout)
            cpu = torch.ones(1)
            dist.all_reduce(cpu, group=gloo)
            report["gloo_sum"] = float(cpu.item())
        else:
            report["gloo_sum"] = report["small_sum"]
        stage("gloo-all-reduce")
        dist.destroy_process_group()
        stage("done")
    except Exception as exc:  # any failure is the evidence: its type and first line
        text = str(exc).strip()
        report["error"] = f"{type(exc).__name__}: {text.splitlines()[0][:400] if text else ''}"
        progress(error=report["error"])
    return report


def _ray_node_ip() -> str:
    """The node's IP as Ray knows it; a spec's node_ip runs the rank without Ray (one GPU
    machine's own check: dev/gpu-checks-real.py)."""
    import ray
    return ray.util.get_node_ip_address()


def _rendezvous(dist, spec: Dict[str, Any], address: str, timeout, deadline: float):
    """Rank 0 opens the store on its NCCL address and publishes it; the others read it."""
    folder = Path(spec["folder"])
    if spec["rank"] == 0:
        store = dist.TCPStore(address, 0, spec["world"], is_master=True, timeout=timeout,
                              wait_for_workers=False)
        write_json(RunFolder(folder).rendezvous_json, {"token": spec["token"], "address": address,
                                                "port": store.port})
        return store
    while time.monotonic() < deadline:
        try:
            seen = read_json(RunFolder(folder).rendezvous_json, limit=64 * 1024)
        except (OSError, ValueError, RecursionError):
            seen = {}
        seen = seen if isinstance(seen, dict) else {}
        if seen.get("token") == spec["token"]:
            return dist.TCPStore(str(seen["address"]), int(seen["port"]), spec["world"],
                                 is_master=False, timeout=timeout)
        time.sleep(0.1)
    raise TimeoutError("rank 0 never published its store address (rendezvous.json)")


def _bandwidth(torch, dist, device, world: int):
    """Bus bandwidth of a 64 MiB all-reduce in GB/s (None on one rank), and its result right."""
    big = torch.ones(BIG_BYTES // 4, device=device)
    dist.all_reduce(big)  # warm-up: connections and buffers
    torch.cuda.synchronize(device)
    started = time.perf_counter()
    for _ in range(BIG_ROUNDS):
        big.fill_(1.0)  # each round sums ones: exactly `world` in float32 up to 2**24 ranks
        dist.all_reduce(big)
    torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - started) / BIG_ROUNDS
    expected = float(world)
    ok = float(big[0].item()) == expected and float(big[-1].item()) == expected
    if world < 2:
        return None, ok
    return round(BIG_BYTES / seconds * 2 * (world - 1) / world / 1e9, 3), ok
