#!/usr/bin/env bash
# Summary: Re-record the real-run fixtures with this checkout's launcher, on a GPU machine.
# Usage: dev/record-fixtures.sh OUT [SCRATCH]        (as root; WHEELHOUSE=<dir> as for make smoke)
#
# Runs make smoke (one Ray head) and make smoke-2x1 (two namespaced Ray hosts sharing GPU 0)
# under SCRATCH (default /tmp/twgrpo-record, must not exist), then writes what
# tests/fixtures/real-smoke-run/ and tests/fixtures/real-smoke-run-2x1/ hold: OUT/real-smoke-run/<RUN_ID>/
# and OUT/real-smoke-run-2x1/<RUN_ID>.tar.xz, the scratch root rewritten to
# /srv/two-worker-grpo/.smoke and this checkout to /srv/two-worker-grpo in every text file
# (dev/pack-fixture.py --keep-shards --checkout). OUT must not exist: nothing is overwritten. Replace the
# fixtures with OUT's folders, then run the tests that read them (grep real-smoke-run tests/).
# Exit codes: 0 both runs SUCCESS and packed; otherwise the failing smoke's code (2: bad use).
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

readonly PROG=record-fixtures
readonly TO_ROOT=/srv/two-worker-grpo/.smoke
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO

die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 2
}

main() {
  (($# >= 1 && $# <= 2)) || die "usage: dev/record-fixtures.sh OUT [SCRATCH]"
  local out=$1 scratch=${2:-/tmp/twgrpo-record} run tmp
  [[ ! -e "$out" ]] || die "$out exists: give a new folder (nothing is overwritten)"
  [[ ! -e "$scratch" ]] || die "$scratch exists: give a new scratch folder"
  mkdir -p "$scratch" "$out/real-smoke-run-2x1"
  make -C "$REPO" smoke SMOKE_ROOT="$scratch" WHEELHOUSE="${WHEELHOUSE:-}" 2>&1 | tee "$scratch/smoke.out"
  make -C "$REPO" smoke-2x1 SMOKE_ROOT="$scratch" WHEELHOUSE="${WHEELHOUSE:-}" 2>&1 | tee "$scratch/smoke-2x1.out"
  python3 "$REPO/dev/pack-fixture.py" "$scratch/storage/runs/verl/two-worker-grpo" "$out/real-smoke-run" \
    --from-root "$scratch/storage" --to-root "$TO_ROOT/storage" --keep-shards --checkout "$REPO"
  tmp=$scratch/packed-2x1
  python3 "$REPO/dev/pack-fixture.py" "$scratch/2x1/runs" "$tmp" --from-root "$scratch" --to-root "$TO_ROOT" \
    --keep-shards --checkout "$REPO"
  for run in "$tmp"/*/; do
    run=$(basename "$run")
    tar -cJf "$out/real-smoke-run-2x1/$run.tar.xz" -C "$tmp" "$run"
  done
  echo "$PROG: fixtures in $out"
}

main "$@"
