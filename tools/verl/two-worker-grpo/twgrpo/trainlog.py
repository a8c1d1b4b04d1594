"""One streaming pass over a training log: what postflight needs, in bounded memory and time.

A 64-node log is mostly NCCL INFO noise. Reading it line by line in Python costs seconds per
GiB, so the pass reads large blocks and looks, in C, for the few keywords that every
interesting line holds. Most keywords are found through one byte that NCCL's noise rarely
holds (memchr is ten times faster than a substring search); each hit is then compared with
the whole keyword. Each candidate line is taken whole, stripped of ANSI colour codes and its
Ray prefix, and parsed. Segments of a large file are scanned by worker processes and merged in
order, so the time stays linear in the log's size and divides by the cores.

Bounds: memory is one block and one line of at most MAX_LINE bytes per worker; a longer line
is reported (line number, offset, length) and skipped without being held. Every pattern is
anchored or bounded so that it runs in linear time on any line.
"""
from __future__ import annotations

import dataclasses
import os
import re
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

BLOCK = 8 << 20
SEGMENT = 64 << 20
MAX_LINE = 1 << 20  # no real log line comes near; a longer one is a finding, not parsed
FATAL_SAMPLES = 20
KEEP = 100_000  # evidence items one scan holds; a real 512-rank log needs a few ten thousand

ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
# (TaskRunner pid=3773) / (WorkerDict pid=N, ip=10.0.0.2) / (pid=N): Ray's actor prefixes.
RAY_PREFIX = re.compile(r"\((?:(?P<actor>[A-Za-z_][\w.]{0,200}) )?pid=(?P<pid>\d{1,10})"
                        r"(?:, ip=(?P<ip>[^)\s]{1,255}))?\)\s?")
# The host starts the line or follows a space, so each start scans its own word: linear.
NCCL_HEAD = (r"(?<!\S)(?P<host>[^\s:]{1,255}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) "
             r"\[(?P<dev>\d{1,4})\] NCCL INFO ")
# ncclCommInitRank (older NCCL) and ncclCommInitRankConfig (2.2x); COMPLETE lines of some
# versions add fields (localSize ...) before " - Init COMPLETE".
NCCL_INIT = re.compile(NCCL_HEAD + r"(?P<fn>\w{1,64}) comm (?P<comm>0x[0-9a-fA-F]{1,16}) rank (?P<rank>\d{1,9}) "
                       r"n[Rr]anks (?P<nranks>\d{1,9}) cudaDev (?P<cuda>\d{1,4}) nvmlDev (?P<nvml>\d{1,4}) "
                       r"busId (?P<bus>[0-9a-fA-F]{1,16}) commId (?P<commid>0x[0-9a-fA-F]{1,16})\b"
                       r"[^\n]{0,512}? - Init (?P<phase>START|COMPLETE)")
NCCL_IB = re.compile(NCCL_HEAD + r"NCCL_IB_DISABLE set by environment to (?P<value>[^\s.]{1,64})")
NCCL_SOCKET_IFS = re.compile(NCCL_HEAD + r"NET/Socket : Using ")  # interfaces: the rest of the line
SOCKET_IF = re.compile(r"\[\d{1,4}\](?P<name>[^:\s\[]{1,64}):(?P<ip>[0-9A-Fa-f.:%]{1,64}?)<\d{1,4}>")
NCCL_NETWORK = re.compile(NCCL_HEAD + r"Using network (?P<net>\w{1,64})")
GLOO = (re.compile(r"\[Gloo\] Rank (?P<rank>\d{1,9}) is connected to (?P<peers>\d{1,9}) peer ranks\. "
                   r"Expected number of connected peer ranks is : (?P<expected>\d{1,9})"),
        re.compile(r"INFO Rank (?P<rank>\d{1,9}) is connected to (?P<peers>\d{1,9})\. "
                   r"Expected number of connected peers is: (?P<expected>\d{1,9})"))
