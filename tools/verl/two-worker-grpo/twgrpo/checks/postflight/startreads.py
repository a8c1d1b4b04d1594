"""What postflight hands to worker processes before its first check, so they read while it
scans the training log, in about the order the checks ask for the answers: preflight.json
(rank placement needs it right after the log pass), a large log's segments but its last,
which this process scans (and those no worker has begun, from the last), large event files,
the rollout files (readahead.py), then the checkpoint's shards (checkpoint/ahead.py). Only
where a file is read changes, never what is found.
"""
from __future__ import annotations

from typing import Any, Optional

from . import readahead, rollouts
from ..checkpoint import checkpoint, shards
from ..placement import placement
from ...formats import tfevents, trainlog
from ...run import budget
from ...run.runfolder import RunFolder

# The least share of the log a segment is handed to a worker for. The workers run already (the
# shard check's), so a share smaller than a log scan's own trainlog.MIN_SEGMENT pays: this
# process scans its segment while its segments come back, and unpickling those is serial here
# too. At 2,048 x 8 (19 MB of log, 16 cores) the log check's wall time was 0.55 s with 1 MiB
# segments and 0.59-0.79 s with four of 4 MiB.
LOG_SEGMENT = 1 << 20


def start_reads(ctx: Any) -> Optional[readahead.Workers]:
    """Begin the reads of a PostflightContext: the shard check's workers take them when it
    started some, else postflight's own for a long run or large files. Returns the own
    workers, which the caller closes."""
    folder = RunFolder(ctx.run_dir)
    bounds = budget.of_profile(ctx.profile)
    ctx.preflight_ahead = readahead.Task(None, placement.read_preflight, folder.preflight_json, bounds)
    log_bytes = shards.file_size(str(ctx.training_log))
    # One segment a process that begins one at once, where each has LOG_SEGMENT bytes: this
    # one, and each worker but the one preflight.json goes to. A worker's pool queues what it is
    # handed, and this process cannot take that back: one segment more waits for a worker to
    # come free (2,048 x 8 on 16 cores: it came back 0.2 s after the others), and on two cores
    # the log is best scanned here whole, while the one worker reads preflight.json. The
    # workers are the shard check's (as many, or more, where postflight starts its own)
    parts = min(checkpoint.workers(ctx.world_size), trainlog.MAX_PARTS, log_bytes // LOG_SEGMENT)
    log_ahead = [readahead.Task(None, trainlog.scan_range, str(ctx.training_log), begin, end, None,
                                bounds.evidence)
                 for begin, end in trainlog.segments(log_bytes, parts)] if parts > 1 else []
    handed = log_ahead[:-1]  # the last segment is this process's own: its share of the pass
    event_bytes = 0
    try:  # tfevents.load_views's files; one that cannot be read is its finding, not this
        for path in tfevents.event_files(folder.tensorboard):
            event_bytes += path.stat().st_size if path.is_file() else 0
    except OSError:
        pass
    scalars = readahead.Task(None, tfevents.load_views, folder.tensorboard, ctx.scalar_views()) \
        if event_bytes >= readahead.OWN_WORKERS_BYTES else None
    steps_ahead = rollouts.unhanded(ctx)
    # Handed in about the order the checks ask for the answers (preflight.json, the log, the
    # scalars, the rollouts, then the shards): a task asked for before a worker began it is
    # taken back and run here, by the one process every check waits for. preflight.json goes
    # first: this process takes the log's segments back from the last, and on two cores the one
    # worker was still reading it (0.2 s) when rank placement asked for it
    first = [ctx.preflight_ahead] + handed + ([scalars] if scalars is not None else []) + \
        (steps_ahead.tasks if steps_ahead is not None else [])
    ctx.ahead = checkpoint.start_ahead(ctx.run_dir, ctx.steps, ctx.world_size, first=first)
    steps = max(ctx.steps - ctx.first_step + 1, 0)
    own, submit = None, None
    if ctx.ahead is not None and ctx.ahead.run is not None:
        submit = ctx.ahead.submit
    else:
        own = readahead.own_workers(steps, max(event_bytes, shards.file_size(folder.preflight_json),
                                               log_bytes if log_ahead else 0),
                                    2 + len(log_ahead) + -(-steps // rollouts.CHUNK_STEPS))
        submit = own.submit if own is not None else None
    try:  # to postflight's own workers, in the same order (hand passes over a task handed already)
        for task in first:
            task.hand(submit)
    except BaseException:  # no worker outlives postflight
        if own is not None:
            own.close()
        raise
    ctx.log_ahead = log_ahead if any(task.handed() for task in log_ahead) else None
    ctx.log_cut_at = log_bytes
    ctx.scalars_ahead = scalars if scalars is not None and scalars.handed() else None
    ctx.rollouts_ahead = rollouts.handed(steps_ahead, submit)
    return own
