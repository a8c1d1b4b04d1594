"""Will the shared volume hold a checkpoint in time, with the semantics checkpoints rely on?

Every node at once writes a bounded test file into <run>/preflight-storage/, fsyncs it, renames
it into place (as checkpoint writers do), drops it from the page cache and reads it back, then
waits a bounded time to see its planned peers' renamed files with their headers (peers.plan:
every other node's on a few nodes, a ring and random peers on many). The
slowest node's write rate projects a save of this profile's checkpoint (its share of weights x
the optimizer factor); a save longer than verl's NCCL timeout (the other ranks wait in a
collective meanwhile: verl #668) is named before training, as is a node that does not see
another's renamed file (NFS attribute caching, stale handles: allenai/OLMo #894).
"""
from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any, Dict, List

from ...run import recipe
from ...run.findings import Finding, Skip, finding
from . import cluster, peers
from ..preflight.node_system import CHECKPOINT_FACTOR, weights_bytes
from ...run.runfolder import RunFolder

TRIAL_BYTES = 64 << 20
CHUNK = 4 << 20
TRIAL_SECONDS = 20.0
NCCL_TIMEOUT_SECONDS = 600.0  # verl 0.6.0's actor_rollout_ref.nccl_timeout default
HEADER = 64


def _header(token: str, ordinal: int) -> bytes:
    return f"twgrpo storage trial {ordinal} {token}".encode()[:HEADER].ljust(HEADER, b"\0")


