"""Preflight's judgement of every GPU of every GPU node (gpu_health_probe.py answers on the node):
uncorrectable ECC errors, pending page retirement or row remaps, recent Xid errors, MIG mode,
compute mode, clock slowdowns, NVLink links down and the fabric manager's registration. Each
is named with the node, the GPU index and bus id, before any GPU time is spent: a run on such a
GPU dies with a CUDA error or an NCCL timeout that names neither.

ctx is preflight's context (ctx.answered(), ctx.node_name(), ctx.is_gpu_node()).
"""
from __future__ import annotations

from typing import Any, Dict, List

from ...run.findings import Finding, finding

NOT_APPLICABLE = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"}
YES = {"yes", "1", "true"}
ALLOWED_COMPUTE_MODES = {"Default"}
SLOWDOWNS = ("clocks_event_reasons.hw_slowdown", "clocks_event_reasons.hw_thermal_slowdown",
             "clocks_event_reasons.hw_power_brake_slowdown",
             "clocks_event_reasons.sw_thermal_slowdown")
# Xids that mean the GPU or its memory is failing (NVIDIA's Xid catalogue), not an application
# fault (13, 31, 43, 45 come from programs and are left alone).
HARDWARE_XIDS = {48: "double-bit ECC error", 61: "internal micro-controller breakpoint",
                 62: "internal micro-controller halt", 63: "ECC page retirement or row remap",
                 64: "row remapping failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
                 92: "high single-bit ECC error rate", 94: "contained ECC error",
                 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
                 140: "unrecovered ECC error"}
FABRIC_BAD_STATES = {"Not Started", "In Progress"}
FABRIC_OK_STATUS = {"Success"} | NOT_APPLICABLE


def _gpu_nodes(ctx):
    for ordinal, report in ctx.answered():
        if ctx.is_gpu_node(ordinal):
            yield ordinal, report, report.get("gpu_health") or {}


def _gpu(row: Dict[str, Any]) -> str:
    return f"GPU {row.get('index')} ({row.get('bus_id', '?')})"


def check_gpu_health(ctx) -> List[Finding]:
    """The health fields of every GPU on every GPU node."""
    found = []
    for ordinal, _, health in _gpu_nodes(ctx):
        name = ctx.node_name(ordinal)
        query = health.get("query") or {}
        if "gpus" not in query:
            found.append(finding("PRE-W100", name, "the GPUs' health cannot be read: "
                                 f"{query.get('error', 'no answer')}"))
            continue
        # The NVLink fabric joins a node's GPUs: a node of one GPU (a VM slice of an HGX board)
        # runs without it.
        fabric = len(query["gpus"]) > 1
        for row in query["gpus"]:
            if "unparsed" in row:
                found.append(finding("PRE-W100", name, "nvidia-smi printed a health row that "
                                     f"cannot be read: {row['unparsed']!r}"))
                continue
            found += _judge_row(name, row, fabric)
    return found


def _judge_row(name: str, row: Dict[str, str], fabric: bool = True) -> List[Finding]:
    found, gpu = [], _gpu(row)
    ecc = row.get("ecc.errors.uncorrected.volatile.total", "")
    if ecc.isdigit() and int(ecc) > 0:
        found.append(finding("PRE-E201", name, f"{gpu} has {ecc} uncorrectable ECC error(s) since "
                             "the driver loaded", gpu=row))
    pending = [f for f in ("retired_pages.pending", "remapped_rows.pending")
               if row.get(f, "").lower() in YES]
    if pending:
        found.append(finding("PRE-E202", name, f"{gpu} has {' and '.join(pending)}: memory "
                             "waits for a GPU reset", gpu=row))
    if row.get("remapped_rows.failure", "").lower() in YES:
        found.append(finding("PRE-E202", name, f"{gpu} failed to remap a memory row "
                             "(remapped_rows.failure)", gpu=row))
    if row.get("mig.mode.current") == "Enabled":
        found.append(finding("PRE-E204", name, f"{gpu} is in MIG mode: Ray counts the whole GPU, "
                             "torch sees one MIG slice", gpu=row))
    mode = row.get("compute_mode", "")
    if mode not in ALLOWED_COMPUTE_MODES | NOT_APPLICABLE:
        found.append(finding("PRE-E205", name, f"{gpu} compute mode is {mode}: a second process "
                             "(the rollout engine beside the trainer) cannot open it", gpu=row))
    active = [f.split(".", 1)[1] for f in SLOWDOWNS if row.get(f) == "Active"]
    if active:
        found.append(finding("PRE-W101", name, f"{gpu} clocks are held down now: "
                             f"{', '.join(active)} active", gpu=row))
    state, status = row.get("fabric.state", "N/A"), row.get("fabric.status", "N/A")
    if fabric and (state in FABRIC_BAD_STATES or (state == "Completed" and status not in FABRIC_OK_STATUS)):
        found.append(finding("PRE-E208", name, f"{gpu} has not joined the NVLink fabric: "
                             f"fabric.state {state}, fabric.status {status} (the fabric "
                             "manager is not running or failed)", gpu=row))
    return found


def check_xid_errors(ctx) -> List[Finding]:
    """Hardware Xid errors of the last day in a node's kernel log, where it may be read."""
    found = []
    for ordinal, _, health in _gpu_nodes(ctx):
        kernel = health.get("kernel") or {}
        buses = {_pci(r.get("bus_id", "")): r.get("index")
                 for r in (health.get("query") or {}).get("gpus", [])}
        hardware = [x for x in kernel.get("xids", []) if x.get("xid") in HARDWARE_XIDS]
        if hardware:
            listed = "; ".join(f"Xid {x['xid']} ({HARDWARE_XIDS[x['xid']]}) on GPU "
                               f"{buses.get(_pci(x['pci']), '?')} ({x['pci']}) {_ago(x)}"
                               for x in hardware[-4:])
            found.append(finding("PRE-E203", ctx.node_name(ordinal), f"{len(hardware)} hardware "
                                 f"Xid error(s) in the kernel log: {listed}", xids=hardware[-16:]))
    return found


def _pci(bus: str) -> str:
    """00000000:3B:00.0 and 0000:3b:00 name one device: domain-less, lower case, no function."""
    parts = bus.lower().split(":")
    return ":".join(parts[-2:]).split(".")[0] if len(parts) >= 2 else bus.lower()


def _ago(xid: Dict[str, Any]) -> str:
    return f"at {xid['seconds']:.0f} s after boot"


def check_nvlink(ctx) -> List[Finding]:
    """A GPU with fewer active NVLink links than its node's best GPU, or with links down."""
    found = []
    for ordinal, _, health in _gpu_nodes(ctx):
        gpus = (health.get("nvlink") or {}).get("gpus") or {}
        counts = {index: _active(info["links"]) for index, info in gpus.items() if info["links"]}
        if not counts:
            continue  # no NVLink on this node (PCIe GPUs), or nvidia-smi cannot tell
        best = max(counts.values())
        for index, info in sorted(gpus.items(), key=lambda item: int(item[0])):
            down = sorted((int(k) for k, v in info["links"].items() if _inactive(v)))
            if best and (counts.get(index, 0) < best or down):
                found.append(finding("PRE-E207", ctx.node_name(ordinal), f"GPU {index} has "
                                     f"{counts.get(index, 0)} active NVLink link(s), its node's "
                                     f"best GPU {best}; links down: {down or 'none listed'}",
                                     links=info["links"]))
    return found


def _inactive(text: str) -> bool:
    return "inactive" in text.lower()


def _active(links: Dict[str, str]) -> int:
    return sum(1 for text in links.values() if not _inactive(text))
