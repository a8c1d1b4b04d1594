"""A training watchdog: follow training.log while verl trains; when no new step line
(training/global_step:N) comes within the limit — a first-step budget for model load and the
first rollout, then a multiple of the slowest step so far, never less than a floor — gather
the evidence into stall.json and stop the phase's process group (TERM, then KILL after the
grace), so a hung run ends in minutes with "stalled after step N" instead of running until the
platform kills it. Postflight reads stall.json (POST-E129).

The evidence: this host's nvidia-smi and the py-spy stacks of the phase's processes; from every
node of the Ray cluster (stall_nodes.py) its GPUs' use, its Ray workers' stacks and each NCCL
rank's flight-recorder dump, asked for through the rank's pipe in node-local /tmp and written
to <run>/nccl-flight/ (the worker environment enables the recorder: run/command.py); the dumps
that came are listed.

Runs as `verify-two-worker-grpo-v1.py watch-training &` inside the training phase's process
group, and ends by itself once the rest of that group has ended.
Memory is bounded: the log is read in chunks and only the last line is kept.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...formats.trainlines import METRIC_STEP
from ...run.findings import Finding, UsageError, finding
from ...run.records import read_json, write_json
from ...run.command import FLIGHT_RECORDER, flight_pipe_prefix
from .stall_nodes import GPU_USE, bounded_output, cluster_evidence, request_dumps
from ...run import runrecord
from ...run.runfolder import NAME, RunFolder

CHUNK = 1 << 20
MAX_CHUNKS = 64  # read per poll: a burst of output is caught up within seconds
LAST_LINE = 400
ACTIVITY_EVERY = 10.0  # seconds between looks at the checkpoint folder
EVIDENCE_SECONDS = 150.0  # the most the evidence may take before the phase is stopped anyway
# verl's metrics line, behind Ray's "(TaskRunner pid=...)" prefix (colour codes included).
STEP_LINE = re.compile(r"^(?:\x1b\[[0-9;]*m)?(?:\([^)]*\))?(?:\x1b\[[0-9;]*m)?\s*step:(?P<step>\d{1,18}) - ")
EVIDENCE_BYTES = 64 * 1024
FLIGHT_DIR = FLIGHT_RECORDER  # where the ranks' dumps are written
DUMP_WAIT = 10.0  # seconds the ranks get to write their flight-recorder dumps


@dataclasses.dataclass
class StallClock:
    """When the training counts as stalled; times are time.monotonic() seconds."""
    first_step: float  # seconds allowed until the first step line
    factor: float  # afterwards: this many times the slowest step so far ...
    floor: float  # ... but never less than this
    last_at: float
    last_step: int = 0
    slowest: float = 0.0
    alive_at: float = 0.0  # the last sign of life that is not a step line (a checkpoint growing)
    max_step: int = 0  # the run's last step (TARGET_STEPS); 0: any step counts

    def step(self, number: int, now: float) -> None:
        if number <= self.last_step or (self.max_step and number > self.max_step):
            return  # an older line, or one beyond the run's range (a printed sample): no step
        if self.last_step:  # the first step's time holds model load: it does not set the pace
            self.slowest = max(self.slowest, (now - self.last_at) / (number - self.last_step))
        self.last_step, self.last_at = number, now

    def limit(self) -> float:
        return self.first_step if not self.last_step else max(self.floor, self.factor * self.slowest)

    def stalled(self, now: float) -> bool:
        return now - max(self.last_at, self.alive_at) > self.limit()


class LogFollower:
    """New complete lines of a growing file, read to its end at each call (CHUNK at a time, so a
    line longer than CHUNK is cut, not held); a file that shrank or was replaced is read again
    from its start."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial, self.last_line, self.inode = path, 0, b"", "", None

    def lines(self) -> List[str]:
        out: List[str] = []
        try:
            with open(self.path, "rb") as stream:
                info = os.fstat(stream.fileno())
                if info.st_ino != self.inode or info.st_size < self.offset:  # rotated or truncated
                    self.inode, self.offset, self.partial = info.st_ino, 0, b""
                stream.seek(self.offset)
                for _ in range(MAX_CHUNKS):
                    data = stream.read(CHUNK)
                    if not data:
                        break
                    self.offset += len(data)
                    *complete, self.partial = (self.partial + data).split(b"\n")
                    self.partial = self.partial[-CHUNK:]
                    out += [line.decode("utf-8", "replace") for line in complete]
        except OSError:
            return out
        if out:
            self.last_line = out[-1][-LAST_LINE:]
        return out


