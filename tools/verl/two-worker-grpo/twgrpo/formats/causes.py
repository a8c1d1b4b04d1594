"""The cause a fatal training-log line names, when it names one: host memory, disk, port, shared
memory, GPU mapping, open files, the first collective, Gloo's mesh. Each cause has its own
finding in postflight (checks/postflight/health.py), so the fix is specific, not "read the log".

Only lines the log reader parses reach classify(): every pattern's line holds "Error",
"NCCL WARN", "ProcessGroupNCCL" or Ray's "Memory on the node" (trainlines.ANCHORED), which
is how these errors print.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, Optional, Tuple

# (cause, needles, pattern): the first that matches wins; each pattern is a plain alternation
# (linear). The needles are text every match holds (one in each alternative): the pattern is
# searched only on a line holding one. A verl metrics line is 2 KB and names "memory"
# (perf/max_memory_allocated_gb) on every step: the patterns alone tried each of its positions,
# 160 microseconds a line, where the needles are a few substring searches in C.
CAUSES = [
    ("host-oom", ("running low on memory", "memory usage threshold", "OOM killer", "oom-kill",
                  "Out of memory: Kill"),
     re.compile(r"running low on memory|memory usage threshold|OOM killer|oom-kill|Out of memory: Kill")),
    ("disk-full", ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]"),
     re.compile(r"No space left on device|\[Errno 28\]|Disk quota exceeded|\[Errno 122\]")),
    ("port-in-use", ("EADDRINUSE", "ddress already in use", "[Errno 98]"),
     re.compile(r"EADDRINUSE|[Aa]ddress already in use|\[Errno 98\]")),
    ("shm", ("shared memory segment", "/dev/shm/", "unable to allocate shared memory"),
     re.compile(r"shared memory segment|/dev/shm/\S{1,200} |unable to allocate shared memory")),
    ("duplicate-gpu", ("Duplicate GPU detected",), re.compile(r"Duplicate GPU detected")),
    ("open-files", ("Too many open files", "[Errno 24]"), re.compile(r"Too many open files|\[Errno 24\]")),
    ("first-collective", ("WorkNCCL(SeqNum=1, ",), re.compile(r"WorkNCCL\(SeqNum=1, ")),
    ("gloo-mesh", ("connectFullMesh",), re.compile(r"Gloo connectFullMesh failed|connectFullMesh")),
]
# A line is classified only when it holds one of these. The memory causes are named by their
# phrases, not by the word "memory" alone: verl's metrics line names it on every step
# (perf/max_memory_allocated_gb), and was classified, 2 KB of needles a step, for nothing.
CAUSE_WORDS = ("Error", "NCCL WARN", "ProcessGroupNCCL", "Errno", "EADDRINUSE", "running low on memory",
               "memory usage threshold", "Out of memory: Kill", "OOM killer", "oom-kill", "shared memory")
CAUSE_SET = frozenset(CAUSE_WORDS)
OOM_DETAIL = re.compile(r"Memory on the node \(IP: (?P<ip>[0-9a-fA-F.:]{1,64}), ID: [0-9a-f]{1,64}\)"
                        r".{0,300}? was (?P<used>[\d.]{1,12}GB) / (?P<total>[\d.]{1,12}GB) "
                        r"\((?P<ratio>[\d.]{1,12})\), which exceeds the memory usage threshold of "
                        r"(?P<threshold>\d{1,3}(?:\.\d{1,12})?)")
PORT = re.compile(r"port:? (?P<port>\d{1,5})\b")


def classify(body: str, words: Optional[Iterable[str]] = None) -> Optional[Tuple[str, Dict[str, str]]]:
    """(cause, details) for a line that names a known cause, else None; words: the alarm words
    (CAUSE_WORDS among them) the line holds, found already by the caller."""
    if not (CAUSE_SET.intersection(words) if words is not None else any(map(body.__contains__, CAUSE_WORDS))):
        return None
    for cause, needles, pattern in CAUSES:
        if any(map(body.__contains__, needles)) and pattern.search(body):
            details: Dict[str, str] = {}
            match = (OOM_DETAIL.search(body) if cause == "host-oom" else
                     PORT.search(body) if cause == "port-in-use" else None)
            if match:
                details = {k: v for k, v in match.groupdict().items() if v}
            return cause, details
    return None