VALIDATED = "[validate_config] All configuration checks passed successfully!"
TOTAL_STEPS = re.compile(r"Total training steps: (?P<steps>\d{1,18})(?!\d)")
GLOBAL_STEP = re.compile(r"global_step_(?P<step>\d{1,18})(?!\d)")
WATCHDOG = re.compile(r"(?i)abort|watchdog|timeout|timed out")
METRIC_STEP = re.compile(r"training/global_step:(?P<step>\d{1,18})(?!\d)")
# A resumed run: verl's TaskRunner names the folder it loads, each rank the shards it read.
CHECKPOINT_LOAD = re.compile(r"^Load from checkpoint folder: (?P<path>.+?)\s*$")
SHARD_LOAD = re.compile(r"\] Loaded (?P<kind>model|optimizer|rng|lr_scheduler) from (?P<path>\S+)")
LOAD_SAMPLES = 64
FATAL = [  # the tutorial's list of markers that a healthy run never prints
    ("python-traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("hydra-error", re.compile(r"Error executing job with overrides")),
    ("out-of-memory", re.compile(r"CUDA out of memory|OutOfMemoryError")),
    ("ray-task-error", re.compile(r"RayTaskError")),
    ("ray-actor-died", re.compile(r"ActorDiedError|WorkerCrashedError")),
    ("nccl-warn-or-error", re.compile(r"\bNCCL (?:WARN|ERROR)\b")),
    ("nccl-error-code", re.compile(r"\bnccl(?:UnhandledCudaError|SystemError|InternalError|"
                                   r"InvalidArgument|InvalidUsage|RemoteError)\b")),
    ("nccl-watchdog", None),  # ProcessGroupNCCL, then abort/watchdog/timeout later on the line
    ("segfault", re.compile(r"Segmentation fault")),
    ("killed", re.compile(r"(?:^|\s)Killed(?:\s|$)")),
]
FATAL_WORDS = ("Traceback", "Error", "out of memory", "NCCL WARN", "NCCL ERROR", "ncclInvalid",
               "ProcessGroupNCCL", "Segmentation fault", "Killed")  # each marker holds one
# Every line any parser above can match holds one of these keywords. Each keyword is found
# through its anchor byte, one rare in NCCL INFO noise; keywords share anchors so that a
# block is searched once per anchor. "commId" has no rare byte and gets a substring search.
ANCHORED = (
    (b"S", (b"NCCL_IB_DISABLE", b"Segmentation fault")),
    (b"U", (b"Using", b"CUDA out of memory", b"InvalidUsage")),
    (b"E", (b"Error", b"Expected number of connected", b"NCCL ERROR")),
    (b"A", (b"NCCL WARN", b"All configuration checks passed", b"InvalidArgument")),
    (b"b", (b"global_step_", b"training/global_step:", b"Traceback")),
    (b"G", (b"ProcessGroupNCCL",)),
    (b"K", (b"Killed",)),
)
SEARCHED = (b"commId", b"Total training steps")  # no rare byte: a substring search each
KEYWORDS = SEARCHED + tuple(word for _, words in ANCHORED for word in words)
SEARCHES = [re.compile(re.escape(word)) for word in SEARCHED]  # sre's literal scan is fastest
# An anchor hit costs a Python step; past this many hits per MiB, substring search is cheaper.
ANCHOR_HITS_PER_MIB = 2048


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
    checkpoint_loads: List[Tuple[int, str]] = dataclasses.field(default_factory=list)  # first few
    shard_loads: List[Tuple[int, str, str]] = dataclasses.field(default_factory=list)  # first few
    # (commId, rank) -> phase -> events (a healthy log has exactly one per phase)
    inits: Dict[Tuple[str, int], Dict[str, List[InitEvent]]] = dataclasses.field(default_factory=dict)
    transport: Dict[Tuple[str, int], Transport] = dataclasses.field(default_factory=dict)
    # (Ray prefix pid, rank) -> {(connected peers, expected peers)}
    gloo: Dict[Tuple[int, int], Set[Tuple[int, int]]] = dataclasses.field(default_factory=dict)
    # lines longer than MAX_LINE, not parsed: (line, byte offset, length), first samples
    long_lines: List[Tuple[int, int, int]] = dataclasses.field(default_factory=list)
    long_count: int = 0
    kept: int = 0  # evidence items held (init events, transport, Gloo, steps), at most KEEP
    dropped: int = 0  # evidence items past KEEP, counted but not held

    def room(self) -> bool:
        """Whether one more evidence item may be held; memory stays bounded on any log."""
        if self.kept < KEEP:
            self.kept += 1
            return True
        self.dropped += 1
        return False

    def add_init(self, key: Tuple[str, int], phase: str, event: InitEvent) -> None:
        if self.room():
            self.inits.setdefault(key, {}).setdefault(phase, []).append(event)

    def add_step(self, steps: Set[int], value: int) -> None:
        if value not in steps and self.room():
            steps.add(value)

    def add_gloo(self, key: Tuple[int, int], seen: Tuple[int, int]) -> None:
        if seen not in self.gloo.get(key, ()) and self.room():
            self.gloo.setdefault(key, set()).add(seen)

    def add_transport(self, key: Tuple[str, int], ib: Optional[str] = None, ips: Iterable[str] = (),
                      network: Optional[str] = None) -> None:
        if key not in self.transport and not self.room():
            return
        t = self.transport.setdefault(key, Transport())
        if ib is not None and self.room():
            t.ib_disable.append(ib)
        for ip in ips:
            if ip not in t.socket_ips and self.room():
                t.socket_ips.add(ip)
        if network is not None and network not in t.networks and self.room():
            t.networks.add(network)

    def add_fatal(self, line: int, name: str, text: str) -> None:
        self.fatal_count += 1
        if len(self.fatal) < FATAL_SAMPLES:
            self.fatal.append((line, name, text.strip()[:400]))

    def add_long_line(self, line: int, offset: int, length: int) -> None:
        self.long_count += 1
        if len(self.long_lines) < FATAL_SAMPLES:
            self.long_lines.append((line, offset, length))

    def merge(self, other: "LogScan") -> None:
        """Append a later segment's scan (line numbers already absolute)."""
        self.lines += other.lines
        self.fatal += other.fatal[:max(FATAL_SAMPLES - len(self.fatal), 0)]
        self.fatal_count += other.fatal_count
        self.long_lines += other.long_lines[:max(FATAL_SAMPLES - len(self.long_lines), 0)]
        self.long_count += other.long_count
        self.dropped += other.dropped
        if self.validated_line is None:
            self.validated_line = other.validated_line
        for value in sorted(other.total_steps):
            self.add_step(self.total_steps, value)
        for value in sorted(other.global_steps):
            self.add_step(self.global_steps, value)
        for value in sorted(other.metric_steps):
            self.add_step(self.metric_steps, value)
        self.checkpoint_loads += other.checkpoint_loads[:max(LOAD_SAMPLES - len(self.checkpoint_loads), 0)]
        self.shard_loads += other.shard_loads[:max(LOAD_SAMPLES - len(self.shard_loads), 0)]
        for key, phases in other.inits.items():
            for phase, events in phases.items():
                for event in events:
                    self.add_init(key, phase, event)
        for key, t in other.transport.items():
            for ib in t.ib_disable:
                self.add_transport(key, ib=ib)
            self.add_transport(key, ips=sorted(t.socket_ips))
            for network in sorted(t.networks):
                self.add_transport(key, network=network)
        for key, seen in other.gloo.items():
            for pair in sorted(seen):
                self.add_gloo(key, pair)


def _fatal_marker(body: str) -> Optional[str]:
    if not any(word in body for word in FATAL_WORDS):
        return None
    for name, pattern in FATAL:
        if pattern is None:  # two searches, not `ProcessGroupNCCL.*(...)`: linear on any line
            at = body.find("ProcessGroupNCCL")
            if at != -1 and WATCHDOG.search(body, at + 16):
                return name
        elif pattern.search(body):
            return name
    return None


def _parse_line(scan: LogScan, number: int, raw: str) -> None:
    text = ANSI.sub("", raw) if "\x1b" in raw else raw
    prefix = RAY_PREFIX.match(text) if text.startswith("(") else None
    prefix_pid = int(prefix.group("pid")) if prefix else None
    body = text[prefix.end():] if prefix else text
    name = _fatal_marker(body)
    if name:
        scan.add_fatal(number, name, text)
    if "commId" in body:
        m = NCCL_INIT.search(body)
        if m:
            event = InitEvent(m["host"], int(m["pid"]), int(m["cuda"]), int(m["nvml"]),
                              m["bus"].lower(), int(m["nranks"]), prefix_pid, number)
            scan.add_init((m["commid"].lower(), int(m["rank"])), m["phase"], event)
            return
    if "NCCL INFO" in body:
        for pattern in (NCCL_IB, NCCL_SOCKET_IFS, NCCL_NETWORK):
            m = pattern.search(body)
            if m:
                key = (m["host"], int(m["pid"]))
                if pattern is NCCL_IB:
                    scan.add_transport(key, ib=m["value"])
                elif pattern is NCCL_SOCKET_IFS:
                    scan.add_transport(key, ips=[i["ip"] for i in SOCKET_IF.finditer(body, m.end())])
                else:
                    scan.add_transport(key, network=m["net"])
                return
    if "onnected to" in body and prefix_pid is not None:
        for pattern in GLOO:
            m = pattern.search(body)
            if m:
                scan.add_gloo((prefix_pid, int(m["rank"])), (int(m["peers"]), int(m["expected"])))
                return
    if scan.validated_line is None and VALIDATED in body:
        scan.validated_line = number
    if "Total training steps" in body:
        for m in TOTAL_STEPS.finditer(body):
            scan.add_step(scan.total_steps, int(m["steps"]))
    if "global_step_" in body:
        for m in GLOBAL_STEP.finditer(body):
            scan.add_step(scan.global_steps, int(m["step"]))
    if "training/global_step:" in body:
        for m in METRIC_STEP.finditer(body):
            scan.add_step(scan.metric_steps, int(m["step"]))
    m = CHECKPOINT_LOAD.search(body) if "Load from checkpoint folder" in body else None
    if m and len(scan.checkpoint_loads) < LOAD_SAMPLES:
        scan.checkpoint_loads.append((number, m["path"]))
    m = SHARD_LOAD.search(body) if "] Loaded " in body else None
    if m and len(scan.shard_loads) < LOAD_SAMPLES:
        scan.shard_loads.append((number, m["kind"], m["path"]))


def _find_all(block: bytes, word: bytes, start: int, size: int) -> Iterator[int]:
    """The first offset of ``word`` in each line of block[start:size] that holds it."""
    at = block.find(word, start, size)
    while at != -1:
        yield at
        end = block.find(b"\n", at, size)
        at = -1 if end == -1 else block.find(word, end + 1, size)


def _keyword_hits(block: bytes, size: int) -> Iterator[int]:
    """Offsets in block[:size] where some keyword starts, one a line for each keyword (so a
    line holding a keyword a million times costs one step, not a million)."""
    for pattern in SEARCHES:
        m = pattern.search(block, 0, size)
        while m:
            yield m.start()
            end = block.find(b"\n", m.start(), size)  # on to the next line
            m = None if end == -1 else pattern.search(block, end + 1, size)
    for anchor, words in ANCHORED:
        budget = ANCHOR_HITS_PER_MIB * (size // (1 << 20) + 1)
        shifts = [(word, word.index(anchor)) for word in words]
        at = block.find(anchor, 0, size)
        while at != -1:
            budget -= 1
            if budget < 0:  # a block full of this byte: search each keyword instead
                for word, shift in shifts:
                    yield from _find_all(block, word, max(at - shift, 0), size)
                break
            for word, shift in shifts:
                if at >= shift and block.startswith(word, at - shift, size):
                    yield at - shift
                    at = block.find(b"\n", at, size)  # on to the next line
                    break
            at = -1 if at == -1 else block.find(anchor, at + 1, size)


def _long_lines(block: bytes, size: int, max_line: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of each line of block[:size] longer than max_line: such a line holds a
    whole probe window of max_line // 2 bytes without a newline, so a few finds see each one."""
    window = max(max_line // 2, 1)
    seen = -1
    for probe in range(0, size - window + 1, window):
        if block.find(b"\n", probe, probe + window) != -1:
            continue
        start = block.rfind(b"\n", 0, probe) + 1
        if start <= seen:
            continue
        end = block.find(b"\n", probe + window, size)
        end = size if end == -1 else end
        seen = start
        if end - start > max_line:
            yield start, end


def _scan_block(scan: LogScan, block: bytes, size: int, first_line: int, offset: int,
                max_line: int) -> int:
    """Parse the candidate lines of block[:size], whole lines whose first is ``first_line``
    and whose first byte is at ``offset`` in the file; returns the newline count."""
    spans = {}
    for at in _keyword_hits(block, size):
        start = block.rfind(b"\n", 0, at) + 1
        if start not in spans:
            end = block.find(b"\n", at, size)
            spans[start] = size if end == -1 else end
    for start, end in _long_lines(block, size, max_line):
        spans[start] = end
    line, last = first_line, 0
    for start in sorted(spans):
        end = spans[start]
        line += block.count(b"\n", last, start)
        last = start
        if end - start > max_line:
            scan.add_long_line(line, offset + start, end - start)
        else:
            _parse_line(scan, line, block[start:end].decode("utf-8", "replace"))
    return line - first_line + block.count(b"\n", last, size)


def _skip_line(stream, stop: Optional[int] = None) -> int:
    """Read on to just after the next newline, the end of the file or offset ``stop``,
    whichever comes first, in bounded memory; return the bytes skipped before the newline."""
    skipped = 0
    while True:
        at = stream.tell()
        size = BLOCK if stop is None else min(BLOCK, stop - at)
        data = stream.read(size) if size > 0 else b""
        if not data:
            return skipped
        cut = data.find(b"\n")
        if cut != -1:
            stream.seek(at + cut + 1)
            return skipped + cut
        skipped += len(data)


def scan_range(path: str, begin: int, end: int, max_line: Optional[int] = None) -> LogScan:
    """Scan the lines that start in [begin, end) of the file; line numbers count from 1."""
    max_line = max_line or MAX_LINE
    scan = LogScan()
    line = 1

    def take(block: bytes, offset: int, size: Optional[int] = None) -> None:
        nonlocal line
        size = len(block) if size is None else size
        if size:
            line += _scan_block(scan, block, size, line, offset, max_line) + (block[size - 1] != 10)

    def long_line(offset: int, length: int) -> None:
        nonlocal line
        scan.add_long_line(line, offset, length)
        line += 1

    with open(path, "rb") as stream:
        if begin:  # a line starts at begin only if a newline ends just before it
            stream.seek(begin - 1)
            if stream.read(1) != b"\n":
                _skip_line(stream, end)  # the line belongs to an earlier range
        tail, tail_at = b"", stream.tell()
        while True:
            position = stream.tell()
            if position >= end:  # finish the line that started inside the range
                if tail:
                    rest = stream.read(max_line + 1 - len(tail))
                    cut = rest.find(b"\n")
                    if cut != -1:
                        take(tail + rest[:cut + 1], tail_at)
                    elif len(tail) + len(rest) <= max_line:  # the file's last line
                        take(tail + rest, tail_at)
                    else:
                        long_line(tail_at, len(tail) + len(rest) + _skip_line(stream))
                break
            data = stream.read(min(BLOCK, end - position))
            if not data:  # end of file: a last line may lack its newline
                take(tail, tail_at)
                break
            block = tail + data
            cut = block.rfind(b"\n") + 1
            take(block, tail_at, cut)
            tail, tail_at = block[cut:], tail_at + cut
            if len(tail) > max_line:  # an over-long line: measure it, hold none of it
                long_line(tail_at, len(tail) + _skip_line(stream))
                tail, tail_at = b"", stream.tell()
    scan.lines = line - 1
    return scan


def scan_log(path: str, jobs: Optional[int] = None, max_line: Optional[int] = None) -> LogScan:
    size = os.path.getsize(path)
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if size <= SEGMENT or jobs <= 1:
        return scan_range(path, 0, size, max_line)
    bounds = list(range(0, size, SEGMENT)) + [size]
    ranges = list(zip(bounds[:-1], bounds[1:]))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(scan_range, [path] * len(ranges), [b for b, _ in ranges],
                              [e for _, e in ranges], [max_line] * len(ranges)))
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
    scan.long_lines = [(n + offset, at, length) for n, at, length in scan.long_lines]
    if scan.validated_line is not None:
        scan.validated_line += offset
    scan.checkpoint_loads = [(n + offset, path) for n, path in scan.checkpoint_loads]
    scan.shard_loads = [(n + offset, kind, path) for n, kind, path in scan.shard_loads]
    for phases in scan.inits.values():
        for events in phases.values():
            for event in events:
                event.line += offset