def step_of(line: str) -> Optional[int]:
    """The step of verl's metrics line ("step:N - ... training/global_step:N ..."), behind Ray's
    "(TaskRunner pid=...)" prefix; None for any other line (a sample that quotes such text)."""
    match = STEP_LINE.match(line)
    if not match:
        return None
    metric = METRIC_STEP.search(line)
    return int(match["step"]) if metric and metric["step"] == match["step"] else None


def checkpoint_activity(run_dir: Path) -> tuple:
    """What changes while verl writes a checkpoint: the newest global_step_N folder's files and
    bytes (a save can outlast the step limit on slow storage; it is not a hang)."""
    try:
        steps = [e.name for e in os.scandir(RunFolder(run_dir).checkpoints) if e.name.startswith("global_step_")]
        if not steps:
            return ()
        newest = RunFolder(run_dir).checkpoints / max(steps, key=lambda n: int(n[12:]) if n[12:].isdigit() else -1)
        files = [e for folder in (newest, newest / "actor") for e in os.scandir(folder)
                 if e.is_file(follow_symlinks=False)][:8192]
        return (newest.name, len(files), sum(e.stat(follow_symlinks=False).st_size for e in files))
    except OSError:
        return ()


def group_pids(group: int, proc: Path = Path("/proc")) -> List[int]:
    pids = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if len(fields) > 2 and fields[2] == str(group) and int(entry.name) != os.getpid():
                pids.append(int(entry.name))
    return sorted(pids)[:64]


def evidence(group: int, seconds: float = 60.0) -> Dict[str, Any]:
    """This host's GPUs and the phase's stacks, within ``seconds`` in all."""
    deadline = time.monotonic() + seconds
    found: Dict[str, Any] = {"pids": group_pids(group)}
    if shutil.which("nvidia-smi"):
        found["nvidia-smi"] = bounded_output(GPU_USE, deadline, EVIDENCE_BYTES, most=30.0)
    if shutil.which("py-spy"):
        found["py-spy"] = {str(pid): bounded_output(["py-spy", "dump", "--pid", str(pid)], deadline,
                                                    EVIDENCE_BYTES, most=30.0)
                           for pid in found["pids"][:16] if time.monotonic() < deadline}
    return found


def watch(run_dir: Path, clock: StallClock, poll: float = 1.0, group: Optional[int] = None,
          grace: float = 10.0, cluster: bool = True) -> int:
    """Follow training.log until the rest of the process group has ended (0) or the training
    stalls (3: the phase is stopped, whatever the evidence gathering does)."""
    follower = LogFollower(RunFolder(run_dir).training_log)
    group = os.getpgrp() if group is None else group
    activity, looked = checkpoint_activity(run_dir), time.monotonic()
    while True:
        now = time.monotonic()
        for number in filter(None, map(step_of, follower.lines())):
            clock.step(number, now)
        if now - looked >= ACTIVITY_EVERY:
            seen, looked = checkpoint_activity(run_dir), now
            if seen != activity:
                activity, clock.alive_at = seen, now
        if not group_pids(group):
            return 0
        if clock.stalled(now):
            if _stalled(run_dir, clock, follower, group, now, cluster):
                stop(group, grace)
                return 3
            continue  # the run went on while the evidence was gathered: keep watching
        time.sleep(poll)


def _stalled(run_dir: Path, clock: StallClock, follower: LogFollower, group: int, now: float,
             cluster: bool) -> bool:
    """Gather and record the evidence, within EVIDENCE_SECONDS (in a thread: a hung mount or a
    GPU that left the bus cannot hold the stop back); False when a step line came or the phase
    ended meanwhile, and nothing is recorded then."""
    record = {"last_step": clock.last_step, "seconds_without_step": round(now - clock.last_at, 1),
              "limit_seconds": round(clock.limit(), 1), "slowest_step_seconds": round(clock.slowest, 1),
              "last_line": follower.last_line}
    print(f"watch-training: training stalled after step {clock.last_step}: no step line for "
          f"{record['seconds_without_step']:g} s (limit {record['limit_seconds']:g} s); gathering "
          "evidence, then stopping the phase", flush=True)
    gathered: Dict[str, Any] = {}
    _within(lambda: gathered.update(_gather(run_dir, group, cluster)), EVIDENCE_SECONDS)
    later = list(filter(None, map(step_of, follower.lines())))
    if not group_pids(group) or (later and max(later) > clock.last_step):
        print("watch-training: the training went on (or ended) meanwhile: nothing recorded", flush=True)
        for number in later:
            clock.step(number, time.monotonic())
        return False
    record["evidence_file"] = NAME.stall_evidence_json
    record["flight_dumps"] = gathered.get("flight_dumps", {})

    def write() -> None:
        # The stacks can be megabytes on a big cluster: their own file; stall.json stays small.
        write_json(RunFolder(run_dir).stall_evidence_json, {"this_host": gathered.get("this_host"),
                                             "cluster": gathered.get("cluster")})
        write_json(RunFolder(run_dir).stall_json, record)
    error = _within(write, 30.0)
    print(f"watch-training: evidence in {RunFolder(run_dir).stall_json} ({len(record['flight_dumps'])} "
          f"flight-recorder dump(s)); stopping the phase" if error is None else
          f"watch-training: could not record the evidence ({error}); stopping the phase anyway", flush=True)
    return True


