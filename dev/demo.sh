#!/usr/bin/env bash
# Summary: A first look without a GPU: the three moments on a scratch volume, each step saying
#   what it proves, in well under a minute.
# Usage: dev/demo.sh [DEMO_ROOT]        (make demo [DEMO_ROOT=DIR])
#
# Moment 1 runs for real on generated inputs (a tiny random Qwen2, synthetic GSM8K rows, verl
# 0.6.0 from its wheel as a pinned git checkout). Moment 2 needs a GPU cluster, so the demo takes
# the folder that a real run (make smoke on one H200) left, tests/fixtures/real-smoke-run/, and
# a copy of it with one damaged checkpoint shard. Moment 3 runs for real on both.
# DEMO_ROOT (default .demo/ in the repo; /dev/shm/twgrpo-demo-$UID when the repo is on an
# overlay mount, which the inputs check refuses) is made afresh each time; only a folder an
# earlier demo made is ever removed. The verl wheel: SMOKE_VERL_WHEEL, .whl/, .cache/wheels/,
# else pip download. Exit codes: 0 every step did what it should; 2 the demo cannot run here.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

readonly PROG=demo
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO
readonly PROFILE=smoke-1x1
readonly STAMP=.twgrpo-demo  # marks a folder as the demo's own, so it may be replaced
readonly VERL_WHEEL_NAME=verl-0.6.0-py3-none-any.whl
readonly VERL_WHEEL_SHA256=2666528b8ab4494e2ac40c282a99281296c2d9dc9675ceac6bea8d41fb69b321  # PyPI's
FIXTURE=$(find "$REPO/tests/fixtures/real-smoke-run" -mindepth 1 -maxdepth 1 -type d -name 'smoke-*')
readonly FIXTURE

die() {
  local code=$1
  shift
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit "$code"
}

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

# step "what it proves" command...: print the command, run it, say what passing it proved.
step() {
  local proves=$1
  shift
  printf '\n$ %s\n' "$*"
  "$@"
  printf '  \342\234\223 %s\n' "$proves"
}

# expect_failure "what it proves" command...: the command must fail (exit 1 from the tool).
expect_failure() {
  local proves=$1 status=0
  shift
  printf '\n$ %s\n' "$*"
  "$@" || status=$?
  ((status != 0)) || die 1 "expected '$*' to fail, and it passed"
  printf '  \342\234\223 %s\n' "$proves"
}

pick_root() {
  local root=${1:-}
  if [[ -z "$root" ]]; then
    root=$REPO/.demo
    local fstype
    fstype=$(PYTHONPATH="$REPO/tools/verl/two-worker-grpo" python3 -c 'import sys; from twgrpo.run.mounts import mount_for; m = mount_for(sys.argv[1]); print(m["fstype"] if m else "")' "$REPO")
    [[ "$fstype" != overlay ]] || root=/dev/shm/twgrpo-demo-$(id -u)
  fi
  if [[ -e "$root" ]]; then
    [[ -f "$root/$STAMP" ]] ||
      die 2 "DEMO_ROOT $root exists and was not made by the demo; nothing was removed — set DEMO_ROOT= to a new folder"
    rm -rf -- "$root"
  fi
  mkdir -p "$root"
  touch "$root/$STAMP"
  printf '%s\n' "$root"
}

find_wheel() {
  local root=$1 wheel candidate
  for candidate in "${SMOKE_VERL_WHEEL:-}" "$REPO/.whl/$VERL_WHEEL_NAME" "$REPO/.cache/wheels/$VERL_WHEEL_NAME"; do
    [[ -n "$candidate" && -f "$candidate" ]] && { wheel=$candidate; break; }
  done
  if [[ -z "${wheel:-}" ]]; then
    wheel=$root/wheels/$VERL_WHEEL_NAME
    python3 -m pip download -q --no-deps -d "$root/wheels" verl==0.6.0 >&2 ||
      die 2 "cannot get $VERL_WHEEL_NAME with pip (no python3-pip, or no network?) — set SMOKE_VERL_WHEEL=/path/to/$VERL_WHEEL_NAME, or run make test once (it caches it)"
  fi
  local actual
  actual=$(sha256sum "$wheel")
  [[ "${actual%% *}" == "$VERL_WHEEL_SHA256" ]] ||
    die 2 "$wheel: sha256 expected $VERL_WHEEL_SHA256, actual ${actual%% *} — use PyPI's verl 0.6.0 wheel"
  printf '%s\n' "$wheel"
}

