"""What a test-cluster host's processes see: a clean environment with the stub nvidia-smi first
on PATH, or, on a GPU machine, the machine's own environment; then the cluster's and the
node's own variables."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Dict, Optional

STUBS = Path(__file__).resolve().parents[1] / "tests" / "stubs"
# Fast failure detection, so a killed node is seen dead in seconds, not half a minute.
RAY_FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "1000",
                   "RAY_health_check_failure_threshold": "3"}


def host_env(home: Path, gpus_table: Optional[Path], cluster: Dict[str, str],
             extra: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
    """The environment of a command on one host. gpus_table: the stub nvidia-smi's table, or
    None for the machine's own nvidia-smi; extra adds to it, None values unset."""
    venv_bin = str(Path(sys.executable).parent)
    ray_bin = os.path.dirname(shutil.which("ray") or sys.executable)  # may sit apart from python
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if gpus_table is not None:  # a clean environment: only what the test sets
        env = {"PATH": f"{STUBS}:{ray_bin}:{venv_bin}:{system}", "NVIDIA_SMI_STUB": str(gpus_table)}
    else:  # the machine's own: its nvidia-smi and CUDA libraries may sit off the usual paths
        env = {**os.environ, "PATH": f"{ray_bin}:{venv_bin}:{os.environ.get('PATH', system)}"}
        env.pop("RAY_ADDRESS", None)
    env.update({"HOME": str(home), "NCCL_IB_DISABLE": "1", "LANG": "C.UTF-8",
                **RAY_FAST_HEALTH, **cluster})
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    # Packages this machine keeps outside the venv (a pip --target folder) stay importable.
    caller = os.environ.get("PYTHONPATH", "")
    if caller and caller not in env.get("PYTHONPATH", "").split(":"):
        env["PYTHONPATH"] = ":".join(p for p in (env.get("PYTHONPATH", ""), caller) if p)
    return env
