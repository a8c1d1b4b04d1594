"""What one Ray node reports about itself; runs inside a task pinned to that node.

Never raises for a bad node: every problem is a value in the report, judged by the driver.
"""
from __future__ import annotations

import importlib.util
import io
import os
import platform
import re
import socket
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..inputs import inputs
from ..preflight import network
from .gpu_health_probe import health_report
from .limits_probe import limits_report
from .probe_system import nvidia_smi, system_report
from ...run.findings import run_checks
from ...run.mounts import mount_for
from ...run.profile import parse_profile_text
from ...run.records import write_json
from ...run.runfolder import RunFolder

PACKAGES = {  # distribution -> import name
    "torch": "torch", "ray": "ray", "transformers": "transformers", "sglang": "sglang",
    "pyarrow": "pyarrow", "tensorboard": "tensorboard", "verl": "verl",
}
SMI_QUERY = "index,name,memory.total,driver_version,pci.bus_id,uuid"
DRIVER_FORM = re.compile(r"^\d+(\.\d+){1,2}$")
BUS_FORM = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
# Probes only read these inputs checks: they hash manifests, not every byte (the launcher and
# the prep box did that), and prove each node sees the same pinned files.
NODE_INPUT_CHECKS = ("verl-checkout", "model-files", "model-weights", "data-files",
                     "dataset-manifest", "parquet-rows", "reward-file", "data-converter")


def parse_nvidia_smi(text: str) -> List[Dict[str, Any]]:
    """Parse `nvidia-smi --query-gpu=SMI_QUERY --format=csv,noheader,nounits`, strictly."""
    gpus = []
    for number, line in enumerate(text.strip().splitlines(), 1):
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 6:
            raise ValueError(f"line {number} has {len(parts)} fields, expected 6: {line!r}")
        index, name, memory, driver, bus, uuid = parts
        if not index.isdigit() or not memory.isdigit():
            raise ValueError(f"line {number}: index {index!r} or memory {memory!r} is not a number")
        if not DRIVER_FORM.match(driver):
            raise ValueError(f"line {number}: driver version {driver!r} is malformed")
        if not name or not BUS_FORM.match(bus) or not uuid.startswith("GPU-"):
            raise ValueError(f"line {number}: name, bus id or uuid is malformed: {line!r}")
        gpus.append({"index": int(index), "name": name, "memory_mib": int(memory),
                     "driver": driver, "bus_id": bus, "uuid": uuid})
    if not gpus:
        raise ValueError("no GPU listed")
    return gpus


def visible(gpus: List[Dict[str, Any]], cuda_visible: Optional[str]) -> List[Dict[str, Any]]:
    """The GPUs Ray gave this task: nvidia-smi lists the whole host, CUDA_VISIBLE_DEVICES the
    indexes or UUIDs this node hands out (unset: all of them)."""
    if cuda_visible is None:
        return gpus
    wanted = {item.strip() for item in cuda_visible.split(",") if item.strip()}
    return [g for g in gpus if str(g["index"]) in wanted or g["uuid"] in wanted]


def query_gpus() -> Dict[str, Any]:
    out, error = nvidia_smi(f"--query-gpu={SMI_QUERY}", 60)
    if error:
        return {"error": error}
    try:
        host = parse_nvidia_smi(out)
    except ValueError as exc:
        return {"error": f"cannot parse nvidia-smi output: {exc}"}
    cuda_visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {"gpus": visible(host, cuda_visible), "host_gpus": len(host),
            "cuda_visible_devices": cuda_visible}


def package_identity() -> Dict[str, Dict[str, Optional[str]]]:
    """Version and location of each package, without importing it (an import can start CUDA)."""
    import importlib.metadata as metadata
    result = {}
    for dist, module in PACKAGES.items():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            result[dist] = {"version": None, "origin": None}
            continue
        origin = spec.origin or (list(spec.submodule_search_locations or [None])[0])
        version = None
        if module == "verl" and origin:  # a source checkout has no dist-info; verl keeps a file
            version_file = Path(origin).parent / "version" / "version"
            if version_file.is_file():
                version = version_file.read_text(encoding="utf-8").strip()
        if version is None:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = "unknown"
        result[dist] = {"version": version, "origin": origin}
    return result


def read_sentinel(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def probe_node(spec: Dict[str, Any]) -> Dict[str, Any]:
    import ray  # present on every node of the cluster the probe runs on

    context = ray.get_runtime_context()
    run_dir = Path(spec["run_dir"])
    report: Dict[str, Any] = {
        "ordinal": spec["ordinal"],
        "expected_node_id": spec["node_id"],
        "node_id": str(context.get_node_id()),
        "node_ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
    }
    report["sentinel_ok"] = read_sentinel(RunFolder(run_dir).shared_storage_sentinel) == spec["token"]
    marker = RunFolder(run_dir).preflight_nodes / f"node-{spec['ordinal']}.json"
    try:
        marker.parent.mkdir(exist_ok=True)
        write_json(marker, {"ordinal": spec["ordinal"], "node_id": report["node_id"],
                            "hostname": report["hostname"], "token": spec["token"]})
        report["marker"] = str(marker)
    except OSError as exc:
        report["marker_error"] = f"{marker}: {exc.strerror}"
    report["gpu_query"] = query_gpus()
    report["mount"] = mount_for(Path(spec["storage_root"]))
    report["env"] = {key: os.environ.get(key) for key in spec["env_keys"]}
    report["infiniband"] = network.infiniband()
    report["python"] = {"version": platform.python_version(), "implementation":
                        platform.python_implementation(), "executable": sys.executable}
    report["packages"] = package_identity()
    report["system"] = system_report(report["node_ip"], spec["storage_root"])
    report["gpu_health"] = health_report()
    report["limits"] = limits_report()
    engine_module = spec["engine_module"]
    try:
        report["engine_importable"] = importlib.util.find_spec(engine_module) is not None
    except (ImportError, ValueError):
        report["engine_importable"] = False

    profile = parse_profile_text(spec["profile_text"], spec["profile_source"])
    ctx = inputs.InputsContext.build(profile, Path(spec["storage_root"]), spec["verl_root"],
                                     spec["model_root"], spec["data_root"], deep=False)
    checks = [check for check in inputs.CHECKS if check.name in NODE_INPUT_CHECKS]
    results = run_checks("node-inputs", checks, ctx, out=io.StringIO())  # the driver prints
    report["inputs"] = {"findings": [f.to_json() for r in results for f in r.findings],
                        "evidence": ctx.evidence}
    return report
