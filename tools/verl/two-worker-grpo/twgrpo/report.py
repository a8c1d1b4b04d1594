"""A human summary of one run folder, from its records (make report RUN_ID=...)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Dict

from .findings import UsageError
from .profile import Profile


def _load(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def main(args: argparse.Namespace, profile: Profile) -> int:
    from .cli import run_folder
    run_dir, run_id = run_folder(args)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} does not exist")
    if (run_dir / "SUCCESS").is_file():
        verdict = f"SUCCESS ({(run_dir / 'SUCCESS').read_text(encoding='utf-8').strip()})"
    elif (run_dir / "FAILED").is_file():
        fields = dict(line.split("=", 1) for line in
                      (run_dir / "FAILED").read_text(encoding="utf-8").splitlines() if "=" in line)
        verdict = (f"FAILED in phase {fields.get('phase')} (exit {fields.get('exit_status')}, "
                   f"signal {fields.get('signal')}, {fields.get('time')})")
    else:
        verdict = "no SUCCESS or FAILED yet (running, or stopped without a trace)"
    print(f"run {run_id}: {verdict}")
    print(f"profile {profile.PROFILE_NAME}: {profile.NODES} nodes x {profile.GPUS_PER_NODE} "
          f"{profile.GPU_MODEL}, {profile.TARGET_STEPS} steps, rollout {profile.ROLLOUT_ENGINE}")
    for name in ("inputs.json", "preflight.json", "verification.json"):
        record = _load(run_dir / name)
        if record:
            failed = [c["name"] for c in record.get("checks", []) if c.get("status") == "failed"]
            print(f"{record.get('phase')}: {record.get('status')}"
                  + (f" (failed: {', '.join(failed)})" if failed else ""))
    for worker in _load(run_dir / "preflight.json").get("workers", []):
        print(f"  node {worker['ordinal']}: {worker['hostname']} {worker['node_ip']} "
              f"{'head' if worker.get('is_head') else 'worker'}, {worker['gpu_count']} x "
              f"{', '.join(sorted(set(worker['gpu_names'])))}, driver {', '.join(worker['driver'])}")
    placement = _load(run_dir / "actor-placement.json")
    if placement.get("node_counts"):
        print(f"ranks per node: {placement['node_counts']}")
    metrics = _load(run_dir / "verification.json").get("evidence", {}).get("tensorboard", {})
    for tag, value in sorted(metrics.get("metrics", {}).items()):
        print(f"  {tag} at step {value['step']}: {value['value']}")
    return 0
