#!/usr/bin/env python3
"""Summary: The smoke run across several Ray hosts on one GPU machine (needs root and GPUs).

Usage: tests/cluster/multihost-smoke.py ROOT --nodes N --gpus-per-node G --verl-wheel WHEEL [--keep DIR]

Brings up N Ray hosts as the multi-host test cluster does (a network namespace, hostname and
Ray temp dir each; ray start --node-ip-address), each owning G GPUs through
CUDA_VISIBLE_DEVICES, with the smoke inputs on one shared storage path. NCCL then sees N hosts
and talks over Socket with NCCL_IB_DISABLE=1. With fewer GPUs than N x G and G = 1, the hosts
share GPU 0 (NCCL still sees separate hosts). Runs the real launcher through preflight, verl
0.6.0 GRPO and postflight with a profile smoke-NxG made from smoke-1x1; prints the verdict and
each phase's wall time. Exit code: the launcher's (2 for a machine that cannot do it).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Path bootstrap: the repo root (prep/, dev/) and the bundle's twgrpo; netcluster is beside us.
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]
import netcluster  # noqa: E402
from dev.sandbox import install_sandbox  # noqa: E402
from prep.volume import pin  # noqa: E402
from twgrpo.profile import load_profile  # noqa: E402

BUNDLE_REL = Path("tools/verl/two-worker-grpo")
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=1)
    parser.add_argument("--verl-wheel", type=Path, required=True)
    parser.add_argument("--keep", type=Path, help="copy the run folder here before the teardown "
                        "(the shared storage is a tmpfs that goes with the cluster)")
    args = parser.parse_args()
    reason = netcluster.missing_prerequisites()
    gpus = gpu_count()
    if reason or gpus == 0:
        print(f"multihost-smoke: {reason or 'no NVIDIA GPU'}", file=sys.stderr)
        return 2
    nodes, per = args.nodes, args.gpus_per_node
    if gpus >= nodes * per:
        visible = [",".join(str(i * per + g) for g in range(per)) for i in range(nodes)]
    elif per == 1:
        visible = ["0"] * nodes
        print(f"multihost-smoke: {gpus} GPU(s) for {nodes} hosts: they share GPU 0")
    else:
        print(f"multihost-smoke: {nodes} x {per} needs {nodes * per} GPUs, this machine has {gpus}",
              file=sys.stderr)
        return 2
    name = f"smoke-{nodes}x{per}"
    cluster = netcluster.Cluster(args.root, stub_gpus=False)
    storage = cluster.storage
    times = {}

    def prepare(storage: Path) -> None:
        started = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "dev" / "generate-inputs.py"), "--storage-root",
                        str(storage), "--profile", "smoke-1x1", "--verl-wheel", str(args.verl_wheel)],
                       check=True)
        base = load_profile("smoke-1x1")
        text = pin.profile_text(base, name, {"NODES": str(nodes), "GPUS_PER_NODE": str(per)},
                                f"smoke-1x1 on {nodes} Ray hosts x {per} GPUs (tests/cluster/multihost-smoke.py).")
        install_sandbox(storage / BUNDLE_REL, {name: text})
        times["inputs generated"] = time.perf_counter() - started

    runtime = json.loads(subprocess.run(
        [sys.executable, str(REPO / BUNDLE_REL / "verify-two-worker-grpo-v1.py"), "runtime-env",
         "--profile", "smoke-1x1", "--storage-root", str(storage)],
        capture_output=True, text=True, check=True).stdout)["env_vars"]
    env = {**runtime, **NO_MULTICAST, "PYTHONPATH": ":".join(
        [runtime["PYTHONPATH"], str(storage / BUNDLE_REL / "rollout"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    cluster.up(nodes, per, env=env, prepare=prepare,
               node_envs=[{"CUDA_VISIBLE_DEVICES": v} for v in visible])
    times["cluster up"] = time.perf_counter() - started - times.get("inputs generated", 0)
    try:
        run_id = f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        command = subprocess.run(
            [sys.executable, str(REPO / "prep" / "bundle.py"), "driver-command", str(storage),
             "--profile", name, "--run-id", run_id, "--launcher",
             str(storage / BUNDLE_REL / "run-two-worker-grpo-v1.sh")],
            capture_output=True, text=True, check=True).stdout
        started = time.perf_counter()
        out = cluster.driver(["bash", "-c", command], check=False, timeout=1500)
        times["launcher"] = time.perf_counter() - started
        (args.root / "driver-output.log").write_text(out.stdout + out.stderr)
        print((out.stdout + out.stderr)[-6000:])
        run = storage / "runs/verl/two-worker-grpo" / run_id
        verdict = "SUCCESS" if (run / "SUCCESS").is_file() else f"FAILED (exit {out.returncode})"
        print(f"multihost-smoke: run {run_id}: {verdict}; run folder {run}")
        print("multihost-smoke: wall times (s): "
              + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
        if args.keep and run.is_dir():
            shutil.copytree(run, args.keep / run.name, symlinks=True)
        return out.returncode
    finally:
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
