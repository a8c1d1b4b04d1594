"""Evidence of a stalled training from every node of the Ray cluster, for stall.json.

The training watchdog (stall.py) runs on the driver's node; verl's workers run on all of them.
Before it stops the training, one task per live node (no CPU or GPU asked, so it runs beside
busy workers) first asks each NCCL rank on that node for its flight-recorder dump (a write to
the rank's pipe in node-local /tmp, TORCH_NCCL_DEBUG_INFO_PIPE_FILE: run/command.py), then
reports the node's GPU utilisation and memory (nvidia-smi) and the Python stacks
of its Ray worker processes (py-spy dump, where py-spy is on the node's PATH). All of it is
bounded: NODE_SECONDS for the tasks, STACKS_PER_NODE processes, EVIDENCE_BYTES a text; a
cluster that does not answer is recorded as such and the watchdog goes on.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

from ..rounds import cluster, rayimport

NODE_SECONDS = 45.0
STACKS_PER_NODE = 8
EVIDENCE_BYTES = 16 * 1024
GPU_USE = ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv"]


def ray_workers(proc: Path = Path("/proc")) -> List[Dict[str, Any]]:
    """Ray worker processes of this node ("ray::<actor or task>" titles, idle ones and this
    task left out) with their scheduler state: T is stopped, D waits on I/O it cannot leave."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            title = (entry / "cmdline").read_bytes()[:256].split(b"\0")[0].decode("utf-8", "replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if title.startswith("ray::") and not title.startswith("ray::IDLE"):
            fields = stat[stat.rfind(")") + 2:].split()
            found.append({"pid": int(entry.name), "title": title, "state": fields[0] if fields else "?"})
    return sorted(found, key=lambda item: item["pid"])


def request_dumps(prefix: str) -> List[str]:
    """Write to every rank pipe <prefix><rank>.pipe that has a reader on this node: torch's NCCL
    monitor then dumps that rank's flight recorder. Never blocks (O_NONBLOCK: a pipe without a
    reader is ENXIO and skipped); never writes to anything but a FIFO."""
    folder, stem = os.path.split(prefix)
    mine = re.compile(re.escape(stem) + r"\d{1,9}\.pipe")  # not run x's pipes for a run named x-rank_3
    asked = []
    try:
        names = sorted(n for n in os.listdir(folder or ".") if mine.fullmatch(n))
    except OSError:
        return asked
    for name in names[:1024]:
        try:
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"1\n")
                asked.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


def node_evidence(seconds: float, pipe_prefix: str = "") -> Dict[str, Any]:
    """Runs on one node: its ranks' flight-recorder dumps asked for, its GPUs' use and its Ray
    workers' stacks, within ``seconds``."""
    import socket
    deadline = time.monotonic() + seconds
    report: Dict[str, Any] = {"hostname": socket.gethostname(), "workers": ray_workers()}
    if pipe_prefix:
        report["flight_dumps_asked"] = request_dumps(pipe_prefix)
    if shutil.which("nvidia-smi"):
        report["nvidia-smi"] = bounded_output(GPU_USE, deadline)
    if shutil.which("py-spy"):
        dumps = {}
        for worker in report["workers"][:STACKS_PER_NODE]:
            dumps[str(worker["pid"])] = bounded_output(["py-spy", "dump", "--pid", str(worker["pid"])],
                                                       deadline)
        report["py-spy"] = dumps
    else:
        report["py-spy"] = "py-spy is not on this node's PATH: no stacks (pip install py-spy)"
    return report


def bounded_output(command: List[str], deadline: float, keep: int = EVIDENCE_BYTES,
                   most: float = float("inf")) -> str:
    """The tail (keep characters) of a command's output, run until the deadline (at least 1 s,
    at most `most`); what went wrong instead, if it could not run or ran out of time."""
    try:
        out = subprocess.run(command, capture_output=True, text=True,
                             timeout=max(min(most, deadline - time.monotonic()), 1.0))
        return (out.stdout + out.stderr)[-keep:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{command[0]}: {exc}"


def cluster_evidence(pipe_prefix: str, seconds: float = NODE_SECONDS) -> Dict[str, Any]:
    """One node_evidence task per live node, all in flight; whatever answers within
    ``seconds`` (a hung Ray included: the work runs in a daemon thread)."""
    result: Dict[str, Any] = {"nodes": {}, "error": f"the Ray cluster did not answer within {seconds:g} s"}

    def collect() -> None:
        try:
            rayimport.extend_path()
            import ray
            ray.init(address="auto", ignore_reinit_error=True, log_to_driver=False,
                     logging_level="ERROR")
            jobs = [cluster.Job(node.get("NodeManagerAddress") or node["NodeID"], node["NodeID"],
                                (max(seconds - 10, seconds / 2), pipe_prefix))
                    for node in cluster.alive_nodes(ray)]
            answers = cluster.on_nodes(ray, cluster.remote_task(ray, node_evidence), jobs, seconds,
                                       cancel_late=False)
            result["nodes"].update(answers.values)
            for name, exc in answers.errors.items():  # any Ray error is evidence
                result["nodes"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            for name in answers.late:
                result["nodes"][name] = {"error": f"no answer within {seconds:g} s"}
            result.pop("error", None)
        except Exception as exc:  # no ray, no cluster: say so and go on
            result["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"

    worker = threading.Thread(target=collect, daemon=True)
    worker.start()
    worker.join(seconds + 15)
    return result
