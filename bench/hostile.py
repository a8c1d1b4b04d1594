#!/usr/bin/env python3
"""Summary: Postflight on hostile and broken artifacts: time, peak memory and verdict of each.

Usage: bench/hostile.py SCRATCH [--bundle DIR] [--only NAME]
Each case plants one hostile file (tests/lib/hostile.py) into a copy of the real smoke run and
runs postflight in a fresh process; peak RSS covers it and its workers (target <= 100 MiB).
--bundle runs another copy of the verifiers (an older checkout) for before/after figures.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Path bootstrap: the test libraries (hostile) and the bundle's twgrpo they use.
sys.path[:0] = [str(HERE.parent / "tests" / "lib"), str(HERE.parent / "tools" / "verl" / "two-worker-grpo")]
import hostile  # noqa: E402

FIXTURE = next((HERE.parent / "tests" / "fixtures" / "real-smoke-run").glob("smoke-*"))
# Runs the command in a child and reports the child's peak RSS (its workers included).
MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
ids = sorted({line.split("(")[1].split(")")[0] for line in done.stdout.splitlines()
              if line.startswith(tuple("/.abcdefghijklmnopqrstuvwxyz")) and ": (" in line})
print(json.dumps({"rc": done.returncode, "ids": ids,
                  "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure(command) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout)
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--bundle", type=Path, default=HERE.parent / "tools" / "verl" / "two-worker-grpo")
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    verify = args.bundle / "verify-two-worker-grpo-v1.py"
    print(f"postflight on hostile artifacts ({verify}); each in a copy of the real smoke run")
    print(f"  {'case':52s} {'seconds':>8s} {'peak MiB':>9s}  verdict")
    for name, (build, size) in hostile.ROWS.items():
        if args.only and not any(o in name for o in args.only):
            continue
        run = args.scratch / FIXTURE.name  # resolved-command.txt names the run folder
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(FIXTURE, run)
        for leftover in ("SUCCESS", "verification.json", "actor-placement.json"):
            (run / leftover).unlink()
        expected = build(run, size)
        r = measure([sys.executable, str(verify), "postflight", "--output-dir", str(run)])
        verdict = "PASS" if r["rc"] == 0 else f"FAIL {','.join(r['ids'])}"
        print(f"  {name:52s} {r['seconds']:8.1f} {r['rss_mib']:9.0f}  {verdict} "
              f"(want {expected or 'PASS'})", flush=True)
        shutil.rmtree(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
