#!/usr/bin/env bash
# Summary: Preempt and resume the smoke run for real on one GPU: a run with SAVE_FREQ=1 is
#   stopped with TERM once its step-1 checkpoint is complete, then resumed under a new RUN_ID
#   (RESUME_FROM) to SUCCESS; with SMOKE_FRESH=1 a fresh run follows, to compare times.
# Usage: dev/smoke-resume.sh [SMOKE_ROOT]
#
# Needs what dev/smoke.sh needs (one NVIDIA GPU, the verl image's packages, verl 0.6.0's
# wheel). Prints both verdicts and each run's phase times. Exit codes: 0 the resumed run (and
# the fresh one) ended SUCCESS; 2 this machine cannot run it; 1 otherwise.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=dev/smoke.sh
source "$HERE/smoke.sh"  # its helpers: check_machine, find_wheel, export_runtime_env, ...

driver_command() { pasted_command "$STORAGE" "$PROFILE" "$1"; }  # driver_command RUN_ID

launch() {  # launch RUN_ID [VAR=value...]: the pasted Driver command, with job variables
  local run_id=$1 command
  shift
  command=$(driver_command "$run_id")
  env "$@" bash -c "$command"
}

# Start a run in the background and TERM its launcher, as a Spot preemption does, once verl
# has written the tracker of checkpoint STEP (it writes the tracker after every shard).
launch_and_preempt() {  # launch_and_preempt RUN_ID STEP
  local run_id=$1 step=$2 pid tracker command
  tracker=$STORAGE/runs/verl/two-worker-grpo/$run_id/checkpoints/latest_checkpointed_iteration.txt
  command=$(driver_command "$run_id")
  env SAVE_FREQ=1 bash -c "$command" &  # env and bash exec: $! is the launcher itself
  pid=$!
  until [[ "$(cat "$tracker" 2>/dev/null)" == "$step" ]]; do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; die 1 "run $run_id ended before its step-$step checkpoint"; }
    sleep 0.2
  done
  printf '%s: checkpoint %s of %s is complete: TERM to the launcher (pid %s)\n' "$PROG" "$step" "$run_id" "$pid"
  kill -TERM "$pid"
  wait "$pid" || true
}

verdict() {  # verdict RUN_ID: SUCCESS, or FAILED with its marker's fields
  local run=$STORAGE/runs/verl/two-worker-grpo/$1
  if [[ -s "$run/SUCCESS" ]]; then
    echo SUCCESS
  else
    printf 'FAILED (%s)\n' "$(tr '\n' ' ' <"$run/FAILED" 2>/dev/null)"
  fi
}

main() {
  SMOKE_ROOT=${1:-${SMOKE_ROOT:-$REPO/.smoke}}
  check_machine
  check_root
  STORAGE=$SMOKE_ROOT/storage
  local stamp wheel first second fresh t0 t1 t2 t3 status=0
  stamp=$(date -u +%Y%m%dT%H%M%SZ)-$$
  first=spot-$stamp-a second=spot-$stamp-b fresh=fresh-$stamp
  wheel=$(find_wheel)
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$STORAGE" --profile "$PROFILE" --verl-wheel "$wheel"
  python3 "$REPO/prep/bundle.py" install "$STORAGE/tools/verl/two-worker-grpo" --force
  export_runtime_env "$STORAGE"
  trap stop_ray_head EXIT
  start_ray_head "$SMOKE_ROOT/ray-head.log" --num-gpus=1 ||
    die 2 "cannot start a Ray head (see $SMOKE_ROOT/ray-head.log) — is another Ray running here?"
  t0=$(now)
  launch_and_preempt "$first" 1
  t1=$(now)
  launch "$second" RESUME_FROM="$first" || status=$?
  t2=$(now)
  if [[ "${SMOKE_FRESH:-}" == 1 ]]; then
    launch "$fresh" || status=$?
  fi
  t3=$(now)
  local runs=$STORAGE/runs/verl/two-worker-grpo
  printf '\n%s: preempted run %s: %s\n' "$PROG" "$first" "$(verdict "$first")"
  printf '%s: resumed run %s: %s\n' "$PROG" "$second" "$(verdict "$second")"
  printf '%s: wall times (s): preempted launcher %s, resumed launcher %s' "$PROG" "$(elapsed "$t0" "$t1")" "$(elapsed "$t1" "$t2")"
  if [[ "${SMOKE_FRESH:-}" == 1 ]]; then
    printf ', fresh launcher %s (%s)' "$(elapsed "$t2" "$t3")" "$(verdict "$fresh")"
  fi
  printf '\n'
  local run
  for run in "$first" "$second" "$fresh"; do
    [[ -f "$runs/$run/driver.log" ]] || continue
    printf '%s:\n' "$run"
    phase_times "$runs/$run/driver.log"
  done
  [[ -s "$runs/$second/SUCCESS" ]] || status=1
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
