#!/usr/bin/env python3
"""Summary: Preflight wall time on 2, 4 and 8 Ray nodes (real multi-host test clusters), and
how long each cluster takes to come up, and what the OS and network checks add (the slowest
node's system probe, the reachability round, the collective probe over Gloo: the
test cluster's GPUs are stubs), and what the every-GPU and job-shape checks add (the slowest
node's GPU health and limits probes, each node's own collective, verl's placement groups, the
Ray ports and clocks round, the shared-volume trial). Probes run concurrently, so the ratio to
2 nodes should stay near flat. Needs root (network namespaces); the collective probes need
torch in the test venv.

Usage: bench/preflight.py SCRATCH [--nodes 2 4 8]
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from dev import netcluster  # noqa: E402

BUNDLE = Path("tools/verl/two-worker-grpo")


class FixtureFailed(Exception):
    """The test storage root could not be made (the message quotes the tool's last lines)."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args()
    reason = netcluster.missing_prerequisites()
    if reason:
        print(f"preflight bench skipped: {reason}")
        return 0
    results, added, new = {}, {}, {}
    for nodes in args.nodes:
        root = args.scratch / f"c{nodes}"
        cluster = netcluster.Cluster(root)

        def prepare(storage: Path, nodes=nodes) -> None:
            made = subprocess.run([sys.executable, str(REPO / "tests/lib/fixture.py"), str(storage),
                                   "--nodes", str(nodes), "--gpus-per-node", "2",
                                   f"--set=TRAIN_BATCH_SIZE={2 * nodes}", f"--set=PPO_MINI_BATCH_SIZE={2 * nodes}"],
                                  capture_output=True, text=True)
            if made.returncode:  # say why, not a traceback of the captured call
                raise FixtureFailed(f"tests/lib/fixture.py exited {made.returncode} under {sys.executable}: "
                                    + " | ".join((made.stderr or made.stdout).strip().splitlines()[-6:]))

        started = time.perf_counter()
        try:
            cluster.up(nodes, 2, env={"PYTHONPATH": str(root / "storage" / BUNDLE / "rollout")}, prepare=prepare)
        except FixtureFailed as failed:  # up() has taken the cluster down
            print(f"preflight bench: {failed}", file=sys.stderr)
            return 2
        bring_up = time.perf_counter() - started
        try:
            storage = cluster.storage
            times = []
            for attempt in range(2):
                run = storage / "runs/verl/two-worker-grpo" / f"bench-{attempt}"
                started = time.perf_counter()
                out = cluster.driver([sys.executable, str(storage / BUNDLE / "verify-two-worker-grpo-v1.py"),
                                      "preflight", "--profile", "test-fixture", "--run-id", run.name,
                                      "--storage-root", str(storage), "--output-dir", str(run),
                                      "--collective", "gloo"], check=False)
                times.append(time.perf_counter() - started)
                if out.returncode:
                    print(out.stdout[-2000:], out.stderr[-2000:])
                    return 1
                record = json.loads((run / "preflight.json").read_text())
                # What the OS/network checks add: the slowest node's system probe (inside the
                # concurrent probe round) and the reachability round.
                added.setdefault(nodes, []).append(
                    (max(n["system"]["seconds"] for n in record["nodes"]), record["reach_seconds"],
                     record["collective"]["seconds"] or 0.0))
                new.setdefault(nodes, []).append(
                    (max(n["gpu_health"]["seconds"] + n["limits"]["seconds"] for n in record["nodes"]),
                     record["node_collective"]["seconds"], record["job_shape"]["seconds"],
                     record["node_agents"]["seconds"], record["storage_trial"]["seconds"]))
            results[nodes] = (bring_up, min(times))
        finally:
            cluster.down()
    base = results[min(results)][1]
    print("nodes  cluster up  preflight  ratio to 2 nodes  system probe  reachability  collective")
    for nodes, (up, pre) in sorted(results.items()):
        system, reach, coll = min(added[nodes], key=sum)
        print(f"{nodes:5d}  {up:8.1f} s  {pre:7.1f} s  {pre / base:14.2f}x  {system:10.2f} s  "
              f"{reach:10.2f} s  {coll:8.2f} s")
    print("\nnodes  gpu health+limits  node collective  job shape  ports+clocks  storage trial")
    for nodes in sorted(new):
        health, local, shape, agents, trial = min(new[nodes], key=sum)
        print(f"{nodes:5d}  {health:15.2f} s  {local:13.2f} s  {shape:7.2f} s  {agents:10.2f} s  "
              f"{trial:11.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
