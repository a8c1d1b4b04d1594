"""The cause a fatal training-log line names, when it names one: host memory, disk, port, shared
memory, GPU mapping, open files, the first collective, Gloo's mesh. Each cause has its own
finding in postflight (checks/postflight/health.py), so the fix is specific, not "read the log".

Only lines the log reader parses reach classify(): every pattern's line holds "Error",
"NCCL WARN", "ProcessGroupNCCL" or Ray's "Memory on the node" (trainlines.ANCHORED), which
is how these errors print.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

# (cause, pattern): the first that matches wins; each pattern is a plain alternation (linear).
CAUSES = [
    ("host-oom", re.compile(r"running low on memory|memory usage threshold|OOM killer|oom-kill|"
                            r"Out of memory: Kill")),
    ("disk-full", re.compile(r"No space left on device|\[Errno 28\]|Disk quota exceeded|\[Errno 122\]")),
    ("port-in-use", re.compile(r"EADDRINUSE|[Aa]ddress already in use|\[Errno 98\]")),
    ("shm", re.compile(r"shared memory segment|/dev/shm/\S{1,200} |unable to allocate shared memory")),
    ("duplicate-gpu", re.compile(r"Duplicate GPU detected")),
    ("open-files", re.compile(r"Too many open files|\[Errno 24\]")),
    ("first-collective", re.compile(r"WorkNCCL\(SeqNum=1, ")),
    ("gloo-mesh", re.compile(r"Gloo connectFullMesh failed|connectFullMesh")),
]
CAUSE_WORDS = ("Error", "NCCL WARN", "ProcessGroupNCCL", "memory", "Errno", "EADDRINUSE")
OOM_DETAIL = re.compile(r"Memory on the node \(IP: (?P<ip>[0-9a-fA-F.:]{1,64}), ID: [0-9a-f]{1,64}\)"
                        r".{0,300}? was (?P<used>[\d.]{1,12}GB) / (?P<total>[\d.]{1,12}GB) "
                        r"\((?P<ratio>[\d.]{1,12})\), which exceeds the memory usage threshold of "
                        r"(?P<threshold>\d{1,3}(?:\.\d{1,12})?)")
PORT = re.compile(r"port:? (?P<port>\d{1,5})\b")


def classify(body: str) -> Optional[Tuple[str, Dict[str, str]]]:
    """(cause, details) for a line that names a known cause, else None."""
    if not any(word in body for word in CAUSE_WORDS):
        return None
    for cause, pattern in CAUSES:
        if pattern.search(body):
            details: Dict[str, str] = {}
            match = (OOM_DETAIL.search(body) if cause == "host-oom" else
                     PORT.search(body) if cause == "port-in-use" else None)
            if match:
                details = {k: v for k, v in match.groupdict().items() if v}
            return cause, details
    return None
