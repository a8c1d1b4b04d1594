#!/usr/bin/env python3
"""Summary: The every-GPU health probe and a node's own NCCL collective, for real, on this GPU
machine (no Ray needed: the GPU machine's python3 has torch only).

Usage: python3 dev/gpu-checks-real.py [--out FILE] [--seconds 60] [--gloo]

Runs what preflight runs on each node: gpu_health_probe.health_report() (one bounded
nvidia-smi health query over every GPU, `nvidia-smi nvlink -s`, the kernel log's Xids) and
limits_probe.limits_report(), judged by gpu_health/node_limits as preflight does; then one
process per local GPU (CUDA_VISIBLE_DEVICES=i) running collective_rank's stages over NCCL on the
node's own GPUs (rendezvous, init, 1-element and 64 MiB all-reduces, Gloo), judged by
node_collective.judge_node. Prints each part's seconds (the preflight budget) and the findings,
writes everything to --out as JSON; exit 0 when no error finding, 1 otherwise. --gloo runs the
ranks over Gloo on the CPU (a machine without GPUs: the test suite's run of this script).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[1] / "tools" / "verl" / "two-worker-grpo"
sys.path.insert(0, str(BUNDLE))
from twgrpo.checks.preflight import gpu_health, node_limits
from twgrpo.checks.nodeside import gpu_health_probe, limits_probe
from twgrpo.checks.rounds import node_collective  # noqa: E402
from twgrpo.run.profile import load_profile, with_overrides  # noqa: E402

RANK = ("import json, sys; from twgrpo.checks.nodeside.collective_rank import collective_rank; "
        "print('RESULT ' + json.dumps(collective_rank(json.loads(sys.argv[1]))))")


class OneNode:
    """What the checks read of preflight's context, for this machine alone."""

    def __init__(self, report, gpus):
        self.reports = {0: report}
        self.profile = with_overrides(load_profile("smoke-1x1"), GPUS_PER_NODE=max(gpus, 1))
        self.nodes = [{"Resources": {"GPU": float(gpus)}}]

    def answered(self, at_least=1):
        return sorted(self.reports.items())

    def node_name(self, ordinal):
        return f"node {ordinal} (this machine)"

    def is_gpu_node(self, ordinal):
        return True


def local_collective(gpus: int, seconds: float, nccl: bool = True):
    folder = Path(tempfile.mkdtemp(prefix="twgrpo-node-collective-"))
    env = {**os.environ, "PYTHONPATH": f"{BUNDLE}:{os.environ.get('PYTHONPATH', '')}"}
    procs = []
    for rank in range(gpus):
        spec = {"rank": rank, "world": gpus, "ordinal": 0, "folder": str(folder), "token": "gpu-check",
                "seconds": seconds, "nccl": nccl, "node_ip": "127.0.0.1"}
        procs.append(subprocess.Popen([sys.executable, "-c", RANK, json.dumps(spec)],
                                      env={**env, "CUDA_VISIBLE_DEVICES": str(rank)},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = {}
    for rank, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            results[rank] = {"late": True, "stage": None}
            continue
        line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
        results[rank] = json.loads(line[7:]) if line else {"error": f"no result: {err.strip()[-300:]}"}
    return results, folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "gpu-checks.json")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--gloo", action="store_true", help="Gloo on the CPU instead of NCCL")
    args = parser.parse_args()
    started = time.monotonic()
    health = gpu_health_probe.health_report()
    limits = limits_probe.limits_report()
    gpus = len(health.get("query", {}).get("gpus", []))
    report = {"node_ip": "127.0.0.1", "gpu_health": health, "limits": limits, "env": {},
              "system": {"network": {"socket_env": {}}}}
    ctx = OneNode(report, gpus)
    findings = (gpu_health.check_gpu_health(ctx) + gpu_health.check_xid_errors(ctx) +
                gpu_health.check_nvlink(ctx) + node_limits.check_process_limits(ctx) +
                node_limits.check_ray_space(ctx))
    probes = time.monotonic() - started
    started = time.monotonic()
    ranks, folder = local_collective(gpus, args.seconds, not args.gloo) if gpus else ({}, Path("."))
    collective = time.monotonic() - started
    findings += node_collective.judge_node("node 0 (this machine)", ranks, folder, collective)
    record = {"gpus": gpus, "probe_seconds": {"health": health["seconds"], "limits": limits["seconds"],
                                              "both_judged": round(probes, 3)},
              "node_collective_seconds": round(collective, 3), "ranks": ranks,
              "health": health, "limits": limits, "findings": [f.to_json() for f in findings]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, default=str))
    print(f"GPUs: {gpus}; health probe {health['seconds']} s, limits probe {limits['seconds']} s, "
          f"node collective {collective:.2f} s over {gpus} rank(s)")
    for rank, result in sorted(ranks.items()):
        print(f"  rank {rank}: stage {result.get('stage')}, stages {result.get('stages')}, "
              f"bus {result.get('bus_gbps')} GB/s, error {result.get('error')}")
    for f in findings:
        print(f"  ({f.id}) {f.obj}: {f.message}")
    print(f"wrote {args.out}")
    return 1 if any(f.level == "error" for f in findings) else 0


if __name__ == "__main__":
    raise SystemExit(main())
