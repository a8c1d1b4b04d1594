"""One streaming pass over a training log: what postflight needs, in bounded memory.

A 64-node log is mostly NCCL INFO noise. Reading it line by line in Python costs seconds per
GiB, so the pass reads large blocks and looks, in C, for the few keywords that every
interesting line holds (commId, Gloo's "onnected to", "Traceback", ...). Each candidate line
is then taken whole, stripped of ANSI colour codes and its Ray prefix, and parsed. Segments
of a large file are scanned by worker processes and merged in order, so the time stays
linear in the log's size and divides by the cores; memory is one block per worker.
"""
from __future__ import annotations

import dataclasses
import os
import re
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, List, Optional, Set, Tuple

BLOCK = 8 << 20
SEGMENT = 64 << 20
FATAL_SAMPLES = 20

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# (TaskRunner pid=3773) / (WorkerDict pid=N, ip=10.0.0.2) / (pid=N): Ray's actor prefixes.
RAY_PREFIX = re.compile(r"^\((?:(?P<actor>[A-Za-z_][\w.]*) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\)\s?")
NCCL_HEAD = r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL INFO "
# ncclCommInitRank (older NCCL) and ncclCommInitRankConfig (2.2x); COMPLETE lines of some
# versions add fields (localSize ...) before " - Init COMPLETE".
NCCL_INIT = re.compile(NCCL_HEAD + r"(?P<fn>\w+) comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) "
                       r"n[Rr]anks (?P<nranks>\d+) cudaDev (?P<cuda>\d+) nvmlDev (?P<nvml>\d+) "
                       r"busId (?P<bus>[0-9a-fA-F]+) commId (?P<commid>0x[0-9a-fA-F]+)\b.*? - Init "
                       r"(?P<phase>START|COMPLETE)")
NCCL_IB = re.compile(NCCL_HEAD + r"NCCL_IB_DISABLE set by environment to (?P<value>[^\s.]+)")
NCCL_SOCKET_IFS = re.compile(NCCL_HEAD + r"NET/Socket : Using (?P<ifs>.+)$")
SOCKET_IF = re.compile(r"\[\d+\](?P<name>[^:\s]+):(?P<ip>[0-9A-Fa-f.:%]+?)<\d+>")
NCCL_NETWORK = re.compile(NCCL_HEAD + r"Using network (?P<net>\w+)")
GLOO = (re.compile(r"\[Gloo\] Rank (?P<rank>\d+) is connected to (?P<peers>\d+) peer ranks\. "
                   r"Expected number of connected peer ranks is : (?P<expected>\d+)"),
        re.compile(r"INFO Rank (?P<rank>\d+) is connected to (?P<peers>\d+)\. "
                   r"Expected number of connected peers is: (?P<expected>\d+)"))
