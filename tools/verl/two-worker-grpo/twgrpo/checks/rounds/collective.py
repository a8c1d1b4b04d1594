"""The collective probe, before training: do the nodes' ranks really meet over NCCL and Gloo?

Reachability (reach.py) proves TCP between the nodes; NCCL can still fail or hang past it (its
own interface choice, a library or driver problem, IB set up wrong), and then a run waits for
NCCL's 10-30 minute watchdog. Here one task per GPU node (a GPU each, all in flight; Gloo
alone where no node has a GPU) runs collective_rank.py: a TCPStore rendezvous through the run
folder, init_process_group, an all-reduce of 1 element and of 64 MiB over NCCL (its bus
bandwidth recorded), and one over Gloo, all within COLLECTIVE_SECONDS. A rank that fails or
does not finish is named with its node, the stage it reached and NCCL's interface lines.
COLLECTIVE_PROBE=gloo (preflight --collective gloo) keeps to Gloo and asks for no GPU, for a
cluster whose GPUs are not real (the test cluster's); off skips the probe.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ...formats import bounded
from ...run.findings import Finding, Skip, finding
from ...run.records import read_json
from . import cluster
from ..nodeside.collective_rank import collective_rank
from ...run.runfolder import RunFolder

COLLECTIVE_SECONDS = 60.0
MARGIN_SECONDS = 15.0  # for Ray to start the tasks' workers and return their reports
AFTER_FAILURE_SECONDS = 10.0  # the other ranks' time to report, once one rank has failed
# NCCL's lines that say which interface and transport a rank chose, and why it failed.
NCCL_LINES = ("NET/Socket", "NET/IB", "NCCL WARN", "Bootstrap", "Init COMPLETE", "via NET/")
NCCL_TAIL = 64 * 1024
# Bus bandwidth below this on an IB profile is TCP's, not InfiniBand's (GB/s).
IB_FLOOR_GBPS = 2.0


def check_collective(ctx) -> List[Finding]:
    """One rank per GPU node (every node that shares the run folder when none has a GPU)."""
    if ctx.collective_mode == "off":
        raise Skip("COLLECTIVE_PROBE=off")
    answered = [(o, r) for o, r in ctx.answered() if r.get("sentinel_ok")]
    if not answered:
        raise Skip("no node shares the run folder (shared-storage says why)")
    gpu_nodes = [(o, r) for o, r in answered if ctx.is_gpu_node(o)]
    nccl = bool(gpu_nodes) and ctx.collective_mode == "nccl"
    ranks = gpu_nodes or answered
    folder = RunFolder(ctx.run_dir).preflight_collective
    folder.mkdir(exist_ok=True)
    seconds = ctx.collective_timeout
    jobs, ordinals = [], {}
    for rank, (ordinal, report) in enumerate(ranks):
        spec = {"rank": rank, "world": len(ranks), "ordinal": ordinal, "folder": str(folder),
                "token": ctx.token.strip(), "seconds": seconds, "nccl": nccl}
        jobs.append(cluster.Job(rank, report["node_id"], (spec,)))
        ordinals[rank] = ordinal
    task = cluster.remote_task(ctx.ray, collective_rank, num_gpus=1 if nccl else 0)
    answers = gather(ctx.ray, task, jobs, seconds)
    results = reports(answers, ordinals)
    ctx.collective["seconds"] = round(answers.seconds, 3)
    ctx.collective.update(backend="nccl+gloo" if nccl else "gloo", world=len(ranks))
    for rank in answers.late:
        results[rank] = {"rank": rank, "ordinal": ordinals[rank], "late": True,
                         **_progress(folder, rank, ctx.token.strip())}
    ctx.collective["ranks"] = [_summary(results[r]) for r in sorted(results)]
    return judge(ctx, results, folder, ctx.collective["seconds"])


def gather(ray, task, jobs: List[cluster.Job], seconds: float) -> cluster.Answers:
    """The ranks' reports as they come, within seconds and Ray's margin; once a rank has failed
    the others cannot finish, so they get AFTER_FAILURE_SECONDS more to report their own side."""
    return cluster.on_nodes(ray, task, jobs, seconds + MARGIN_SECONDS,
                            after_failure=AFTER_FAILURE_SECONDS, failed=lambda r: "error" in r)


def reports(answers: cluster.Answers, ordinals: Dict[Any, int]) -> Dict[Any, Dict[str, Any]]:
    """Each rank's report by key; a rank whose task's worker died gets one naming the error (any
    Ray error is evidence)."""
    results = dict(answers.values)
    for key, exc in answers.errors.items():
        text = str(exc).strip()
        results[key] = {"rank": key, "ordinal": ordinals[key], "error": f"{type(exc).__name__}: "
                        f"{text.splitlines()[0][:300] if text else ''}"}
    return results


def judge(ctx, results: Dict[int, Dict[str, Any]], folder: Path, waited: float) -> List[Finding]:
    found = []
    world = len(results)
    for rank, result in sorted(results.items()):
        where = f"{ctx.node_name(result['ordinal'])} rank {rank}"
        lines = nccl_lines(folder / f"nccl-{rank}.log")
        if result.get("late"):
            found.append(finding(
                "PRE-E071", where, f"had not finished the collective probe when it stopped waiting "
                f"({waited:.0f} s): its last stage was "
                f"{result.get('stage') or 'none (the task never started)'}"
                + (f"; NCCL: {' | '.join(lines)}" if lines else ""), stage=result.get("stage"),
                nccl_lines=lines))
        elif "error" in result:
            found.append(finding(
                "PRE-E070", where, f"the collective probe failed after stage "
                f"{result.get('stage') or 'none'}: {result['error']}"
                + (f"; NCCL: {' | '.join(lines)}" if lines else ""), stage=result.get("stage"),
                nccl_lines=lines))
        else:
            wrong = [(name, result.get(name)) for name in ("small_sum", "gloo_sum")
                     if result.get(name) != float(world)]
            if result.get("big_ok") is False:
                wrong.append(("64 MiB all-reduce", "wrong values"))
            if wrong:
                found.append(finding("PRE-E072", where, "the all-reduce of ones over "
                                     f"{world} rank(s) gave {wrong} instead of {world}"))
    found += _judge_bandwidth(ctx, results)
    return found


def _judge_bandwidth(ctx, results: Dict[int, Dict[str, Any]]) -> List[Finding]:
    rates = [r["bus_gbps"] for r in results.values() if r.get("bus_gbps") is not None]
    if not rates:
        return []
    ctx.collective["bus_gbps"] = min(rates)
    if ctx.profile.NCCL_TRANSPORT == "ib" and min(rates) < IB_FLOOR_GBPS:
        return [finding("PRE-W016", "cluster", f"the 64 MiB NCCL all-reduce ran at {min(rates):g} "
                        f"GB/s bus bandwidth, below {IB_FLOOR_GBPS:g} GB/s: TCP speed, not "
                        "InfiniBand's", bus_gbps=min(rates))]
    return []


def _progress(folder: Path, rank: int, token: str) -> Dict[str, Any]:
    """The stage a rank that did not answer had written (its rank-N.json), if any."""
    try:  # bounded, regular files only: the run folder is shared with whoever can write it
        record = read_json(folder / f"rank-{rank}.json", limit=64 * 1024)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(record, dict) or record.get("token") != token:
        return {}
    return {"stage": record.get("stage") if isinstance(record.get("stage"), str) else None}


def nccl_lines(path: Path, keep: int = 6) -> List[str]:
    """NCCL's interface, transport and warning lines from a rank's NCCL_DEBUG_FILE (its tail)."""
    try:
        tail = bounded.tail_lines(path, NCCL_TAIL)
    except (OSError, ValueError, bounded.Unreadable):  # no file (NCCL never started), not regular
        return []
    picked = [line.strip()[:240] for line in tail if any(k in line for k in NCCL_LINES)]
    warnings = [line for line in picked if "WARN" in line]
    return (warnings + [line for line in picked if "WARN" not in line])[:keep]


def _summary(result: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("rank", "ordinal", "backend", "address", "interface", "stage", "stages", "bus_gbps",
            "error", "late")
    return {k: result[k] for k in keys if k in result}


def empty_record() -> Dict[str, Optional[Any]]:
    return {"backend": None, "world": 0, "seconds": None, "bus_gbps": None, "ranks": []}
