#!/usr/bin/env python3
"""Summary: Postflight's log pass on a 64-node x 8-GPU training log, against grep and against
the tutorial's approach (whole file in memory, per-rank regex scans).

Usage: bench/logscan.py SCRATCH [--gib 1.0]
Reports: scan time / `grep -c 'NCCL INFO'` time (target <= 3x), peak RSS of the scan at 1/10
and all of the size (target <= 100 MiB, flat), the same on a pathological log (the 1/10 log
plus lines that are quadratic for backtracking patterns and a 256 MiB line without a newline),
and the tutorial approach at a size where it finishes.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Path bootstrap: the test libraries (synthrun) and the bundle's twgrpo they use.
sys.path[:0] = [str(HERE.parent / "tests" / "lib"), str(HERE.parent / "tools" / "verl" / "two-worker-grpo")]
import synthrun  # noqa: E402

NODES, GPUS = 64, 8
HOSTS = [{"hostname": f"gpu-node-{i:02d}", "ip": f"10.10.{i // 200}.{10 + i % 200}"} for i in range(NODES)]
TRAINING = ("\x1b[36m(TaskRunner pid=3773)\x1b[0m step:{s} - actor/pg_loss:0.0123 - actor/grad_norm:0.4 - "
            "critic/score/mean:0.25 - response_length/mean:212.5 - timing_s/gen:12.2 - training/global_step:{s}")


PATHOLOGICAL = [b"commId " + b"x" * 400_000, b"ProcessGroupNCCL " * 30_000,
                b"host:1:2 [0] NCCL INFO NET/Socket : Using [0]" + b"a" * 400_000,
                b"global_step_" + b"7" * 300_000]


def write_pathological(path: Path, base: Path, line: int) -> None:
    """``base``, the lines above, then ``line`` bytes of log text without a newline."""
    with open(path, "wb") as stream, open(base, "rb") as source:
        text = source.read(4 << 20)
        stream.write(text)
        shutil.copyfileobj(source, stream)  # streamed: this process stays small, as its children
        stream.write(b"\n".join(PATHOLOGICAL) + b"\n")
        unit = text.replace(b"\n", b" ")
        for _ in range(line // len(unit)):
            stream.write(unit)


def write_log(path: Path, size: int) -> None:
    """A header with every rank's init lines, then NCCL noise and training output to size."""
    lines = synthrun.training_log(HOSTS, [GPUS] * NODES, 2, "/mnt/v/runs/x", noise=40)
    head = ("\n".join(lines) + "\n").encode()
    noise = ("\n".join(l for l in lines if "Channel" in l or "Trees" in l or "coll channels" in l) + "\n").encode()
    steps = "".join(TRAINING.format(s=s) + "\n" for s in range(1, 200)).encode()
    with open(path, "wb") as stream:
        stream.write(head)
        written = len(head)
        while written < size:
            block = noise * 4 + steps
            stream.write(block)
            written += len(block)


SCAN = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from twgrpo.formats import trainlog
t = time.perf_counter()
scan = trainlog.scan_log(sys.argv[2])
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "lines": scan.lines, "ranks": len(scan.inits), "long": scan.long_count,
                  "rss_self_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rss_worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def scan(path: Path) -> dict:
    bundle = str(HERE.parent / "tools" / "verl" / "two-worker-grpo")
    out = subprocess.run([sys.executable, "-c", SCAN, bundle, str(path)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def grep_seconds(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["grep", "-c", "NCCL INFO", str(path)], capture_output=True, check=True)
    return time.perf_counter() - started


def tutorial(path: Path) -> float:
    """The tutorial's verifier: read it all, strip colour, find inits, then scan per rank."""
    started = time.perf_counter()
    text = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(encoding="utf-8", errors="replace"))
    init = re.compile(r"\(WorkerDict pid=(?P<ppid>\d+)(?:, ip=[^)]+)?\)\s+(?P<host>[^:\s]+):(?P<pid>\d+):\d+\s+"
                      r"\[\d+\] NCCL INFO ncclCommInitRankConfig comm \S+ rank (?P<rank>\d+) nranks (?P<w>\d+) ")
    actors = {(m["host"], m["pid"]) for m in init.finditer(text)}
    for host, pid in actors:  # three whole-text searches per rank
        prefix = rf"\(WorkerDict pid={pid}(?:, ip=[^)]+)?\)\s+{re.escape(host)}:{pid}:\d+"
        for tail in (r".*?NCCL INFO NCCL_IB_DISABLE set by environment to 1\.",
                     r".*?NCCL INFO NET/Socket : Using", r".*?NCCL INFO Using network Socket"):
            re.search(prefix + tail, text)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    big, small, tiny, bad = (args.scratch / n for n in ("big.log", "small.log", "tiny.log", "bad.log"))
    write_log(big, int(args.gib * (1 << 30)))
    write_log(small, int(args.gib * (1 << 30) / 10))
    write_log(tiny, 16 << 20)
    write_pathological(bad, small, 256 << 20)
    grep_seconds(big)  # warm the page cache
    print(f"log: {NODES} nodes x {GPUS} GPUs, {big.stat().st_size / (1 << 30):.2f} GiB, "
          f"{os.cpu_count()} cores")
    g = min(grep_seconds(big) for _ in range(2))
    s_big = scan(big)
    s_small = scan(small)
    print(f"  grep -c 'NCCL INFO'       {g:6.2f} s")
    print(f"  postflight log pass       {s_big['seconds']:6.2f} s  ({s_big['lines']} lines, "
          f"{s_big['ranks']} rank inits)")
    print(f"  ratio log pass / grep:    {s_big['seconds'] / g:.1f}x (target <= 3x)")
    print(f"  peak RSS, 1/10 size:      {s_small['rss_self_mib']:.0f} MiB driver, "
          f"{s_small['rss_worker_mib']:.0f} MiB largest worker")
    print(f"  peak RSS, full size:      {s_big['rss_self_mib']:.0f} MiB driver, "
          f"{s_big['rss_worker_mib']:.0f} MiB largest worker (target <= 100 MiB, flat)")
    s_bad = scan(bad)
    print(f"  pathological log           {s_bad['seconds']:6.2f} s  ({bad.stat().st_size / (1 << 20):.0f} MiB); "
          f"peak RSS {s_bad['rss_self_mib']:.0f} MiB driver, {s_bad['rss_worker_mib']:.0f} MiB "
          f"largest worker; {s_bad['long']} over-long line(s)")
    t_tiny = tutorial(tiny)
    s_tiny = scan(tiny)
    print(f"  at 16 MiB: tutorial approach {t_tiny:.2f} s, postflight pass {s_tiny['seconds']:.2f} s "
          f"({t_tiny / s_tiny['seconds']:.0f}x faster); the tutorial's memory grows with the log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
