#!/usr/bin/env python3
"""Summary: make runs, make report and postflight on records as large and as hostile as they get.

Usage: bench/records.py SCRATCH [--bundle DIR] [--runs N] [--only NAME]
Cases (time and peak RSS of a fresh process each; the target is a peak <= 100 MiB):
  runs: N runs (default 5,000) whose every record is as large as the listing reads whole, one of
        them with a 4 MiB profile name; 300 runs whose records are 11 MiB each (the bundle's own
        layout at both ends, a sparse middle)
  report and postflight: the real smoke run with, planted one at a time, a 1 GiB run.json, a
        15 MiB verification.json, a driver.log of 3M distinct phase lines (195 MB), 200,000
        files in a checkpoint's actor/ folder, deeply nested records
--bundle runs another copy of the verifiers (an older checkout) for before/after figures.
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
# Runs the command in a child, counting its output's lines as they come (never holding them),
# and reports the child's peak RSS.
MEASURE = """
import json, resource, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
count, longest, last = 0, 0, b""
for line in child.stdout:
    count, longest, last = count + 1, max(longest, len(line) - 1), line[:100]
print(json.dumps({"rc": child.wait(), "lines": count, "longest": longest,
                  "tail": last.decode("utf-8", "replace").rstrip(),
                  "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure(command) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, *map(str, command)], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout)
    result["seconds"] = time.perf_counter() - started
    return result


def write_padded(path: Path, data: dict, size: int, field: str) -> None:
    """The record as the bundle writes it, padded in `field` to about size bytes."""
    data = dict(data)
    data[field] = ""
    base = len(json.dumps(data, indent=2, sort_keys=True)) + 1
    data[field] = "x" * max(0, size - base)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_sparse(path: Path, data: dict, size: int) -> None:
    """A file of `size` bytes: the record's first and last 64 KiB as the bundle writes them,
    a sparse (unwritten) middle: the ends are all a listing reads."""
    text = json.dumps(data, indent=2, sort_keys=True).encode() + b"\n"
    with open(path, "wb") as stream:
        stream.write(text[:len(text) // 2])
        stream.truncate(size - (len(text) - len(text) // 2))
        stream.seek(0, 2)
        stream.write(text[len(text) // 2:])


RECORDS = ("run.json", "inputs.json", "preflight.json", "verification.json", "actor-placement.json")


def volume(scratch: Path, count: int, size: int, sparse: bool, odd: bool = True) -> Path:
    root = scratch / f"volume-{count}-{size}{'' if odd else '-plain'}"
    if root.exists():
        return root
    runs = root / "runs" / "verl" / "two-worker-grpo"
    runs.mkdir(parents=True)
    records = {name: json.loads((FIXTURE / name).read_text()) for name in RECORDS}
    template = scratch / "template"
    shutil.rmtree(template, ignore_errors=True)
    template.mkdir()
    for name, data in records.items():
        if sparse:
            write_sparse(template / name, data, size)
        else:
            write_padded(template / name, data, size, "zz_padding")  # sorts last: the tail holds it
    for name in ("driver.log", "SUCCESS"):
        shutil.copy(FIXTURE / name, template / name)
    for n in range(count):
        run = runs / f"run-{n:05d}"
        run.mkdir()
        for name in RECORDS + ("driver.log", "SUCCESS"):
            if sparse:
                subprocess.run(["cp", "--sparse=always", str(template / name), str(run / name)], check=True)
            else:
                os.link(template / name, run / name)  # the same bytes; reading costs the same
    if odd:
        shutil.copytree(FIXTURE, runs / "run-odd")
        data = records["run.json"]
        data["profile"] = {**data["profile"], "name": "p" * (4 << 20)}
        (runs / "run-odd" / "run.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    return root


def hostile_runs(scratch: Path):
    """(name, plant) pairs: each plants one hostile record into a copy of the real run."""
    def big_run_json(run):
        with open(run / "run.json", "r+b") as stream:
            stream.truncate(1 << 30)

    def padded_verification(items):
        def plant(run):
            data = json.loads((run / "verification.json").read_text())
            data["evidence"]["padding"] = [{"k": "v" * 20}] * items
            (run / "verification.json").write_text(json.dumps(data, indent=2, sort_keys=True))
        return plant

    def phase_lines(run):
        with open(run / "driver.log", "a") as log:
            for n in range(3_000_000):
                log.write(f"run-two-worker-grpo-v1: phase x{n:07d} started 2026-12-02T13:10:34Z\n"
                          .replace(f"x{n:07d}", "".join(chr(97 + int(d)) for d in f"{n:07d}")))

    def shard_files(run):
        actor = run / "checkpoints" / "global_step_2" / "actor"
        for n in range(200_000):
            (actor / f"x{n}.pt").touch()

    def nested(run):
        for name in ("run.json", "verification.json", "preflight.json"):
            (run / name).write_text("[" * 200_000 + "]" * 200_000)

    return [("1 GiB run.json (sparse)", big_run_json),
            ("15 MiB verification.json of small objects", padded_verification(300_000)),
            ("verification.json at the memory estimate's limit", padded_verification(140_000)),
            ("driver.log: 3M distinct phase lines", phase_lines),
            ("200,000 files in actor/", shard_files),
            ("records nested 200,000 deep", nested)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--bundle", type=Path, default=HERE.parent / "tools" / "verl" / "two-worker-grpo")
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--no-odd", action="store_true", help="leave out the run with a 4 MiB "
                        "profile name (a listing that pads every row to it prints 21 GB)")
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    verify = [sys.executable, "-I", "-B", args.bundle / "verify-two-worker-grpo-v1.py"]
    print(f"records: make runs, report and postflight on large and hostile records ({verify[-1]})")
    print(f"  {'case':58s} {'seconds':>8s} {'peak MiB':>9s}  result")

    def show(name, r, note=""):
        print(f"  {name:58s} {r['seconds']:8.1f} {r['rss_mib']:9.0f}  rc {r['rc']}, {r['lines']} "
              f"lines, longest {r['longest']}{note}", flush=True)

    for count, size, sparse, label in ((args.runs, 16 << 10, False, "records of 16 KiB, parsed whole"),
                                       (args.runs, 1 << 20, False, "records of 1 MiB"),
                                       (300, 11 << 20, True, "records of 11 MiB")):
        name = f"runs: {count} runs, {label}"
        if args.only and not any(o in name for o in args.only):
            continue
        root = volume(args.scratch, count, size, sparse, not args.no_odd)
        show(name, measure([*verify, "runs", "--storage-root", root]))
    for name, plant in hostile_runs(args.scratch):
        if args.only and not any(o in name for o in args.only):
            continue
        run = args.scratch / "runs" / "verl" / "two-worker-grpo" / FIXTURE.name
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(FIXTURE, run)
        plant(run)
        for phase in ("report", "postflight"):
            r = measure([*verify, phase, "--output-dir", run])
            show(f"{phase}: {name}", r, f"; {r['tail']}" if r["rc"] not in (0, 1) else "")
        shutil.rmtree(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
