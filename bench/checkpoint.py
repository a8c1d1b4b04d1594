#!/usr/bin/env python3
"""Summary: The checkpoint check at the size of real runs, against the read floor, cold and warm.

Usage: bench/checkpoint.py SCRATCH [--gib16 4] [--gib512 2.25] [--log-mib 256] [--only NAME ...]
                            [--baseline BUNDLE] [--no-walk]
Cases (generated under SCRATCH, removed by bench/run.sh): FSDP2-shaped shards (tests/lib/
torchlike.py, 339 DTensors a model shard) for 16 ranks and for 512 ranks, each checked by
postflight's shard check (after), by the serial opcode walk it replaces (before, warm), and
read by `cat`, `cat` in parallel (xargs -P cores) and zipfile's own test (`python -m zipfile -t`
in one process); cold means every file dropped from the page cache (posix_fadvise) first.
--baseline BUNDLE adds the same check by another copy of tools/verl/two-worker-grpo (a
worktree of an older commit, say), cold and warm, in the same run; --no-walk leaves out the
serial opcode walk (about 100 s on 512 ranks).
Then postflight of a 64-node x 8-GPU run (those 512 ranks' shards, a log of --log-mib) against
its log pass alone, and the charts of a 10,000-step, 64-tag TensorBoard file.
Reports seconds and ratios measured in this one run. Targets: 16 ranks cold within 1.3x of the
parallel cat, 512 ranks within 3x cold and 2x of zipfile -t.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
BUNDLE = HERE.parent / "tools" / "verl" / "two-worker-grpo"
sys.path[:0] = [str(HERE.parent / "tests" / "lib"), str(BUNDLE)]
import synthrun  # noqa: E402
import torchlike  # noqa: E402
from pagecache import drop_cache  # noqa: E402

CORES = len(os.sched_getaffinity(0))
CHECK = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from twgrpo.checks.checkpoint import shards
from twgrpo.formats import torchzip
paths = [Path(p) for p in sys.stdin.read().split("\\0") if p]
t = time.perf_counter()
if sys.argv[2] == "before":  # the serial opcode walk: no fast path, no processes
    torchzip.FAST_MAX = -1
    found = {p: shards.problem(p)[0] for p in paths}
else:
    found = shards.check_files(paths)
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "bad": sum(v is not None for v in found.values())}))
"""
ZIPTEST = """
import sys, time, zipfile
paths = [p for p in sys.stdin.read().split("\\0") if p]
t = time.perf_counter()
bad = sum(zipfile.ZipFile(p).testzip() is not None for p in paths)
print(time.perf_counter() - t, bad)
"""