def _gather(run_dir: Path, group: int, cluster: bool) -> Dict[str, Any]:
    prefix = flight_pipe_prefix(run_dir.name)
    asked = request_dumps(prefix) if not cluster else []  # with a cluster, each node asks its own
    nodes = cluster_evidence(prefix) if cluster else {"skipped": "not asked"}
    asked += [name for node in dict(nodes.get("nodes", {})).values() if isinstance(node, dict)
              for name in node.get("flight_dumps_asked") or []]
    found = {"this_host": evidence(group), "cluster": nodes}
    found["flight_dumps"] = flight_dumps(run_dir / FLIGHT_DIR, time.monotonic() + (DUMP_WAIT if asked else 0))
    return found


def _within(action, seconds: float) -> Optional[str]:
    """Run action in a daemon thread for at most seconds; None when it ended well, else why not."""
    outcome: List[Optional[str]] = [f"did not end within {seconds:g} s"]

    def run() -> None:
        try:
            action()
            outcome[0] = None
        except Exception as exc:  # a full or read-only volume: say so, stop the phase anyway
            outcome[0] = f"{type(exc).__name__}: {exc}"
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    return outcome[0]


def flight_dumps(folder: Path, deadline: float) -> Dict[str, int]:
    """The flight-recorder dumps in folder (name: bytes), once none grew for a second or at
    the deadline (now, when no rank was asked for one)."""
    seen: Dict[str, int] = {}
    while True:
        try:
            now_seen = {e.name: e.stat().st_size for e in os.scandir(folder)
                        if e.is_file(follow_symlinks=False)}
        except OSError:
            return {}
        if (now_seen and now_seen == seen) or time.monotonic() > deadline:
            return dict(sorted(now_seen.items())[:256])
        seen = now_seen
        time.sleep(1.0)


def stop(group: int, grace: float) -> None:
    """TERM the phase's group (not this process), KILL what is left after the grace, then end."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while group_pids(group) and time.monotonic() < deadline:
        time.sleep(0.5)
    if group_pids(group):
        print(f"watch-training: the phase still ran {grace:g} s after TERM: KILL", flush=True)
    os.killpg(group, signal.SIGKILL)  # this process is in the group: it ends here


def max_step(run_dir: Path) -> int:
    """The run's last step, from the profile its run.json recorded; 0 when it cannot be read."""
    try:
        return int(runrecord.profile(run_dir).TARGET_STEPS)
    except (UsageError, ValueError, TypeError, AttributeError):
        return 0


def run(folder: RunFolder, *, first_step_seconds: float, stall_factor: float, stall_floor: float,
        kill_grace: float, poll: float = 1.0, cluster: bool = True) -> int:
    """Watch folder's training.log until the phase ends or stalls (the limits: StallClock);
    cluster=False gathers evidence on this host only."""
    for name, value in (("first-step-seconds", first_step_seconds), ("stall-factor", stall_factor),
                        ("stall-floor", stall_floor), ("kill-grace", kill_grace)):
        if value <= 0:
            raise UsageError(f"--{name} must be positive")
    if not folder.path.is_dir():
        raise UsageError(f"{folder.path} is not a run folder")
    clock = StallClock(first_step_seconds, stall_factor, stall_floor, time.monotonic(),
                       max_step=max_step(folder.path))
    return watch(folder.path, clock, poll, grace=kill_grace, cluster=cluster)


def check_stall(ctx) -> List[Finding]:
    """Postflight: the watchdog's record, when it stopped the training."""
    path = RunFolder(ctx.run_dir).stall_json
    if not path.exists():
        return []  # the watchdog did not stop the run
    try:
        record = read_json(path)
        return [finding("POST-E129", str(path), f"training stalled after step {record['last_step']}: "
                        f"no step line for {record['seconds_without_step']} s (limit "
                        f"{record['limit_seconds']} s); last line: {record['last_line']!r}",
                        last_step=record["last_step"])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [finding("POST-E129", str(path), f"the watchdog stopped the training; its record "
                        f"is unreadable: {exc}")]
