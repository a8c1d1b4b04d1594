"""What the machine must offer before make smoke's environment is built: each a named check that
returns findings, run before anything is downloaded or written."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from twgrpo.run.findings import Finding, finding

from .lockfile import satisfies

TIMEOUT = 60  # seconds for one nvidia-smi, pip or Python probe: a hung tool is a finding, not a hang


def run(argv: Sequence[str], timeout: int = TIMEOUT, env: Optional[Dict[str, str]] = None):
    """(exit code, stdout+stderr); 127 when the program is missing, 124 when it ran too long."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]}: no answer in {timeout} s"
    return done.returncode, done.stdout + done.stderr


def last_json(out: str):
    """The last line of OUT that is JSON (a tool's warnings may follow or precede it), or None."""
    for line in reversed(out.strip().splitlines()):
        if line[:1] in "[{":
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def driver_cuda() -> tuple:
    """(findings, the highest CUDA version the driver supports as "13.0", or "" when unknown)."""
    if not shutil.which("nvidia-smi"):
        return [finding("ENV-E001", "nvidia-smi", "nvidia-smi is not on PATH: no NVIDIA GPU or driver here")], ""
    code, out = run(["nvidia-smi", "-L"])
    if code != 0 or not re.search(r"^GPU \d+:", out, flags=re.MULTILINE):
        line = (out.strip().splitlines() or ["no output"])[-1][:200]
        return [finding("ENV-E001", "nvidia-smi", f"nvidia-smi lists no GPU (exit {code}): {line}")], ""
    match = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", run(["nvidia-smi"])[1])  # its table's header
    return [], match.group(1) if match else ""


def base_torch(python: str) -> tuple:
    """(findings, torch's version or "" when the base Python has none, its CUDA version or "")."""
    probe = ("import json\ntry:\n import torch\n print(json.dumps([torch.__version__, torch.version.cuda or '']))\n"
             "except ImportError:\n print(json.dumps(['', '']))")
    code, out = run([python, "-c", probe])
    version, cuda = (last_json(out) if code == 0 else None) or (None, None)
    if version is None:
        tail = (out.strip().splitlines() or ["no output"])[-1][:200]
        return [finding("ENV-E002", python, f"importing torch failed (exit {code}): {tail}")], "", ""
    return [], version, cuda


def torch_fits(python: str, torch: str, cuda: str, spec: str, driver: Optional[str]) -> List[Finding]:
    """The base Python's torch against the lock's range and the driver's CUDA (None: not checked)."""
    if not satisfies(torch, spec):
        return [finding("ENV-E002", python, f"torch {torch} is outside {spec}", torch=torch, want=spec)]
    if driver is None:
        return []
    if not cuda:
        return [finding("ENV-E003", python, f"torch {torch} is a CPU build: it cannot use the GPU", torch=torch)]
    if driver and int(cuda.split(".")[0]) > int(driver.split(".")[0]):
        return [finding("ENV-E003", python, f"torch {torch} is built for CUDA {cuda}, the driver supports "
                        f"CUDA {driver} at most", torch=torch, torch_cuda=cuda, driver_cuda=driver)]
    return []


def free_space(folder: Path, needed: int) -> List[Finding]:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < needed:
        return [finding("ENV-E005", str(folder), f"{free / 2**30:.1f} GiB free, about {needed / 2**30:.1f} GiB "
                        "needed for the environment", free=free, needed=needed)]
    return []


def index_reachable(python: str, name: str) -> List[Finding]:
    """Whether pip reaches its package index: asks it for NAME's versions, writing nothing."""
    code, out = run([python, "-m", "pip", "index", "versions", "--disable-pip-version-check", name])
    if code == 0 and "versions:" in out:
        return []
    tail = (out.strip().splitlines() or ["no output"])[-1][:200]
    return [finding("ENV-E004", "package index", f"pip could not list {name} from its index (exit {code}): {tail}")]
