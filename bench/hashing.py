#!/usr/bin/env python3
"""Summary: verify-inputs' threaded sha256 against `sha256sum -c`, on the same files, warm cache.

Usage: bench/hashing.py SCRATCH [--gib 2] [--files 4]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "verl" / "two-worker-grpo"))
from twgrpo.formats import hashing, sums  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    size = int(args.gib * (1 << 30) / args.files)
    files = []
    for i in range(args.files):  # like model shards: a few large files
        path = args.scratch / f"model-{i:05d}-of-{args.files:05d}.safetensors"
        with open(path, "wb") as stream:
            for _ in range(size // (64 << 20)):
                stream.write(os.urandom(64 << 20))
        files.append(path)
    ours = hashing.hash_files(files, label="bench")  # also warms the page cache
    (args.scratch / "SHA256SUMS").write_text(sums.format_sums((ours[p], p.name) for p in files))
    timings = {}
    for name, run in (("sha256sum -c", lambda: subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"],
                                                              cwd=args.scratch, check=True)),
                      ("bundle (threads)", lambda: hashing.hash_files(files, label="bench"))):
        best = min(_timed(run) for _ in range(2))
        timings[name] = best
    total = size * args.files / (1 << 30)
    print(f"hashing {args.files} files, {total:.1f} GiB, {os.cpu_count()} cores, warm cache:")
    for name, seconds in timings.items():
        print(f"  {name:18s} {seconds:6.2f} s  {total / seconds:5.2f} GiB/s")
    print(f"  ratio sha256sum / bundle: {timings['sha256sum -c'] / timings['bundle (threads)']:.2f}x")
    return 0


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
