#!/usr/bin/env bash
# Summary: Hard-kill the smoke run for real on one GPU and let the same job resume by itself:
#   a run with SAVE_FREQ=1 and RESUME_FROM=auto is KILLed whole (every process of its session,
#   no trap, no watchdog, no FAILED) once its step-1 checkpoint is complete; after its heartbeat
#   lease the very same command is run again, becomes attempt <RUN_ID>.2, resumes the lost run
#   from step 1 and ends SUCCESS.
# Usage: dev/smoke-kill-resume.sh [SMOKE_ROOT]
#
# Needs what dev/smoke.sh needs (one NVIDIA GPU, the verl image's packages, verl 0.6.0's wheel)
# and setsid. With SMOKE_KEEP=<folder>, both run folders are copied there (for a fixture).
# Prints both verdicts, make runs and each run's phase times. Exit codes: 0 attempt 2 ended
# SUCCESS resuming the lost run; 2 this machine cannot run it; 1 otherwise.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=dev/smoke.sh
source "$HERE/smoke.sh"  # its helpers: check_machine, find_wheel, export_runtime_env, ...

readonly INTERVAL=2 LEASE=6  # seconds: a short lease, so the retry does not wait two minutes

driver_command() { pasted_command "$STORAGE" "$PROFILE" "$1"; }  # driver_command RUN_ID

# The job's environment, the same for the first run and its retry.
job() {  # job RUN_ID: runs the pasted Driver command in the foreground
  env SAVE_FREQ=1 RESUME_FROM=auto HEARTBEAT_INTERVAL=$INTERVAL HEARTBEAT_LEASE=$LEASE \
    bash -c "$(driver_command "$1")"
}

# KILL every process of the job's session, by pid: what a reclaimed VM does to the job.
kill_job() {  # kill_job SID
  local pid
  for pid in $(ps -eo pid=,sid= | awk -v sid="$1" '$2 == sid {print $1}'); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}

launch_and_kill() {  # launch_and_kill RUN_ID STEP: KILL the whole job after checkpoint STEP
  local run_id=$1 step=$2 pid sid tracker
  tracker=$STORAGE/runs/verl/two-worker-grpo/$run_id/checkpoints/latest_checkpointed_iteration.txt
  # a session of its own (setsid), with the same environment as job(): $! is the launcher
  setsid env SAVE_FREQ=1 RESUME_FROM=auto HEARTBEAT_INTERVAL=$INTERVAL HEARTBEAT_LEASE=$LEASE \
    bash -c "$(driver_command "$run_id")" &
  pid=$!
  until [[ "$(cat "$tracker" 2>/dev/null)" == "$step" ]]; do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; die 1 "run $run_id ended before its step-$step checkpoint"; }
    sleep 0.2
  done
  sid=$(ps -o sid= -p "$pid" | tr -d ' ')
  printf '%s: checkpoint %s of %s is complete: KILL to every process of the job (session %s)\n' \
    "$PROG" "$step" "$run_id" "$sid"
  kill_job "$sid"
  wait "$pid" || true
}

# Ray ends a dead driver's actors by itself; the retry waits until the head's GPU is free again.
wait_for_free_gpu() {
  python3 - <<'PY' || die 1 "the killed job's Ray actors still hold the GPU after 120 s"
import time
import ray
ray.init(address="auto", logging_level="ERROR")
for _ in range(240):
    if ray.available_resources().get("GPU", 0) >= 1:
        raise SystemExit(0)
    time.sleep(0.5)
raise SystemExit(1)
PY
}

verdict() {  # verdict RUN_ID: what the verifier says
  python3 -I -B "$STORAGE/tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py" report \
    --storage-root "$STORAGE" --run-id "$1" | head -1
}

main() {
  SMOKE_ROOT=${1:-${SMOKE_ROOT:-$REPO/.smoke}}
  check_machine
  check_root
  command -v setsid >/dev/null || die 2 "setsid is missing (util-linux)"
  STORAGE=$SMOKE_ROOT/storage
  local stamp wheel run t0 t1 t2 status=0
  stamp=$(date -u +%Y%m%dT%H%M%SZ)-$$
  run=kill-$stamp
  wheel=$(find_wheel)
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$STORAGE" --profile "$PROFILE" --verl-wheel "$wheel"
  python3 "$REPO/prep/bundle.py" install "$STORAGE/tools/verl/two-worker-grpo" --force
  export_runtime_env "$STORAGE"
  trap stop_ray_head EXIT
  start_ray_head "$SMOKE_ROOT/ray-head.log" --num-gpus=1 ||
    die 2 "cannot start a Ray head (see $SMOKE_ROOT/ray-head.log) — is another Ray running here?"
  t0=$(now)
  launch_and_kill "$run" 1
  local runs=$STORAGE/runs/verl/two-worker-grpo
  [[ ! -e "$runs/$run/FAILED" ]] || die 1 "the KILLed run has a FAILED marker: it was not killed whole"
  printf '%s: waiting %s s for the heartbeat lease to run out\n' "$PROG" $((LEASE + 2))
  sleep $((LEASE + 2))
  wait_for_free_gpu
  t1=$(now)
  job "$run" || status=$?  # the platform's retry: the very same command
  t2=$(now)
  printf '\n%s: lost run %s: %s\n' "$PROG" "$run" "$(verdict "$run")"
  printf '%s: attempt %s.2: %s\n' "$PROG" "$run" "$(verdict "$run.2")"
  printf '%s: wall times (s): killed launcher %s, attempt 2 %s\n' "$PROG" "$(elapsed "$t0" "$t1")" "$(elapsed "$t1" "$t2")"
  python3 -I -B "$STORAGE/tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py" runs --storage-root "$STORAGE"
  local name
  for name in "$run" "$run.2"; do
    [[ -f "$runs/$name/driver.log" ]] || continue
    printf '%s:\n' "$name"
    phase_times "$runs/$name/driver.log"
  done
  if [[ -n "${SMOKE_KEEP:-}" ]]; then
    mkdir -p "$SMOKE_KEEP"
    cp -a "$runs/$run" "$runs/$run.2" "$SMOKE_KEEP/"
    printf '%s: both run folders copied to %s\n' "$PROG" "$SMOKE_KEEP"
  fi
  [[ -s "$runs/$run.2/SUCCESS" ]] || status=1
  grep -q "\"from_run_id\": \"$run\"" "$runs/$run.2/run.json" || status=1
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
