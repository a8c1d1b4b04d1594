#!/usr/bin/env bash
# Summary: Run the benchmarks and print their ratios (make bench). Numbers, not pass/fail.
# Usage: bench/run.sh [hashing|logscan|hostile|preflight|report|records|checkpoint|compare ...]  (default: all)
#
# hashing    verify-inputs' parallel sha256 against `sha256sum -c` on the same files
# logscan    postflight's log pass on a 64-node x 8-GPU log of about 1 GiB against
#            `grep -c 'NCCL INFO'`, its peak memory, and the tutorial's whole-file approach
# hostile    postflight on the hostile artifacts of tests/lib/hostile.py: time, peak RSS, verdict
# preflight  preflight wall time on 2, 4 and 8 Ray nodes (needs root: network namespaces)
# report     make report on the real run with a 1 GiB driver.log against `grep -c` of its phase
#            lines, and its peak memory
# records    make runs on 5,000 runs of maximal records, report and postflight on huge, nested
#            and hostile records: time and peak RSS of each (target <= 100 MiB)
# checkpoint the checkpoint check on 16 and 512 ranks of FSDP2-shaped shards, cold and warm,
#            against cat, cat -P and zipfile -t; postflight of a 64 x 8 run; 10,000-step charts,
#            and the same scalars NaN from step 100 on against finite ones
# compare    make compare on two 10,000-step runs against two make reports; make runs
#            FORMAT=json on 10,000 runs against the table
# scale      postflight, audit, report and runs on healthy runs from 2 x 2 to 2,048 x 8 (IB and
#            Socket) and at 100,000 steps: one status in every view, time and peak RSS against
#            reading the run folder (about 2 GB of scratch, minutes)
# reach      preflight's node-to-node rounds (reachability, storage trial, Ray ports) at 250 to
#            2,000 simulated nodes: pairs tried, driver memory a node (flat: linear in nodes)
# Uses the test venv (.venv, made by make test). Scratch files go to BENCH_DIR (default a
# temporary folder, removed afterwards).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PYTHON=$REPO/.venv/bin/python
[[ -x "$PYTHON" ]] || { echo "bench: run make test once first (it builds .venv)" >&2; exit 2; }
scratch=${BENCH_DIR:-$(mktemp -d)}
[[ -n "${BENCH_DIR:-}" ]] || trap 'rm -rf "$scratch"' EXIT
for name in "${@:-hashing logscan hostile preflight report records checkpoint compare scale reach}"; do
  for bench in $name; do
    echo "== $bench"
    "$PYTHON" "$REPO/bench/$bench.py" "$scratch/$bench"
  done
done