moment_one() {
  local vol=$1
  say "Moment 1: on the prep box (here the scratch volume $vol)"
  step "the pinned verl commit is a clean checkout, every model and data byte matches SHA256SUMS, and the row counts match the profile" \
    make -s -C "$REPO" verify-inputs PREP_ROOT="$vol" PROFILE="$PROFILE"
  step "every bundle script compiles and every file is hash-chained to the launcher's pin" \
    make -s -C "$REPO" verify-scripts
  step "the bundle landed on the volume and verifies there, as the job will see it" \
    make -s -C "$REPO" install-tools PREP_ROOT="$vol"
  step "this is the RuntimeEnv to paste: verl on PYTHONPATH, offline hubs, NCCL over Socket with RDMA off" \
    make -s -C "$REPO" runtime-env PROFILE="$PROFILE"
  step "this is the Driver command to paste: it runs the launcher only if its sha256 is this one" \
    make -s -C "$REPO" driver-command PROFILE="$PROFILE"
}

moment_two() {
  local runs=$1 good=$2 damaged=$3
  say "Moment 2: the job (needs GPUs, so the demo takes the folder a real run left)"
  mkdir -p "$runs"
  cp -a "$FIXTURE" "$runs/$good"
  printf '  %s: what make smoke left on one H200: driver.log, training.log, TensorBoard, rollouts, checkpoint, SUCCESS\n' "$good"
  cp -a "$FIXTURE" "$runs/$damaged"
  rm "$runs/$damaged/SUCCESS"
  truncate -s 100000 "$runs/$damaged/checkpoints/global_step_2/actor/optim_world_size_1_rank_0.pt"
  printf '  %s: a copy of that run under another name, its optimizer shard cut short\n' "$damaged"
}

moment_three() {
  local vol=$1 good=$2 damaged=$3
  say "Moment 3: afterwards, on the prep box"
  step "the run is proven from its files alone: markers, one rank per GPU over Socket, scalars, rollouts, every checkpoint shard intact" \
    make -s -C "$REPO" postflight PREP_ROOT="$vol" RUN_ID="$good"
  expect_failure "a copied, damaged run does not pass: its command names another run's folders (POST-E006) and the cut shard is named (POST-E022), each with its fix" \
    make -s -C "$REPO" postflight PREP_ROOT="$vol" RUN_ID="$damaged"
  step "report.html holds the verdict, timeline, topology, a chart per scalar, samples and shards" \
    make -s -C "$REPO" report PREP_ROOT="$vol" RUN_ID="$good"
  step "every run on the volume with its latest verdict" \
    make -s -C "$REPO" runs PREP_ROOT="$vol"
}

main() {
  local root vol wheel started good damaged
  started=$SECONDS
  [[ -n "$FIXTURE" ]] || die 2 "tests/fixtures/real-smoke-run/ holds no run folder — use a full clone"
  root=$(pick_root "${1:-${DEMO_ROOT:-}}")
  vol=$root/volume
  wheel=$(find_wheel "$root")
  good=$(basename "$FIXTURE")
  damaged=demo-damaged-checkpoint
  say "A scratch volume with generated inputs"
  step "inputs made here, no hub needed: a tiny random Qwen2, synthetic GSM8K-format parquet, and verl 0.6.0 (from its wheel) as a pinned git checkout" \
    python3 "$REPO/dev/generate-inputs.py" --storage-root "$vol" --profile "$PROFILE" --verl-wheel "$wheel"
  moment_one "$vol"
  moment_two "$vol/runs/verl/two-worker-grpo" "$good" "$damaged"
  moment_three "$vol" "$good" "$damaged"
  say "Done in $((SECONDS - started)) s. Open the page in a browser:"
  printf '  %s\n' "$vol/runs/verl/two-worker-grpo/$good/report.html"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
