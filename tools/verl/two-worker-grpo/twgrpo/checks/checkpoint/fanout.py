"""In-job postflight: the checkpoint's shards checked on every node of the Ray cluster that is
still up, one task a node with a slice of the files, so a 64-node run is read at the volume's
aggregate bandwidth instead of one node's. Each node checks its slice as the prep box would
(shards.check_files: worker processes, big files split), and a problem names the node.

ray is imported only here, and only with `postflight --fan-out` (the launcher's in-job call);
`make postflight` on the prep box stays standard library only. Anything that keeps a slice
from being checked on the cluster (no ray, no cluster, a node lost, a timeout) sends that slice
to the local check instead: fan-out only ever changes where a file is read, never its verdict.
"""
from __future__ import annotations

import io
import socket
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..rounds import cluster, rayimport
from . import shards

TIMEOUT = 6 * 3600.0  # seconds to wait for every node's slice: a slow volume is not a failure


def check_slice(paths: Sequence[str]) -> Tuple[str, List[Optional[Tuple[str, str]]]]:
    """Runs on one node: (its hostname, each file's problem in order)."""
    found = shards.check_files(list(paths), progress=io.StringIO())
    return socket.gethostname(), [found[p] for p in paths]


def slices(sizes: Dict[Any, int], count: int) -> List[List[Any]]:
    """count slices of about equal bytes: the largest file first to the lightest slice."""
    parts: List[List[Any]] = [[] for _ in range(count)]
    load = [0] * count
    for path in sorted(sizes, key=lambda p: -sizes[p]):
        lightest = load.index(min(load))
        parts[lightest].append(path)
        load[lightest] += sizes[path]
    return [part for part in parts if part]


def check_files(paths: Sequence[Any], log: Callable[[str], None] = print, timeout: float = TIMEOUT,
                sizes: Optional[Dict[Any, int]] = None) -> Dict[Any, Optional[Tuple[str, str]]]:
    """Each path's problem, like shards.check_files, read on the cluster's nodes where it can
    be; a problem found on a node says which. ``sizes`` gets each whole file's size."""
    nodes, ray = _cluster(log)
    if not nodes:
        return shards.check_files(paths, sizes=sizes)
    stated = {p: shards.file_size(p) for p in paths}
    parts = slices(stated, len(nodes))
    jobs = [cluster.Job(index, node_id, ([str(p) for p in part],))
            for index, (node_id, part) in enumerate(zip(nodes, parts))]
    log(f"postflight: checkpoint shards spread over {len(jobs)} Ray node(s)")
    answers = cluster.on_nodes(ray, cluster.remote_task(ray, check_slice), jobs, timeout)
    results: Dict[Any, Optional[Tuple[str, str]]] = {}
    left: List[Any] = []
    for index in answers.late:
        left += parts[index]
    for index, exc in answers.errors.items():  # the node or its worker died: check its slice here
        log(f"postflight: a node's slice failed ({type(exc).__name__}); checked here instead")
        left += parts[index]
    for index, (host, found) in answers.values.items():
        for path, problem in zip(parts[index], found):
            results[path] = None if problem is None else (problem[0], f"{problem[1]} (checked on "
                                                                     f"node {host})")
    if sizes is not None:  # a node's whole files: their size as this box sees them
        sizes.update((path, stated[path]) for path, problem in results.items() if problem is None)
    if left:
        results.update(shards.check_files(left, sizes=sizes))
    return {path: results.get(path) for path in paths}


def _cluster(log: Callable[[str], None]) -> Tuple[List[str], Any]:
    """The live nodes' ids and the ray module, or ([], None) where there is no cluster."""
    try:
        rayimport.extend_path()
        import ray
        ray.init(address="auto", ignore_reinit_error=True, log_to_driver=False,
                 logging_level="WARNING")
        nodes = [str(n.get("NodeID")) for n in cluster.alive_nodes(ray)]
    except Exception as exc:  # no ray, no cluster: ray raises many kinds
        log(f"postflight: no Ray cluster to spread the shard checks over ({type(exc).__name__}); "
            "checking them here")
        return [], None
    return nodes, ray
