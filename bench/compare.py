#!/usr/bin/env python3
"""Summary: make compare on two 10,000-step runs, and make runs FORMAT=json on 10,000 runs.

Usage: bench/compare.py SCRATCH [--steps 10000] [--tags 64] [--runs 10000]
Cases (a fresh process each; time and peak RSS):
  compare: two synthesized runs (tests/lib/synthrun.py) of STEPS steps, each with an event file
           of TAGS scalars per step (seeded noise, one scalar drifted in the second run), against
           make report of the same two runs one after the other (ratio compare / 2 reports;
           compare reads each run as the report does, so the target is about 1x) and its peak RSS
  runs:    RUNS runs beside each other, FORMAT=json against the table (ratio json / text; the
           same glance, so about 1x) and the peak RSS of each; make compare FORMAT=json of two of
           them against make report of one (each run's lineage looks at its siblings' run.json)
"""
import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tools" / "verl" / "two-worker-grpo"), str(HERE.parent / "tests" / "lib")]
VERIFY = [sys.executable, "-I", "-B", str(HERE.parent / "tools" / "verl" / "two-worker-grpo" /
                                          "verify-two-worker-grpo-v1.py")]
FIXTURE = next((HERE.parent / "tests" / "fixtures" / "real-smoke-run").glob("smoke-*"))
MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(json.dumps({"rc": rc, "seconds": time.perf_counter() - t,
                  "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure(command) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, *map(str, command)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def long_run(runs: Path, name: str, steps: int, tags: int, seed: int, drift: float) -> None:
    import synthrun
    from tbwrite import write_events
    from twgrpo.run.profile import load_profile, with_overrides
    profile = with_overrides(load_profile("smoke-1x1"), TARGET_STEPS=steps)
    run = runs / name
    synthrun.write_run(run, profile, name, "/mnt/verl-reproduction",
                       [{"hostname": "vm", "ip": "10.0.0.2"}], noise=0)
    record = json.loads((FIXTURE / "run.json").read_text())
    record.update(run_id=name, profile={**record["profile"], "values": dict(profile.values)})
    (run / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    rng = random.Random(seed)
    names = ["critic/score/mean", "actor/pg_loss", "actor/entropy"] + [f"bench/tag{i:02d}" for i in range(tags - 3)]
    for path in (run / "tensorboard").iterdir():
        path.unlink()
    write_events(run / "tensorboard" / "events.out.tfevents.1.host.1.0",
                 [(s, {t: math.tanh(s / 3000) + rng.gauss(0, 0.05) + (drift if t == names[0] else 0.0)
                       for t in names}) for s in range(1, steps + 1)])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--tags", type=int, default=64)
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    root = args.scratch / "storage"
    shutil.rmtree(args.scratch, ignore_errors=True)
    runs = root / "runs" / "verl" / "two-worker-grpo"
    runs.mkdir(parents=True)
    started = time.perf_counter()
    for name, seed, drift in (("long-a", 1, 0.0), ("long-b", 2, 0.3)):
        long_run(runs, name, args.steps, args.tags, seed, drift)
    print(f"compare: two runs of {args.steps:,} steps x {args.tags} scalars "
          f"(made in {time.perf_counter() - started:.0f} s)")
    reports = [measure([*VERIFY, "report", "--storage-root", root, "--run-id", name,
                        "--html", args.scratch / f"{name}.html"]) for name in ("long-a", "long-b")]
    both = sum(r["seconds"] for r in reports)
    cmp = measure([*VERIFY, "compare", "--storage-root", root, "--run-id", "long-b", "--against", "long-a"])
    text = subprocess.run([*VERIFY, "compare", "--storage-root", root, "--run-id", "long-b",
                           "--against", "long-a"], capture_output=True, text=True).stdout
    named = [line.strip() for line in text.splitlines() if line.strip().startswith("differs ")]
    print(f"  compare {cmp['seconds']:.2f} s, {cmp['rss_mib']:.0f} MiB peak, exit {cmp['rc']}; two reports "
          f"{both:.2f} s ({cmp['seconds'] / both:.2f}x), peak {max(r['rss_mib'] for r in reports):.0f} MiB")
    print(f"  named: {named[:3]}")
    shutil.rmtree(runs)
    runs.mkdir()
    record = (FIXTURE / "run.json").read_bytes()
    for n in range(args.runs):
        (runs / f"run-{n:05d}").mkdir()
        (runs / f"run-{n:05d}" / "run.json").write_bytes(record)
        (runs / f"run-{n:05d}" / "SUCCESS").write_bytes(b"")
    table = measure([*VERIFY, "runs", "--storage-root", root])
    listing = measure([*VERIFY, "runs", "--storage-root", root, "--format", "json"])
    print(f"runs: {args.runs:,} runs: table {table['seconds']:.2f} s, {table['rss_mib']:.0f} MiB; "
          f"json {listing['seconds']:.2f} s, {listing['rss_mib']:.0f} MiB "
          f"({listing['seconds'] / table['seconds']:.2f}x)")
    one = measure([*VERIFY, "report", "--storage-root", root, "--run-id", "run-00001",
                   "--html", args.scratch / "one.html"])
    among = measure([*VERIFY, "compare", "--storage-root", root, "--run-id", "run-00001",
                     "--against", "run-00002", "--format", "json"])
    print(f"compare of two runs among {args.runs:,}: {among['seconds']:.2f} s, {among['rss_mib']:.0f} MiB "
          f"(make report of one of them {one['seconds']:.2f} s: {among['seconds'] / one['seconds']:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
