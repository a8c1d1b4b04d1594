"""Every GPU of a node, as nvidia-smi and the kernel tell it: runs in the probe task on the node
(probe.py calls health_report); gpu_health.py judges the answers.

The probe task holds the node's GPUs, but nvidia-smi reports the whole host here on purpose: a
GPU with pending row remaps or in MIG mode breaks a run whichever rank meets it. One bounded
`nvidia-smi --query-gpu` call reads the health fields NVIDIA documents (nvidia-smi
--help-query-gpu); a driver that does not know a field says `Field "x" is not a valid field to
query.` and the field is dropped and the call repeated (older drivers name the clock reasons
clocks_throttle_reasons.*). `nvidia-smi nvlink -s` gives each link's state; the kernel log
(/dev/kmsg, where the container may read it) gives recent Xid errors.

Standard library only; bounded; never raises: a failure is a value.
"""
from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

SMI_SECONDS = 30
KEY_FIELDS = ("index", "uuid", "pci.bus_id")
HEALTH_FIELDS = (
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "mig.mode.current",
    "compute_mode",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
    "fabric.state",
    "fabric.status",
)
# Drivers before R535 name the clock event reasons "throttle reasons".
OLD_NAMES = {f: f.replace("clocks_event_reasons", "clocks_throttle_reasons")
             for f in HEALTH_FIELDS if f.startswith("clocks_event_reasons")}
INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
NVLINK_GPU = re.compile(r"^GPU (\d+): .*\(UUID: ([^)]+)\)")
NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
# preflight.json holds each node's answers (every view reads it within the run's budget, a
# per-node share of budget.RECORD_PER_NODE): everything kept here is bounded and small.
MAX_GPUS = 32
MAX_LINKS = 18  # NVLink 4 (H100) has 18 links per GPU
# A kernel log record: "PRIO,SEQ,MICROSECONDS,FLAGS;MESSAGE" (Documentation/ABI/testing/dev-kmsg).
KMSG_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)\b(.*)")
KMSG_RECORDS = 20000  # the ring holds a few MB at most; never more than this many records
XID_KEEP = 16


def _smi(flags: List[str], seconds: int = SMI_SECONDS) -> Tuple[str, Optional[str]]:
    """(stdout, None) or ("", why not); stdout and stderr are searched for a refused field."""
    try:
        out = subprocess.run(["nvidia-smi", *flags], capture_output=True, text=True,
                             timeout=seconds)
    except FileNotFoundError:
        return "", "nvidia-smi is not on PATH"
    except subprocess.TimeoutExpired:
        return "", f"nvidia-smi did not answer within {seconds} s"
    if out.returncode:
        return "", (out.stdout.strip() + " " + out.stderr.strip()).strip()[:400] or \
            f"nvidia-smi exited {out.returncode}"
    return out.stdout, None


def query_health(fields: Tuple[str, ...] = HEALTH_FIELDS) -> Dict[str, Any]:
    """{"gpus": [{field: value}], "dropped": [...]} for every GPU of the host, or {"error"}.
    Each refused field is dropped (its old name tried once), at most once per field."""
    wanted, dropped = list(fields), []
    for _ in range(len(fields) * 2 + 1):
        out, error = _smi([f"--query-gpu={','.join(KEY_FIELDS + tuple(wanted))}",
                           "--format=csv,noheader,nounits"])
        refused = INVALID_FIELD.search(error or "")
        if refused and refused.group(1) in wanted:
            name = refused.group(1)
            at = wanted.index(name)
            if name in OLD_NAMES:
                wanted[at] = OLD_NAMES[name]
            else:
                wanted.pop(at)
                dropped.append(name)
            continue
        if error:
            return {"error": error, "dropped": dropped}
        return {"gpus": parse_health(out, [_new_name(f) for f in wanted]), "dropped": dropped}
    return {"error": "nvidia-smi refused every health field", "dropped": dropped}


def _new_name(field: str) -> str:
    return next((new for new, old in OLD_NAMES.items() if old == field), field)


def parse_health(text: str, fields: List[str]) -> List[Dict[str, str]]:
    """Rows of `--query-gpu=index,uuid,pci.bus_id,FIELDS --format=csv,noheader,nounits`; a row
    with another number of values is kept as {"index", "unparsed"} (never dropped silently)."""
    gpus = []
    for line in text.strip().splitlines()[:MAX_GPUS]:
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != len(KEY_FIELDS) + len(fields):
            gpus.append({"index": parts[0][:16], "unparsed": line[:300]})
            continue
        gpus.append(dict(zip(("index", "uuid", "bus_id", *fields), (p[:80] for p in parts))))
    return gpus


def nvlink_status() -> Dict[str, Any]:
    """`nvidia-smi nvlink -s`: per GPU index, each link's speed text or "<inactive>"."""
    out, error = _smi(["nvlink", "-s"])
    if error:
        return {"error": error}
    return {"gpus": parse_nvlink(out)}


def parse_nvlink(text: str) -> Dict[str, Dict[str, Any]]:
    gpus: Dict[str, Dict[str, Any]] = {}
    current: Optional[Dict[str, Any]] = None
    for line in text.splitlines()[:MAX_GPUS * (MAX_LINKS + 2)]:
        head = NVLINK_GPU.match(line)
        if head:
            if len(gpus) >= MAX_GPUS:
                break
            current = gpus.setdefault(head.group(1), {"uuid": head.group(2), "links": {}})
            continue
        link = NVLINK_LINK.match(line)
        if link and current is not None and len(current["links"]) < MAX_LINKS:
            current["links"][link.group(1)] = link.group(2)[:40]
    return gpus


def recent_xids(path: Path = Path("/dev/kmsg"), uptime: Path = Path("/proc/uptime"),
                window: float = 24 * 3600) -> Dict[str, Any]:
    """NVRM Xid lines of the kernel log from the last `window` seconds, read without blocking;
    {"readable": False, "why"} where the container may not read the log."""
    try:
        now = float(uptime.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        now = None
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return {"readable": False, "why": f"{path}: {exc.strerror}"}
    found: List[Dict[str, Any]] = []
    try:
        for _ in range(KMSG_RECORDS):
            try:
                raw = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record was overwritten while reading: go on
                    continue
                if exc.errno != errno.EAGAIN:
                    return {"readable": False, "why": f"{path}: {exc.strerror}"}
                break
            if not raw:
                break
            xid = parse_kmsg_record(raw.decode("utf-8", "replace"))
            if xid and (now is None or now - xid["seconds"] <= window):
                found.append(xid)
                found = found[-XID_KEEP:]
    finally:
        os.close(fd)
    return {"readable": True, "xids": found}


def parse_kmsg_record(record: str) -> Optional[Dict[str, Any]]:
    match = KMSG_RECORD.match(record.strip())
    if not match:
        return None
    xid = XID_LINE.search(match.group(2))
    if not xid:
        return None
    return {"seconds": int(match.group(1)) / 1e6, "pci": xid.group(1), "xid": int(xid.group(2)),
            "text": match.group(2)[:160]}


def health_report() -> Dict[str, Any]:
    started = time.monotonic()
    report = {"query": query_health(), "nvlink": nvlink_status(), "kernel": recent_xids()}
    report["seconds"] = round(time.monotonic() - started, 3)  # what these probes add
    return report