def storage_trial(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Runs on a node: write, fsync, rename, read back; then look for the others' files."""
    folder, ordinal = Path(spec["folder"]), spec["ordinal"]
    deadline = time.monotonic() + spec["seconds"]
    report: Dict[str, Any] = {"ordinal": ordinal}
    try:
        temp, final = folder / f".node-{ordinal}.tmp", folder / f"node-{ordinal}.bin"
        block = os.urandom(CHUNK)
        started = time.monotonic()
        written = 0
        # A new file, never through a link or onto something already there: the folder is on a
        # volume others write.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as stream:
            stream.write(_header(spec["token"], ordinal))
            written = HEADER
            while written < spec["bytes"] and time.monotonic() < deadline:
                stream.write(block[:spec["bytes"] - written])
                written += min(CHUNK, spec["bytes"] - written)
            stream.flush()
            os.fsync(stream.fileno())
        report["write_seconds"] = round(time.monotonic() - started, 3)
        report["bytes"] = written
        os.rename(temp, final)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        report["read_seconds"] = _read_back(final, written)
        report["seen"], report["unseen"], report["unseen_count"] = _peers(folder, spec, deadline)
    except OSError as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"[:400]
    return report


def _read_back(path: Path, size: int) -> float:
    started = time.monotonic()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read the volume, not our cache
        got = 0
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            got += len(chunk)
    finally:
        os.close(fd)
    if got != size:
        raise OSError(0, f"read back {got} bytes of the {size} written", str(path))
    return round(time.monotonic() - started, 3)


def _peers(folder: Path, spec: Dict[str, Any], deadline: float):
    """How many of the node's targets' renamed files it sees with their headers (each polled
    until the deadline), those it never saw by name ({ordinal: what it saw}, at most
    peers.NAMED_PEERS), and how many it never saw."""
    want = {o for o in spec["targets"] if o != spec["ordinal"]}
    seen, last = set(), {}
    while True:
        for other in sorted(want - seen):
            try:
                head = _head(folder / f"node-{other}.bin")
                if head == _header(spec["token"], other):
                    seen.add(other)
                else:
                    last[other] = "another header"
            except OSError as exc:
                last[other] = exc.strerror or type(exc).__name__
        if seen == want or time.monotonic() >= deadline:
            unseen = peers.Failures()
            for other in sorted(want - seen):
                unseen.add(other, last.get(other, "nothing"))
            return len(seen), unseen.named, unseen.count
        time.sleep(0.2)


def _head(path: Path) -> bytes:
    """A peer's header, from a regular file only (a FIFO or link planted there cannot block)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"not a regular file"
        return os.read(fd, HEADER)
    finally:
        os.close(fd)


def check_storage_trial(ctx) -> List[Finding]:
    nodes = [(o, r) for o, r in ctx.answered() if r.get("sentinel_ok")]
    if not nodes:
        raise Skip("no node shares the run folder (shared-storage says why)")
    folder = RunFolder(ctx.run_dir).preflight_storage
    folder.mkdir(exist_ok=True)
    seconds = ctx.storage_seconds
    size = trial_bytes(ctx.storage_bytes, shutil.disk_usage(folder).free, len(nodes))
    targets = peers.plan([o for o, _ in nodes], ctx.run_id)
    ctx.peer_plans["storage-trial"] = peers.record(targets, ctx.run_id)
    jobs = []
    for ordinal, report in nodes:
        spec = {"ordinal": ordinal, "folder": str(folder), "token": ctx.token.strip(),
                "bytes": size, "seconds": seconds, "targets": targets[ordinal]}
        jobs.append(cluster.Job(ordinal, report["node_id"], (spec,)))
    answers = cluster.on_nodes(ctx.ray, cluster.remote_task(ctx.ray, storage_trial), jobs,
                               seconds + 15)
    waited = round(answers.seconds, 3)
    found = [finding("PRE-E232", ctx.node_name(ordinal), "the storage trial did not finish "
                     f"within {seconds + 15:g} s: the volume hangs on this node")
             for ordinal in answers.late]
    results = dict(answers.values)
    for ordinal, exc in answers.errors.items():  # the worker died: evidence
        results[ordinal] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    shutil.rmtree(folder, ignore_errors=True)  # up to nodes x 64 MiB of test data
    ctx.storage_record = {"bytes": size, "seconds": waited, "nodes": [
        {"ordinal": o, **{k: r.get(k) for k in ("bytes", "write_seconds", "read_seconds", "seen",
                                                 "unseen", "unseen_count", "error")}} for o, r in sorted(results.items())]}
    return found + judge(ctx, results)


def trial_bytes(wanted: int, free: int, nodes: int) -> int:
    """The test file's size: at most a quarter of the volume's free space over all nodes, so the
    trial never fills a nearly full shared volume others write to (storage-space judges the
    space itself); the header alone when there is next to nothing free."""
    return max(HEADER, min(wanted, free // (4 * max(nodes, 1))))


def nccl_timeout(profile) -> float:
    """verl's NCCL timeout for this run: EXTRA_OVERRIDES's actor_rollout_ref.nccl_timeout, or
    verl's default."""
    accepted, _ = recipe.parse(profile.EXTRA_OVERRIDES)
    for key, word in accepted:
        if key == "actor_rollout_ref.nccl_timeout":
            try:
                value = float(word.split("=", 1)[1])
            except (IndexError, ValueError):
                continue
            if 0 < value < float("inf"):
                return value
    return NCCL_TIMEOUT_SECONDS


def judge(ctx, results: Dict[int, Dict[str, Any]]) -> List[Finding]:
    found, rates = [], {}
    for ordinal, result in sorted(results.items()):
        name = ctx.node_name(ordinal)
        if "error" in result:
            found.append(finding("PRE-E232", name, f"the storage trial failed: {result['error']}"))
            continue
        for other, saw in sorted((result.get("unseen") or {}).items()):
            found.append(finding("PRE-E231", name, f"did not see {ctx.node_name(int(other))}'s "
                                 f"renamed file within the trial (it saw: {saw}): the volume does "
                                 "not show one node's rename to another", saw=saw))
        more = (result.get("unseen_count") or 0) - len(result.get("unseen") or {})
        if more > 0:
            found.append(finding("PRE-E231", name, f"did not see {more} more peers' renamed files "
                                 "within the trial (not named)"))
        if result.get("write_seconds"):
            rates[ordinal] = result["bytes"] / result["write_seconds"]
    checkpoint = weights_bytes(ctx) * CHECKPOINT_FACTOR
    if not rates or not checkpoint:
        return found
    slowest = min(rates, key=rates.get)
    share = checkpoint / max(len(rates), 1)
    projected = share / rates[slowest]
    ctx.storage_record.update(slowest_mbps=round(rates[slowest] / 1e6, 1),
                             projected_save_seconds=round(projected, 1))
    timeout = nccl_timeout(ctx.profile)
    if projected > timeout:
        found.append(finding("PRE-E230", ctx.node_name(slowest), f"wrote at "
                             f"{rates[slowest] / 1e6:.1f} MB/s (write + fsync, all nodes at "
                             f"once): its {share / 1e9:.1f} GB share of a checkpoint would take "
                             f"{projected:.0f} s, longer than verl's {timeout:.0f} s "
                             "NCCL timeout the other ranks wait in", mbps=rates[slowest] / 1e6,
                             projected_seconds=projected))
    return found
