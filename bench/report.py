#!/usr/bin/env python3
"""Summary: make report on the real run with its driver.log grown to a size a long multi-node
run writes (NCCL noise between the launcher's phase lines), against grep on the same log.

Usage: bench/report.py SCRATCH [--gib 1.0]
Reports: report time / `grep -c` time of the phase lines (target <= 3x), and the report's peak
RSS at 1/10 and all of the size (target <= 100 MiB, flat).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = next((HERE.parent / "tests" / "fixtures" / "real-smoke-run").glob("smoke-*"))
VERIFY = HERE.parent / "tools" / "verl" / "two-worker-grpo" / "verify-two-worker-grpo-v1.py"
NOISE = ("\x1b[36m(WorkerDict pid=4281)\x1b[0m vm:4281:4281 [0] NCCL INFO Channel 07/64 : 0 1 2 3 "
         "4 5 6 7 8 9 10 11 12 13 14 15\n").encode() * 4096
REPORT = """
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run([sys.executable, sys.argv[1], "report", "--output-dir", sys.argv[2]],
               stdout=subprocess.DEVNULL, check=True)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def grown_run(scratch: Path, size: int) -> Path:
    """The real run, its driver.log with noise inserted before the training phase's end."""
    run = scratch / f"{FIXTURE.name}-{size >> 20}mib"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(FIXTURE, run)
    lines = (FIXTURE / "driver.log").read_bytes().splitlines(keepends=True)
    cut = next(i for i, l in enumerate(lines) if l.startswith(b"run-two-worker-grpo-v1: phase training ended"))
    with open(run / "driver.log", "wb") as stream:
        stream.writelines(lines[:cut])
        for _ in range(max(1, size // len(NOISE))):
            stream.write(NOISE)
        stream.writelines(lines[cut:])
    return run


def report(run: Path) -> tuple:
    out = subprocess.run([sys.executable, "-c", REPORT, str(VERIFY), str(run)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def grep_seconds(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["grep", "-c", "^run-two-worker-grpo-v1: phase", str(path)], capture_output=True,
                   check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    big = grown_run(args.scratch, int(args.gib * (1 << 30)))
    small = grown_run(args.scratch, int(args.gib * (1 << 30) / 10))
    log = big / "driver.log"
    grep_seconds(log)  # warm the page cache
    g = min(grep_seconds(log) for _ in range(2))
    r_small = report(small)
    r_big = min(report(big) for _ in range(2))
    print(f"driver.log: {log.stat().st_size / (1 << 30):.2f} GiB, {os.cpu_count()} cores")
    print(f"  grep -c phase lines       {g:6.2f} s")
    print(f"  make report (whole page)  {r_big[0]:6.2f} s")
    print(f"  ratio report / grep:      {r_big[0] / g:.1f}x (target <= 3x)")
    print(f"  peak RSS: {r_small[1]:.0f} MiB at 1/10 size, {r_big[1]:.0f} MiB at full size "
          "(target <= 100 MiB, flat)")
    print(json.dumps({"grep_s": g, "report_s": r_big[0], "rss_mib": [r_small[1], r_big[1]]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
