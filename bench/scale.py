#!/usr/bin/env python3
"""Summary: postflight, audit, report, runs and compare on healthy synthesized runs from 2 x 2 to
2,048 x 8 and to 100,000 steps: the status each view gives, and time and peak RSS as ratios to
reading the run folder's files. compare reads the run and a hard-linked copy of it (exp-copy,
made for it and removed after), so its figure is two runs' reading.

Usage: bench/scale.py SCRATCH [--only NAME ...] [--bundle DIR]
Cases (tests/lib/synthrun.py, kept under SCRATCH between calls): 2x2, 176x8, 1024x8,
2048x8-ib, 2048x8 (Socket), 2x2 at 100,000 steps with a short metrics line a step, and the same
with verl's own line of the real GPU run (2x2-100k-verl: 64 metrics, 2 KB a step, 230 MB of
log). Each view runs in a fresh process; the floor is a warm read of every file in the run
folder (1 MiB blocks). The floor and each view run --repeat times (3), each view run after an
untimed read of every file (warm()): the median time is the figure, the range beside it (one
run of a box shared with other work can be a third slower or faster). Every view must say
SUCCESS, every time.
Each view's CPU time (its process and its workers) shows when the cores, not one process,
bound it: a view cannot end before its core-seconds divided by the cores.
Targets: 2048x8-ib postflight <= 3x the floor and < 500 MiB; the 100,000-step runs' postflight
and report <= 3x the floor each.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERIFIER = REPO / "tools" / "verl" / "two-worker-grpo" / "verify-two-worker-grpo-v1.py"
CASES = {"2x2": (2, 2, 2, "socket"), "176x8": (176, 8, 2, "socket"), "1024x8": (1024, 8, 2, "socket"),
         "2048x8-ib": (2048, 8, 2, "ib"), "2048x8": (2048, 8, 2, "socket"),
         "2x2-100k": (2, 2, 100_000, "socket"), "2x2-100k-verl": (2, 2, 100_000, "socket", "verl")}
# Runs the command in a child and reports its exit code, its peak RSS and its output's last lines.
MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
used = resource.getrusage(resource.RUSAGE_CHILDREN)  # the view and the workers it waited for
print(json.dumps({"rc": done.returncode, "out": done.stdout.decode("utf-8", "replace")[-20000:],
                  "rss_mib": used.ru_maxrss / 1024, "cpu": used.ru_utime + used.ru_stime}))
"""
FLOOR = """
import os, resource, sys, json, time
started, total = time.perf_counter(), 0
for top, _, names in os.walk(sys.argv[1]):
    for name in names:
        with open(os.path.join(top, name), "rb", buffering=0) as stream:
            while True:
                block = stream.read(1 << 20)
                if not block:
                    break
                total += len(block)
print(json.dumps({"bytes": total, "seconds": time.perf_counter() - started,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(command) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEASURE, *map(str, command)], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout)
    result["seconds"] = time.perf_counter() - started
    return result


def synthesize(scratch: Path, name: str):
    nodes, gpus, steps, transport, metrics = (CASES[name] + ("short",))[:5]
    root = scratch / name
    done = root / "synthesized"
    if not done.exists():
        subprocess.run([sys.executable, "-c", f"""
import sys; sys.path[:0] = {[str(REPO / 'tools/verl/two-worker-grpo'), str(REPO), str(REPO / 'tests/lib')]}
from pathlib import Path; import synthrun
synthrun.healthy_run(Path({str(root)!r}), {nodes}, {gpus}, {steps}, {transport!r}, probe_bytes=6000,
                     metrics={metrics!r})
"""], check=True)
        done.write_text("")
    run = root / "runs" / "verl" / "two-worker-grpo" / "exp"
    return root, run, next(root.glob("scale-*.env"))


def warm(folder: Path) -> None:
    """Read every file under folder, untimed: each view runs on a warm cache, as the floor
    does (a box that pages out what was not touched for seconds, as DAMON's reclaim does,
    would otherwise leave part of a large run cold for the view and not for the floor)."""
    subprocess.run([sys.executable, "-c", FLOOR, str(folder)], capture_output=True, check=True)


def remove_records(run: Path) -> None:
    """What postflight writes, so that each postflight run writes it anew."""
    for stale in ("SUCCESS", "verification.json", "actor-placement.json"):
        (run / stale).unlink(missing_ok=True)


def spread(results, parens: str = "()") -> str:
    """The range of several runs' times, as text in parens (or after a colon); nothing for one."""
    times = [result["seconds"] for result in results]
    if len(times) < 2:
        return ""
    text = f"{min(times):.2f}-{max(times):.2f} s"
    return f": {text}" if parens == ":" else f" ({text})"


