"""Preflight's judgement of what each node's probe answered (probe.py runs on the node): shared
storage both ways, GPUs and driver, the storage mount, NCCL's environment, the rollout engine,
the inputs each node sees, and the same inputs and packages on every node.

ctx is preflight's context: ctx.answered() gives (ordinal, report) of the nodes that answered,
ctx.node_name(ordinal) names a node in findings.
"""
from __future__ import annotations

from typing import Any, Dict, List

from ...run.command import nccl_env
from ...run.findings import Finding, Skip, finding, mismatch
from ...run.profile_keys import ROLLOUT_ENGINES
from ...run.records import read_json
from ...run.runfolder import RunFolder


def check_shared_storage(ctx) -> List[Finding]:
    found = []
    for ordinal, report in ctx.answered():
        name = ctx.node_name(ordinal)
        if not report["sentinel_ok"]:
            found.append(finding("PRE-E017", name, "the node cannot read the sentinel the driver "
                                 f"wrote to {RunFolder(ctx.run_dir).shared_storage_sentinel}"))
        marker = RunFolder(ctx.run_dir).preflight_nodes / f"node-{ordinal}.json"
        try:
            seen = read_json(marker)
            ok = seen.get("node_id") == report["node_id"] and seen.get("token") == ctx.token
        except (OSError, ValueError, AttributeError):
            ok = False
        if not ok:
            found.append(finding("PRE-E018", name, f"the driver cannot read back {marker} "
                                 f"({report.get('marker_error') or 'absent or foreign'})"))
    return found


def check_gpus(ctx) -> List[Finding]:
    found = []
    for ordinal, report in ctx.answered():
        if not ctx.is_gpu_node(ordinal):
            continue  # a CPU-only node (head or worker): Ray gave it no GPU, verl puts no rank there
        name, query = ctx.node_name(ordinal), report["gpu_query"]
        if "error" in query:
            found.append(finding("PRE-E019", name, query["error"]))
            continue
        gpus = query["gpus"]
        if len(gpus) != ctx.profile.GPUS_PER_NODE:
            found.append(mismatch("PRE-E020", name, "GPUs listed by nvidia-smi",
                                  ctx.profile.GPUS_PER_NODE, len(gpus)))
        models = ctx.profile.gpu_models  # empty: any model (*)
        wrong = sorted({g["name"] for g in gpus if g["name"] not in models})
        if models and wrong:
            found.append(mismatch("PRE-E021", name, "GPU model", ctx.profile.GPU_MODEL,
                                  ", ".join(wrong)))
    return found


def _version(text: str) -> tuple:
    numbers = [int(part) for part in text.split(".")]
    return tuple(numbers + [0] * (3 - len(numbers)))


def check_driver_version(ctx) -> List[Finding]:
    found = []
    for ordinal, report in ctx.answered():
        for driver in sorted({g["driver"] for g in report["gpu_query"].get("gpus", [])}):
            if _version(driver) < _version(ctx.profile.MIN_DRIVER):
                found.append(finding("PRE-E022", ctx.node_name(ordinal),
                                     f"NVIDIA driver {driver} is older than {ctx.profile.MIN_DRIVER}",
                                     expected=f">= {ctx.profile.MIN_DRIVER}", actual=driver))
    return found


def check_storage_mount(ctx) -> List[Finding]:
    found = []
    known = [(ordinal, report["mount"]) for ordinal, report in ctx.answered() if report.get("mount")]
    if not known:
        raise Skip("no node could read its mountinfo, so no mount can be judged")
    for ordinal, mount in known:
        if mount.get("fstype") == "overlay" or "ro" in mount.get("options", "").split(","):
            found.append(finding("PRE-E023", ctx.node_name(ordinal),
                                 f"storage mount {mount.get('target')} is {mount.get('fstype')} "
                                 f"({mount.get('options')})", mount=mount))
    return found


def check_nccl_env(ctx) -> List[Finding]:
    """NCCL_IB_DISABLE as the profile's NCCL_TRANSPORT sets it: 1 for socket, 0 for ib."""
    found = []
    want = nccl_env(ctx.profile)["NCCL_IB_DISABLE"]
    for ordinal, report in ctx.answered():
        value = report["env"].get("NCCL_IB_DISABLE")
        if value != want:
            found.append(mismatch("PRE-E024", ctx.node_name(ordinal), "NCCL_IB_DISABLE", want,
                                  "unset" if value is None else repr(value)))
    return found


def check_rollout_engine(ctx) -> List[Finding]:
    module = ROLLOUT_ENGINES[ctx.profile.ROLLOUT_ENGINE]
    return [finding("PRE-E025", ctx.node_name(ordinal), f"ROLLOUT_ENGINE={ctx.profile.ROLLOUT_ENGINE}"
                    f" needs the module {module}, which is not importable there")
            for ordinal, report in ctx.answered() if not report["engine_importable"]]


def check_node_inputs(ctx) -> List[Finding]:
    found = []
    for ordinal, report in ctx.answered():
        for item in report["inputs"]["findings"]:
            found.append(Finding(item["id"], f"{ctx.node_name(ordinal)}: {item['obj']}",
                                 item["message"], item["hint"], item["evidence"]))
    return found


def _identity(report: Dict[str, Any]) -> Dict[str, Any]:
    evidence = report["inputs"]["evidence"]
    return {key: evidence.get(key) for key in ("verl_commit", "verl_sums_sha256", "model_sums_sha256",
                                                "data_sums_sha256", "parquet_rows",
                                                "reward_sha256", "data_converter_sha256")}


def check_same_inputs(ctx) -> List[Finding]:
    answered = ctx.answered(at_least=2)
    first_ordinal, first = answered[0]
    return [mismatch("PRE-E028", ctx.node_name(ordinal), f"inputs seen (vs {ctx.node_name(first_ordinal)})",
                     _identity(first), _identity(report))
            for ordinal, report in answered[1:] if _identity(report) != _identity(first)]


def check_same_packages(ctx) -> List[Finding]:
    answered = ctx.answered(at_least=2)
    found = []
    base_ordinal, base = answered[0]
    base_name = ctx.node_name(base_ordinal)
    for ordinal, report in answered[1:]:
        name = ctx.node_name(ordinal)
        py_base = {k: base["python"][k] for k in ("version", "implementation")}
        py_here = {k: report["python"][k] for k in ("version", "implementation")}
        if py_here != py_base:
            found.append(mismatch("PRE-E027", name, f"Python (vs {base_name})", py_base, py_here))
        for package, ident in sorted(report["packages"].items()):
            want = base["packages"].get(package, {})
            if ident.get("version") != want.get("version"):
                found.append(mismatch("PRE-E026", name, f"{package} version (vs {base_name})",
                                      want.get("version") or "absent",
                                      ident.get("version") or "absent"))
            elif ident.get("origin") != want.get("origin"):
                found.append(mismatch("PRE-W001", name, f"{package} location (vs {base_name})",
                                      want.get("origin"), ident.get("origin")))
    return found
