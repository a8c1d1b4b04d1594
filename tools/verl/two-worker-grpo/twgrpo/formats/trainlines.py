"""What a line of verl's training log says: the patterns postflight looks for (NCCL init and
transport lines, Gloo meshes, step counters, fatal markers, checkpoint loads) and LogScan, the
evidence one pass collects. trainlog.py runs the pass over the file.

Every pattern is anchored or bounded so that it runs in linear time on any line.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .causes import CAUSE_WORDS, classify
from .evidencemerge import merge_evidence
from .rankevidence import InitEvent, Transport, frozen, grown

FATAL_SAMPLES = 20
CAUSE_SAMPLES = 5  # per cause
KEEP = 100_000  # evidence items one scan holds unless told (postflight: the run's budget, run/budget.py)

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
# NCCL's IB plugin (src/transport/net_ib*.cc): "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE
# [RO]; OOB eth0:10.0.0.1<0>"; newer NCCL adds ":rail" or "::plane" after the port, 2.2x's merged
# devices read "[0]={[0] mlx5_0:1/IB, ...}". The devices are the rest of the line.
NCCL_IB_USING = re.compile(NCCL_HEAD + r"NET/IB : Using ")
IB_DEV = re.compile(r"\[\d{1,4}\] ?(?P<dev>[^:\s\[\]{}=,]{1,64}):(?P<port>\d{1,4})(?::\d{0,4}){0,2}"
                    r"/(?P<link>IB|RoCE)\b")
GLOO = (re.compile(r"\[Gloo\] Rank (?P<rank>\d{1,9}) is connected to (?P<peers>\d{1,9}) peer ranks\. "
                   r"Expected number of connected peer ranks is : (?P<expected>\d{1,9})"),
        re.compile(r"INFO Rank (?P<rank>\d{1,9}) is connected to (?P<peers>\d{1,9})\. "
                   r"Expected number of connected peers is: (?P<expected>\d{1,9})"))
# The transport lines' patterns in the order they are tried, each with the text every match of
# it holds: a line without that text is not searched (a failed search costs microseconds).
NCCL_TRANSPORT = ((NCCL_IB, "NCCL INFO NCCL_IB_DISABLE set by environment to "),
                  (NCCL_SOCKET_IFS, "NCCL INFO NET/Socket : Using "),
                  (NCCL_NETWORK, "NCCL INFO Using network "), (NCCL_IB_USING, "NCCL INFO NET/IB : Using "))
VALIDATED = "[validate_config] All configuration checks passed successfully!"
TOTAL_STEPS = re.compile(r"Total training steps: (?P<steps>\d{1,18})(?!\d)")
GLOBAL_STEP = re.compile(r"global_step_(?P<step>\d{1,18})(?!\d)")
WATCHDOG = re.compile(r"(?i)abort|watchdog|timeout|timed out")
METRIC_STEP = re.compile(r"training/global_step:(?P<step>\d{1,18})(?!\d)")
# A resumed run: verl's TaskRunner names the folder it loads, each rank the shards it read.
CHECKPOINT_LOAD = re.compile(r"^Load from checkpoint folder: (?P<path>.+?)\s*$")
SHARD_LOAD = re.compile(r"(?:\[Rank (?P<rank>\d{1,9}))?\] Loaded (?P<kind>model|optimizer|rng|lr_scheduler) "
                        r"from (?P<path>\S+)")  # "[Rank 5] Loaded model from ...": the rank that loaded
LOAD_SAMPLES = 64
LOAD_FOLDERS = 64  # distinct folders shard loads name, the first held (a healthy run's: one)
LOAD_PATH = 4096  # a load's path held to this many characters (PATH_MAX), then "…": no real folder's
# What every rank of a resumed run loads, as verl's FSDP checkpoint manager says it ("Loaded
# <kind> from .../<file>_world_size_W_rank_R.pt"): its model and optimizer shards and its extra
# state (the RNG; the LR scheduler's line is not always there). kind -> file prefix.
RANK_LOADS = {"model": "model", "optimizer": "optim", "rng": "extra_state"}
NAME_MAX = 255  # a file name's most bytes (Linux): a longer model shard name is no rank's
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
# _fatal_marker and classify each answer None for a line without one of their words.
# The other words _parse_line looks for (a metrics line trainshape.py takes holds only the 7th).
LINE_WORDS = ("commId", "NCCL INFO", "onnected to", VALIDATED, "Total training steps",
              "global_step_", "training/global_step:", "Load from checkpoint folder", "] Loaded ")
ALARM_WORDS = tuple(dict.fromkeys(FATAL_WORDS + CAUSE_WORDS))
FATAL_SET = frozenset(FATAL_WORDS)
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
    (b"M", (b"Memory on the node",)),  # Ray's OOM detail: node, usage, threshold (causes.py)
)
SEARCHED = (b"commId", b"Total training steps",  # no rare byte: a substring search each
            b"] Loaded ", b"Load from checkpoint folder")  # a resumed run's loads, whatever their paths
KEYWORDS = SEARCHED + tuple(word for _, words in ANCHORED for word in words)
SEARCHES = [re.compile(re.escape(word)) for word in SEARCHED]  # sre's literal scan is fastest


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
    # every shard load, beyond the samples: how many, the first LOAD_FOLDERS folders loaded from (folder ->
    # loads), and (the rank that said it, kind, file name) of each RANK_LOADS load, as evidence items
    shard_load_count: int = 0
    load_folders: Dict[str, int] = dataclasses.field(default_factory=dict)
    rank_loads: Set[Tuple[int, str, str]] = dataclasses.field(default_factory=set)
    # (commId, rank) -> phase -> events (a healthy log has exactly one per phase)
    inits: Dict[Tuple[str, int], Dict[str, List[InitEvent]]] = dataclasses.field(default_factory=dict)
    transport: Dict[Tuple[str, int], Transport] = dataclasses.field(default_factory=dict)
    # (Ray prefix pid, rank) -> {(connected peers, expected peers)}
    gloo: Dict[Tuple[int, int], Set[Tuple[int, int]]] = dataclasses.field(default_factory=dict)
    # lines longer than MAX_LINE, not parsed: (line, byte offset, length), first samples
    long_lines: List[Tuple[int, int, int]] = dataclasses.field(default_factory=list)
    long_count: int = 0
    # lines naming a known cause (causes.py): (line, cause, details, text), first samples per
    # cause, and how many lines named each cause
    causes: List[Tuple[int, str, Dict[str, str], str]] = dataclasses.field(default_factory=list)
    cause_counts: Dict[str, int] = dataclasses.field(default_factory=dict)
    kept: int = 0  # evidence items held (init events, transport, Gloo, steps), at most keep
    dropped: int = 0  # evidence items past keep, counted but not held
    keep: Optional[int] = dataclasses.field(default=None, compare=False)  # None: KEEP

    @property
    def most(self) -> int:  # the evidence items one scan may hold
        return self.keep or KEEP

    def room(self) -> bool:
        """Whether one more evidence item may be held; memory stays bounded on any log."""
        if self.kept < self.most:
            self.kept += 1
            return True
        self.dropped += 1
        return False

    def take(self, items: List[str]) -> List[str]:
        """The first of ``items`` there is room for (room() for each, in one step)."""
        held = items[:max(self.most - self.kept, 0)]
        self.kept += len(held)
        self.dropped += len(items) - len(held)
        return held

    def add_init(self, key: Tuple[str, int], phase: str, event: InitEvent) -> None:
        if self.room():
            self.inits.setdefault(key, {}).setdefault(phase, []).append(event)

    def add_step(self, steps: Set, value) -> None:
        """value into steps (a step number, or any value held once) if new and there is room."""
        if value not in steps and self.room():
            steps.add(value)

    def add_shard_load(self, number: int, kind: str, path: str, rank: Optional[int]) -> None:
        """A rank's "Loaded <kind> from <path>" (rank: its [Rank N] tag, None without one)."""
        self.shard_load_count += 1
        path = path if len(path) <= LOAD_PATH else path[:LOAD_PATH] + "\u2026"
        if len(self.shard_loads) < LOAD_SAMPLES:
            self.shard_loads.append((number, kind, path))
        folder, _, name = path.rpartition("/")
        self.add_folder(folder, 1)
        if kind in RANK_LOADS and rank is not None and len(name) <= NAME_MAX:  # longer: no shard's
            self.add_step(self.rank_loads, (rank, kind, name))

    def add_folder(self, folder: str, loads: int) -> None:
        if folder in self.load_folders:
            self.load_folders[folder] += loads
        elif len(self.load_folders) < LOAD_FOLDERS:
            self.load_folders[folder] = loads

    def add_gloo(self, key: Tuple[int, int], seen: Tuple[int, int]) -> None:
        if seen not in self.gloo.get(key, ()) and self.room():
            self.gloo.setdefault(key, set()).add(seen)

    def add_transport(self, key: Tuple[str, int], ib: Optional[str] = None, ips: Iterable[str] = (),
                      network: Optional[str] = None, ib_devices: Iterable[str] = ()) -> None:
        t = self.transport.get(key)
        if t is None:  # a rank's first transport line (setdefault would build one every line)
            if not self.room():
                return
            t = self.transport[key] = Transport()
        if ib is not None and self.room():
            t.ib_disable.append(ib)
        if ips:  # new ones only, each once, in order
            new = self.take([ip for ip in dict.fromkeys(ips) if ip not in t.socket_ips])
            if new:
                t.socket_ips = grown(t.socket_ips, new)
        if network is not None and network not in t.networks and self.room():
            t.networks = grown(t.networks, (network,))
        if ib_devices:
            new = self.take([d for d in dict.fromkeys(ib_devices) if d not in t.ib_devices])
            if new:
                t.ib_devices = grown(t.ib_devices, new)

    def add_fatal(self, line: int, name: str, text: str) -> None:
        self.fatal_count += 1
        if len(self.fatal) < FATAL_SAMPLES:
            self.fatal.append((line, name, text.strip()[:400]))

    def add_cause(self, line: int, cause: str, details: Dict[str, str], text: str) -> None:
        self._count_cause((line, cause, details, text.strip()[:400]))

    def _count_cause(self, sample: Tuple[int, str, Dict[str, str], str]) -> None:  # held if among the first
        self.cause_counts[sample[1]] = count = self.cause_counts.get(sample[1], 0) + 1
        if count <= CAUSE_SAMPLES:
            self.causes.append(sample)

    def add_long_line(self, line: int, offset: int, length: int) -> None:
        self.long_count += 1
        if len(self.long_lines) < FATAL_SAMPLES:
            self.long_lines.append((line, offset, length))

    def __getstate__(self) -> Dict[str, Any]:
        """As pickled (a segment's scan going back from its worker): the transports frozen,
        each distinct set once (rankevidence.frozen)."""
        state = dict(self.__dict__)
        state["transport"] = frozen(self.transport)
        return state

    def merge(self, other: "LogScan") -> None:
        """Append a later segment's scan (line numbers already absolute)."""
        self.lines += other.lines
        self.fatal += other.fatal[:max(FATAL_SAMPLES - len(self.fatal), 0)]
        self.fatal_count += other.fatal_count
        for sample in other.causes:  # as held: a text cut at 400 may end in a space
            self._count_cause(sample)
        for cause, count in other.cause_counts.items():  # lines past the samples count too
            held = sum(1 for c in other.causes if c[1] == cause)
            self.cause_counts[cause] = self.cause_counts.get(cause, 0) + count - held
        self.long_lines += other.long_lines[:max(FATAL_SAMPLES - len(self.long_lines), 0)]
        self.long_count += other.long_count
        self.dropped += other.dropped
        if self.validated_line is None:
            self.validated_line = other.validated_line
        for steps, more in ((self.total_steps, other.total_steps), (self.global_steps, other.global_steps),
                            (self.metric_steps, other.metric_steps)):
            for value in sorted(more):
                self.add_step(steps, value)
        self.checkpoint_loads += other.checkpoint_loads[:max(LOAD_SAMPLES - len(self.checkpoint_loads), 0)]
        self.shard_loads += other.shard_loads[:max(LOAD_SAMPLES - len(self.shard_loads), 0)]
        self.shard_load_count += other.shard_load_count
        for folder, loads in other.load_folders.items():  # in file order: the first held
            self.add_folder(folder, loads)
        for value in sorted(other.rank_loads):
            self.add_step(self.rank_loads, value)
        merge_evidence(self, other)