def make_set(folder: Path, ranks: int, total: int) -> list:
    """model, optim (twice the model) and extra_state shards per rank, about total bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    per_rank = total // ranks
    paths = []
    for rank in range(ranks):
        for kind, share, tensors in (("model", 1 / 3, torchlike.TENSORS_7B),
                                     ("optim", 2 / 3, 2 * torchlike.TENSORS_7B), ("extra_state", 0, 2)):
            path = folder / f"{kind}_world_size_{ranks}_rank_{rank}.pt"
            if not path.exists():
                torchlike.write_shard(path, torchlike.numels_for(int(per_rank * share), tensors))
            paths.append(path)
    return paths


def timed(argv: list, paths: list, cold: bool) -> float:
    if cold:
        drop_cache(paths)
    data = b"\0".join(str(p).encode() for p in paths)
    started = time.perf_counter()
    subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def check(paths: list, mode: str, cold: bool, bundle: Path = BUNDLE) -> float:
    if cold:
        drop_cache(paths)
    data = "\0".join(str(p) for p in paths)
    out = subprocess.run([sys.executable, "-c", CHECK, str(bundle), mode], input=data, text=True,
                         capture_output=True, check=True).stdout
    result = json.loads(out)
    assert result["bad"] == 0, result
    return result["seconds"]


def ziptest(paths: list, cold: bool) -> float:
    if cold:
        drop_cache(paths)
    out = subprocess.run([sys.executable, "-c", ZIPTEST], input="\0".join(map(str, paths)),
                         text=True, capture_output=True, check=True).stdout.split()
    assert out[1] == "0"
    return float(out[0])


def bench_set(name: str, paths: list, before: bool, baseline: Optional[Path] = None) -> dict:
    size = sum(p.stat().st_size for p in paths)
    print(f"{name}: {len(paths)} files, {size / (1 << 30):.2f} GiB, {CORES} cores")
    rows = {}
    for cold in (True, False):
        label = "cold" if cold else "warm"
        if not cold:
            check(paths, "after", False)  # everything in the page cache
        rows[label] = {
            "cat": timed(["xargs", "-0", "cat"], paths, cold),
            # one cat a core, the files shared evenly: a parallel floor for 48 files as for 1,536
            "cat -P": timed(["xargs", "-0", "-P", str(CORES), "-n", str(-(-len(paths) // CORES)), "cat"],
                            paths, cold),
            "zipfile -t": ziptest(paths, cold),
            "after": check(paths, "after", cold),
        }
        if baseline is not None:
            rows[label]["baseline"] = check(paths, "after", cold, baseline)
        if before and not cold:
            rows[label]["before"] = check(paths, "before", False)
        row = rows[label]
        print(f"  {label}: " + ", ".join(f"{k} {v:.2f} s" for k, v in row.items()))
        print(f"  {label}: check / cat -P {row['after'] / row['cat -P']:.2f}x, check / zipfile -t "
              f"{row['after'] / row['zipfile -t']:.2f}x"
              + (f", before / after {row['before'] / row['after']:.1f}x" if "before" in row else "")
              + (f", baseline / after {row['baseline'] / row['after']:.2f}x (baseline / cat -P "
                 f"{row['baseline'] / row['cat -P']:.2f}x)" if "baseline" in row else ""))
    return rows


def bench_postflight(scratch: Path, shards512: list, log_mib: int) -> None:
    from twgrpo.run.profile import load_profile, with_overrides
    nodes, gpus = 64, 8
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=nodes, GPUS_PER_NODE=gpus)
    env = scratch / "bench-64x8.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()).replace(
        "PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=bench-64x8"))
    hosts = [{"hostname": f"gpu-node-{i:02d}", "ip": f"10.10.0.{10 + i}"} for i in range(nodes)]
    run = scratch / "runs" / "verl" / "two-worker-grpo" / "big-run"
    shutil.rmtree(run, ignore_errors=True)
    synthrun.write_run(run, profile, "big-run", "/mnt/verl-reproduction", hosts, noise=2)
    log = run / "training.log"
    text = log.read_bytes()
    cut = text.rfind(b"\n", 0, text.index(b"step:1 ")) + 1  # NCCL noise before training output
    head, tail = text[:cut], text[cut:]
    noise = b"".join(l + b"\n" for l in head.split(b"\n") if b"Channel" in l or b"Trees" in l) * 8
    with open(log, "wb") as stream:
        stream.write(head)
        written = len(head)
        while written < log_mib << 20:
            stream.write(noise)
            written += len(noise)
        stream.write(tail)
    actor = run / "checkpoints" / "global_step_2" / "actor"
    for path in shards512:
        target = actor / path.name
        target.unlink()
        os.link(path, target)
    verify = [sys.executable, "-I", "-B", str(BUNDLE / "verify-two-worker-grpo-v1.py")]
    scan = ("import sys,time; sys.path.insert(0, sys.argv[1]); from twgrpo.formats import trainlog; "
            "t=time.perf_counter(); trainlog.scan_log(sys.argv[2]); print(time.perf_counter()-t)")
    scan_s = float(subprocess.run([sys.executable, "-c", scan, str(BUNDLE), str(log)],
                                  capture_output=True, text=True, check=True).stdout)
    drop_cache(list(actor.iterdir()) + [log])
    started = time.perf_counter()
    done = subprocess.run(verify + ["postflight", "--output-dir", str(run), "--profile", str(env)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    print(f"postflight of a {nodes} x {gpus} run ({log.stat().st_size / (1 << 30):.2f} GiB log, "
          f"{len(shards512)} shards, cold): {seconds:.2f} s, exit {done.returncode}; log pass alone "
          f"{scan_s:.2f} s")
    if done.returncode:
        print(done.stdout[-2000:])


def bench_report(scratch: Path) -> None:
    from tbwrite import write_events
    from twgrpo.formats import crc32c, tfevents
    from twgrpo.report import runview
    folder = scratch / "tb-run"
    (folder / "tensorboard").mkdir(parents=True, exist_ok=True)
    tags = [f"bench/tag{i:02d}" for i in range(64)]
    path = folder / "tensorboard" / "events.out.tfevents.1.host.1.0"
    if not path.exists():
        write_events(path, [(s, {t: float(s) for t in tags}) for s in range(1, 10_001)])
    started = time.perf_counter()
    series, _ = runview.scalar_series(folder, [])
    after = time.perf_counter() - started
    reach = min(points[-1][0] for _, points in series)
    held = tfevents.MAX_VALUES
    diverged = scratch / "tb-diverged" / "tensorboard"  # NaN in every tag from step 100 on
    diverged.mkdir(parents=True, exist_ok=True)
    if not (diverged / path.name).exists():
        write_events(diverged / path.name, [(s, {t: float(s) if s < 100 else math.nan for t in tags})
                                            for s in range(1, 10_001)])
    started = time.perf_counter()
    nonfinite = tfevents.load_scalars(diverged).nonfinite
    nan_read = time.perf_counter() - started
    started = time.perf_counter()
    tfevents.load_scalars(path.parent)
    plain_read = time.perf_counter() - started
    started = time.perf_counter()
    for data in (path.read_bytes()[i:i + 4096] for i in range(0, 1 << 22, 4096)):
        crc32c.crc32c_bytewise(data)
    byte = time.perf_counter() - started
    started = time.perf_counter()
    for data in (path.read_bytes()[i:i + 4096] for i in range(0, 1 << 22, 4096)):
        crc32c.crc32c(data)
    wide = time.perf_counter() - started
    print(f"report charts, 64 tags x 10,000 steps ({path.stat().st_size >> 20} MiB): {after:.2f} s, "
          f"every chart reaches step {reach} (held at most {held} values); CRC-32C on 4 KiB "
          f"records: byte loop {byte:.2f} s, wide loop {wide:.2f} s per 4 MiB ({byte / wide:.2f}x); the "
          f"same scalars NaN from step 100 on read in {nan_read / plain_read:.2f}x the time of finite "
          f"ones ({len(nonfinite)} tags non-finite)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--gib16", type=float, default=4.0)
    parser.add_argument("--gib512", type=float, default=2.25)
    parser.add_argument("--log-mib", type=int, default=256)
    parser.add_argument("--only", nargs="*", default=["16", "512", "postflight", "report"])
    parser.add_argument("--baseline", type=Path, help="another bundle folder, checked alike")
    parser.add_argument("--no-walk", action="store_true", help="leave out the serial opcode walk")
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    if "16" in args.only:
        bench_set("16 ranks", make_set(args.scratch / "r16", 16, int(args.gib16 * (1 << 30))),
                  not args.no_walk, args.baseline)
    if "512" in args.only or "postflight" in args.only:
        shards512 = make_set(args.scratch / "r512", 512, int(args.gib512 * (1 << 30)))
        if "512" in args.only:
            bench_set("512 ranks", shards512, not args.no_walk, args.baseline)
        if "postflight" in args.only:
            bench_postflight(args.scratch, shards512, args.log_mib)
    if "report" in args.only:
        bench_report(args.scratch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
