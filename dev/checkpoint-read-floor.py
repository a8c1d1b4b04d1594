#!/usr/bin/env python3
"""Summary: Check a 1-rank checkpoint of about 15 GB written by torch.save, against the read floor.

Usage: python3 dev/checkpoint-read-floor.py [--scratch /tmp/ckpt-floor] [--gb 15] [--no-torch]
Writes model_world_size_1_rank_0.pt (a third of --gb, bf16) and optim_world_size_1_rank_0.pt
(two thirds, fp32 exp_avg and exp_avg_sq) with torch.save, as verl's FSDP checkpoint of one
rank holds them, then times, cold (each file dropped from the page cache with posix_fadvise
after an fsync) and warm: `cat` of both files, a parallel read (dd over 1 GiB ranges, one a
core, at once) and postflight's shard check (twgrpo.checks.checkpoint.shards.check_files). Prints one
JSON line per measurement and the ratio check / parallel read; the target is <= 2x cold.
--no-torch writes the same layout with tests/lib/torchlike.py (to try the script without torch).
The scratch folder is removed at the end.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
sys.path[:0] = [str(BUNDLE), str(REPO / "tests" / "lib")]
from pagecache import drop_cache  # noqa: E402
from twgrpo.checks.checkpoint import shards  # noqa: E402

CORES = len(os.sched_getaffinity(0))
TENSORS = 339


def write_with_torch(folder: Path, total: int) -> list:
    import torch
    model_each = total // 3 // TENSORS // 2  # bf16 elements a tensor
    optim_each = total * 2 // 3 // (2 * TENSORS) // 4  # fp32 elements a state tensor
    model = {f"model.layers.{i // 12}.p{i % 12}.weight": torch.randn(model_each, dtype=torch.bfloat16)
             for i in range(TENSORS)}
    path = folder / "model_world_size_1_rank_0.pt"
    torch.save(model, path)
    del model
    optim = {"state": {i: {"step": torch.tensor(2.0), "exp_avg": torch.randn(optim_each),
                           "exp_avg_sq": torch.rand(optim_each)} for i in range(TENSORS)},
             "param_groups": [{"lr": 1e-6, "params": list(range(TENSORS))}]}
    torch.save(optim, folder / "optim_world_size_1_rank_0.pt")
    return [path, folder / "optim_world_size_1_rank_0.pt"]


def write_without_torch(folder: Path, total: int) -> list:
    import torchlike
    paths = [folder / "model_world_size_1_rank_0.pt", folder / "optim_world_size_1_rank_0.pt"]
    torchlike.write_shard(paths[0], torchlike.numels_for(total // 3))
    torchlike.write_shard(paths[1], torchlike.numels_for(total * 2 // 3, 2 * TENSORS))
    return paths


def seconds(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def cat(paths: list) -> None:
    subprocess.run(["cat", *map(str, paths)], stdout=subprocess.DEVNULL, check=True)


def parallel_read(paths: list) -> None:
    """dd over 1 GiB ranges of every file, CORES at a time: the volume's parallel read floor."""
    piece = 1 << 30
    jobs = [f"if={p} of=/dev/null bs=16M skip={at} count={piece} iflag=skip_bytes,count_bytes"
            for p in paths for at in range(0, p.stat().st_size, piece)]
    subprocess.run(["xargs", "-P", str(CORES), "-L", "1", "dd", "status=none"],
                   input="\n".join(jobs) + "\n", text=True, check=True)


def check(paths: list) -> None:
    found = shards.check_files(paths)
    assert all(v is None for v in found.values()), found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/ckpt-floor"))
    parser.add_argument("--gb", type=float, default=15.0)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.scratch, ignore_errors=True)
    args.scratch.mkdir(parents=True)
    try:
        started = time.perf_counter()
        write = write_without_torch if args.no_torch else write_with_torch
        paths = write(args.scratch, int(args.gb * 1e9))
        made = time.perf_counter() - started
        size = sum(p.stat().st_size for p in paths)
        print(json.dumps({"files": [p.name for p in paths], "bytes": size, "cores": CORES,
                          "written_s": round(made, 2), "torch": not args.no_torch}), flush=True)
        rows = {}
        for state in ("cold", "warm"):
            for name, action in (("cat", cat), ("parallel read", parallel_read), ("check", check)):
                if state == "cold":
                    drop_cache(paths)
                else:
                    cat(paths)
                rows[(state, name)] = seconds(lambda: action(paths))
                print(json.dumps({"state": state, "what": name, "seconds": round(rows[(state, name)], 2),
                                  "gb_per_s": round(size / rows[(state, name)] / 1e9, 2)}), flush=True)
        for state in ("cold", "warm"):
            ratio = rows[(state, "check")] / rows[(state, "parallel read")]
            print(f"{state}: check {rows[(state, 'check')]:.2f} s / parallel read "
                  f"{rows[(state, 'parallel read')]:.2f} s = {ratio:.2f}x (target <= 2x); cat "
                  f"{rows[(state, 'cat')]:.2f} s", flush=True)
    finally:
        shutil.rmtree(args.scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