def _fatal_marker(body: str, alarms: Iterable[str]) -> Optional[str]:
    """The fatal marker body holds, if any; alarms: the ALARM_WORDS it holds, found already."""
    if FATAL_SET.isdisjoint(alarms):
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
    alarms = list(filter(body.__contains__, ALARM_WORDS))  # a healthy line holds none: in C
    if alarms:  # each word looked for once, not again by _fatal_marker and classify
        name = _fatal_marker(body, alarms)
        if name:
            scan.add_fatal(number, name, text)
        cause = classify(body, alarms)
        if cause:
            scan.add_cause(number, cause[0], cause[1], text)
    if "commId" in body:
        m = NCCL_INIT.search(body)
        if m:
            host, pid, cuda, nvml, bus, nranks, commid, rank, phase = m.group(
                "host", "pid", "cuda", "nvml", "bus", "nranks", "commid", "rank", "phase")
            event = InitEvent(host, int(pid), int(cuda), int(nvml), bus.lower(), int(nranks),
                              prefix_pid, number)
            scan.add_init((commid.lower(), int(rank)), phase, event)
            return
    if "NCCL INFO" in body:
        for pattern, needed in NCCL_TRANSPORT:
            m = pattern.search(body) if needed in body else None
            if m:
                key = (m["host"], int(m["pid"]))
                if pattern is NCCL_IB:
                    scan.add_transport(key, ib=m["value"])
                elif pattern is NCCL_SOCKET_IFS:
                    scan.add_transport(key, ips=[i["ip"] for i in SOCKET_IF.finditer(body, m.end())])
                elif pattern is NCCL_IB_USING:
                    scan.add_transport(key, ib_devices=["%s:%s/%s" % d.group("dev", "port", "link")
                                                        for d in IB_DEV.finditer(body, m.end())])
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
        path = m["path"]
        scan.checkpoint_loads.append((number, path if len(path) <= LOAD_PATH else path[:LOAD_PATH] + "\u2026"))
    m = SHARD_LOAD.search(body) if "] Loaded " in body else None
    if m:
        scan.add_shard_load(number, m["kind"], m["path"], int(m["rank"]) if m["rank"] else None)