VALIDATED = "[validate_config] All configuration checks passed successfully!"
TOTAL_STEPS = re.compile(r"Total training steps: (?P<steps>\d+)")
GLOBAL_STEP = re.compile(r"global_step_(?P<step>\d+)")
METRIC_STEP = re.compile(r"training/global_step:(?P<step>\d+)")
FATAL = [  # the tutorial's list of markers that a healthy run never prints
    ("python-traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("hydra-error", re.compile(r"Error executing job with overrides")),
    ("out-of-memory", re.compile(r"CUDA out of memory|OutOfMemoryError")),
    ("ray-task-error", re.compile(r"RayTaskError")),
    ("ray-actor-died", re.compile(r"ActorDiedError|WorkerCrashedError")),
    ("nccl-warn-or-error", re.compile(r"\bNCCL (?:WARN|ERROR)\b")),
    ("nccl-error-code", re.compile(r"\bnccl(?:UnhandledCudaError|SystemError|InternalError|"
                                   r"InvalidArgument|InvalidUsage|RemoteError)\b")),
    ("nccl-watchdog", re.compile(r"(?i)\bProcessGroupNCCL\b.*(?:abort|watchdog|timeout|timed out)")),
    ("segfault", re.compile(r"Segmentation fault")),
    ("killed", re.compile(r"(?:^|\s)Killed(?:\s|$)")),
]
# Every line any parser above can match holds one of these; the pass finds only them.
KEYWORDS = (b"commId", b"set by environment", b"Using", b"onnected to", b"validate_config",
            b"Total training steps", b"global_step", b"Traceback", b"Error", b"out of memory",
            b"NCCL WARN", b"NCCL ERROR", b"ProcessGroupNCCL", b"Segmentation fault", b"Killed",
            b"ncclInvalid")


@dataclasses.dataclass
class InitEvent:
    host: str
    pid: int
    cuda: int
    nvml: int
    bus: str
    nranks: int
    prefix_pid: Optional[int]
    line: int

    def placement(self) -> Tuple[str, int, int, int, str]:
        return (self.host, self.pid, self.cuda, self.nvml, self.bus)


@dataclasses.dataclass
class Transport:
    ib_disable: List[str] = dataclasses.field(default_factory=list)
    socket_ips: Set[str] = dataclasses.field(default_factory=set)
    networks: Set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class LogScan:
    lines: int = 0
    fatal: List[Tuple[int, str, str]] = dataclasses.field(default_factory=list)  # first samples
    fatal_count: int = 0
    validated_line: Optional[int] = None
    total_steps: Set[int] = dataclasses.field(default_factory=set)
    global_steps: Set[int] = dataclasses.field(default_factory=set)
    metric_steps: Set[int] = dataclasses.field(default_factory=set)
    # (commId, rank) -> phase -> events (a healthy log has exactly one per phase)
    inits: Dict[Tuple[str, int], Dict[str, List[InitEvent]]] = dataclasses.field(default_factory=dict)
    transport: Dict[Tuple[str, int], Transport] = dataclasses.field(default_factory=dict)
    # (Ray prefix pid, rank) -> {(connected peers, expected peers)}
    gloo: Dict[Tuple[int, int], Set[Tuple[int, int]]] = dataclasses.field(default_factory=dict)

    def merge(self, other: "LogScan") -> None:
        """Append a later segment's scan (line numbers already absolute)."""
        self.lines += other.lines
        room = FATAL_SAMPLES - len(self.fatal)
        self.fatal += other.fatal[:max(room, 0)]
        self.fatal_count += other.fatal_count
        if self.validated_line is None:
            self.validated_line = other.validated_line
        self.total_steps |= other.total_steps
        self.global_steps |= other.global_steps
        self.metric_steps |= other.metric_steps
        for key, phases in other.inits.items():
            mine = self.inits.setdefault(key, {})
            for phase, events in phases.items():
                mine.setdefault(phase, []).extend(events)
        for key, t in other.transport.items():
            mine = self.transport.setdefault(key, Transport())
            mine.ib_disable += t.ib_disable
            mine.socket_ips |= t.socket_ips
            mine.networks |= t.networks
        for key, seen in other.gloo.items():
            self.gloo.setdefault(key, set()).update(seen)


def _parse_line(scan: LogScan, number: int, raw: str) -> None:
    text = ANSI.sub("", raw)
    prefix = RAY_PREFIX.match(text)
    prefix_pid = int(prefix.group("pid")) if prefix else None
    body = text[prefix.end():] if prefix else text
    for name, pattern in FATAL:
        if pattern.search(body):
            scan.fatal_count += 1
            if len(scan.fatal) < FATAL_SAMPLES:
                scan.fatal.append((number, name, text.strip()[:400]))
            break
    if "commId" in body:
        m = NCCL_INIT.search(body)
        if m:
            event = InitEvent(m["host"], int(m["pid"]), int(m["cuda"]), int(m["nvml"]),
                              m["bus"].lower(), int(m["nranks"]), prefix_pid, number)
            key = (m["commid"].lower(), int(m["rank"]))
            scan.inits.setdefault(key, {}).setdefault(m["phase"], []).append(event)
            return
    if "NCCL INFO" in body:
        for pattern in (NCCL_IB, NCCL_SOCKET_IFS, NCCL_NETWORK):
            m = pattern.search(body)
            if m:
                t = scan.transport.setdefault((m["host"], int(m["pid"])), Transport())
                if pattern is NCCL_IB:
                    t.ib_disable.append(m["value"])
                elif pattern is NCCL_SOCKET_IFS:
                    t.socket_ips |= {i["ip"] for i in SOCKET_IF.finditer(m["ifs"])}
                else:
                    t.networks.add(m["net"])
                return
    if "onnected to" in body and prefix_pid is not None:
        for pattern in GLOO:
            m = pattern.search(body)
            if m:
                scan.gloo.setdefault((prefix_pid, int(m["rank"])), set()).add(
                    (int(m["peers"]), int(m["expected"])))
                return
    if scan.validated_line is None and VALIDATED in body:
        scan.validated_line = number
    for m in TOTAL_STEPS.finditer(body):
        scan.total_steps.add(int(m["steps"]))
    for m in GLOBAL_STEP.finditer(body):
        scan.global_steps.add(int(m["step"]))
    for m in METRIC_STEP.finditer(body):
        scan.metric_steps.add(int(m["step"]))


def _scan_block(scan: LogScan, block: bytes, first_line: int) -> None:
    """Parse the candidate lines of a block of whole lines whose first line is ``first_line``."""
    starts = set()
    for keyword in KEYWORDS:
        at = block.find(keyword)
        while at != -1:
            start = block.rfind(b"\n", 0, at) + 1
            end = block.find(b"\n", at)
            end = len(block) if end == -1 else end
            starts.add((start, end))
            at = block.find(keyword, end)
    line, last = first_line, 0
    for start, end in sorted(starts):
        line += block.count(b"\n", last, start)
        last = start
        _parse_line(scan, line, block[start:end].decode("utf-8", "replace"))


def scan_range(path: str, begin: int, end: int) -> LogScan:
    """Scan the lines that start in [begin, end) of the file; line numbers count from 1."""
    scan = LogScan()
    line = 1

    def take(block: bytes) -> None:
        nonlocal line
        if block:
            _scan_block(scan, block, line)
            line += block.count(b"\n") + (not block.endswith(b"\n"))

    with open(path, "rb") as stream:
        if begin:  # a line starts at begin only if a newline ends just before it
            stream.seek(begin - 1)
            if stream.read(1) != b"\n":
                stream.readline()
        tail = b""
        while True:
            position = stream.tell()
            if position >= end:  # finish the line that started inside the range
                take(tail + stream.readline() if tail else b"")
                break
            data = stream.read(min(BLOCK, end - position))
            if not data:  # end of file: a last line may lack its newline
                take(tail)
                break
            block = tail + data
            cut = block.rfind(b"\n") + 1
            tail = block[cut:]
            take(block[:cut])
    scan.lines = line - 1
    return scan


def scan_log(path: str, jobs: Optional[int] = None) -> LogScan:
    size = os.path.getsize(path)
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if size <= SEGMENT or jobs <= 1:
        return scan_range(path, 0, size)
    bounds = list(range(0, size, SEGMENT)) + [size]
    ranges = list(zip(bounds[:-1], bounds[1:]))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(scan_range, [path] * len(ranges), [b for b, _ in ranges],
                              [e for _, e in ranges]))
    total = LogScan()
    offset = 0
    for part in parts:  # renumber each segment's lines after the ones before it
        _shift(part, offset)
        total.merge(part)
        offset += part.lines
    return total


def _shift(scan: LogScan, offset: int) -> None:
    if not offset:
        return
    scan.fatal = [(n + offset, name, text) for n, name, text in scan.fatal]
    if scan.validated_line is not None:
        scan.validated_line += offset
    for phases in scan.inits.values():
        for events in phases.values():
            for event in events:
                event.line += offset