def status_of(view: str, out: str) -> str:
    lines = out.splitlines()
    if view in ("postflight", "audit"):
        for line in lines:
            if line.startswith("postflight: PASSED"):
                return "SUCCESS"
            if line.startswith("postflight: FAILED"):
                return "FAILED"
        return "?"
    if view == "report":
        found = [line[len("run exp: "):].split(":")[0].split()[0] for line in lines
                 if line.startswith("run exp: ")]
        return found[0] if found else "?"
    if view == "compare":  # "    verdict   SUCCESS | SUCCESS": one status when both say it
        found = [line.split(None, 1)[1].split(" | ") for line in lines
                 if line.split()[:1] == ["verdict"] and len(line.split()) > 1]
        return found[0][0].strip() if found and len({v.strip() for v in found[0]}) == 1 else "?"
    found = [line.split()[-1] for line in lines if line.startswith("exp ")]
    return found[0] if found else "?"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--only", nargs="*", default=list(CASES))
    parser.add_argument("--bundle", type=Path, default=VERIFIER.parent)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the floor and of each view")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    verifier = args.bundle / VERIFIER.name
    failed = 0
    for name in args.only:
        started = time.perf_counter()
        root, run, profile = synthesize(args.scratch, name)
        print(f"{name}: synthesized in {time.perf_counter() - started:.0f} s (or kept)", flush=True)
        remove_records(run)
        floors = [json.loads(subprocess.run([sys.executable, "-c", FLOOR, str(run)], capture_output=True,
                                            text=True, check=True).stdout) for _ in range(1 + args.repeat)][1:]
        floor = dict(floors[0], seconds=statistics.median(f["seconds"] for f in floors))
        print(f"  floor: read {floor['bytes'] / 2**20:.0f} MiB in {floor['seconds']:.2f} s (warm, median of "
              f"{args.repeat}{spread(floors, ':')}), {floor['rss_mib']:.0f} MiB", flush=True)
        start = measure([sys.executable, "-I", "-B", "-c", "import sys; sys.path.insert(0, %r); "
                         "import twgrpo.cli" % str(verifier.parent)])["seconds"]
        print(f"  the verifier's start alone: {start:.2f} s (in every figure below)", flush=True)
        base = [sys.executable, "-I", "-B", str(verifier)]
        views = {"postflight": base + ["postflight", "--output-dir", run, "--profile", profile],
                 "audit": base + ["postflight", "--audit", "--output-dir", run, "--profile", profile],
                 "report": base + ["report", "--output-dir", run, "--profile", profile],
                 "runs": base + ["runs", "--storage-root", root],
                 "compare": base + ["compare", "--storage-root", root, "--run-id", "exp",
                                    "--against", "exp-copy"]}
        statuses = set()
        for view, command in views.items():
            results = []
            if view == "compare":  # the run beside a copy of itself, its files hard links
                shutil.rmtree(run.parent / "exp-copy", ignore_errors=True)
                shutil.copytree(run, run.parent / "exp-copy", copy_function=os.link)
            for _ in range(args.repeat):
                if view == "postflight":  # each run writes its records anew, as the first did
                    remove_records(run)
                warm(root)
                results.append(measure(command))
            if view == "compare":
                shutil.rmtree(run.parent / "exp-copy")
            view_statuses = {status_of(view, result["out"]) for result in results}
            statuses |= view_statuses
            status = "/".join(sorted(view_statuses))
            seconds = statistics.median(result["seconds"] for result in results)
            print(f"  {view:10s} {status:9s} rc {max(r['rc'] for r in results)}  {seconds:7.2f} s = "
                  f"{seconds / max(floor['seconds'], 1e-3):6.1f}x the floor{spread(results)}  "
                  f"peak {max(r['rss_mib'] for r in results):6.0f} MiB  "
                  f"cpu {statistics.median(r['cpu'] for r in results):5.2f} core-s", flush=True)
            if view_statuses != {"SUCCESS"}:
                bad = next(r for r in results if status_of(view, r["out"]) != "SUCCESS")
                print("    " + "\n    ".join(bad["out"].splitlines()[-12:]))
        if statuses == {"SUCCESS"}:
            print(f"  {name}: one status, SUCCESS, in every view", flush=True)
        else:
            failed += 1
            print(f"  {name}: VIEWS DISAGREE or not SUCCESS: {', '.join(sorted(statuses))}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
