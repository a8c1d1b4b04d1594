#!/usr/bin/env bats
# The launcher's phases die with it, against a real single-node Ray head and the stand-in
# verl: whatever kills the launcher (KILL included, or a KILL of its whole process group) ends
# the running phase's process group within seconds; a phase that ignores TERM gets KILL after
# KILL_GRACE; FAILED says what it can. A full runs volume at the end leaves no empty marker,
# and the run is judged again once there is space.

load test_helper

setup_file() {
  sandbox
  build_fixture_once --nodes 1 --gpus-per-node 2
  start_standin_head 2
}

teardown_file() {
  stop_standin_head
}

setup() {
  sandbox
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=kill-$BATS_TEST_NUMBER-$$ PROBE_TIMEOUT=30 KILL_GRACE=2
  export STANDIN_DUMP=$BATS_TEST_TMPDIR/standin.json STANDIN_LIB=$REPO/tests/lib
  rm -f "$GPUS_CSV.hang"
  MOUNTS=()
}

teardown() {
  rm -f "$GPUS_CSV.hang"
  local pid mount
  for pid in $(pgrep -f -- "experiment_name=$RUN_ID "); do  # a failed test's own stragglers
    kill -KILL "$pid" 2>/dev/null || true
  done
  for mount in "${MOUNTS[@]}"; do
    umount "$mount" 2>/dev/null || umount -l "$mount" || true
  done
}

failed_field() {  # failed_field KEY: a value from the run's FAILED marker
  sed -n "s/^$1=//p" "$(run_dir "$RUN_ID")/FAILED"
}

# Start the Driver command in its own process group, wait for FILE; sets LAUNCHER.
start_and_wait_for() {  # start_and_wait_for FILE
  set -m
  bash -c "$(driver_command "$RUN_ID")" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  LAUNCHER=$!
  set +m
  for _ in $(seq 120); do
    [[ -e "$1" ]] && return 0
    sleep 0.5
  done
  cat "$BATS_TEST_TMPDIR/out"
  kill -KILL -- "-$LAUNCHER"
  return 1
}

# Succeeds once no process matches PATTERN, within SECONDS.
gone_within() {  # gone_within SECONDS PATTERN
  local tick
  for ((tick = 0; tick < 2 * $1; tick++)); do
    pgrep -f -- "$2" >/dev/null || return 0
    sleep 0.5
  done
  echo "still running after $1 s: $(pgrep -af -- "$2")" >&2
  return 1
}

@test "SIGKILL to the launcher during training ends the phase's group and tee; FAILED says so" {
  export STANDIN_MODE=sleep
  start_and_wait_for "$STANDIN_DUMP"
  kill -KILL "$LAUNCHER"
  wait "$LAUNCHER" || true  # reaped, as the platform's init would
  gone_within 10 "experiment_name=$RUN_ID "
  gone_within 10 "tee -a $(run_dir "$RUN_ID")/"
  assert_equal "$(failed_field phase)" training
  assert_equal "$(failed_field signal)" unknown
  run failed_field cause
  assert_output --partial "the watchdog stopped the phase's process group"
  run cat "$(run_dir "$RUN_ID")/driver.log"
  assert_output --partial "(LAUNCH-E020)"
  assert_file_exist "$(run_dir "$RUN_ID")/preflight.json"
}

@test "SIGKILL to the launcher's whole process group stops a trainer that ignores TERM" {
  export STANDIN_MODE=stubborn
  start_and_wait_for "$STANDIN_DUMP"
  kill -KILL -- "-$LAUNCHER"
  wait "$LAUNCHER" || true
  gone_within 15 "experiment_name=$RUN_ID "
  run cat "$(run_dir "$RUN_ID")/driver.log"
  assert_output --partial "(LAUNCH-E020)"
  assert_output --partial "(LAUNCH-E021) phase training still ran 2 s after SIGTERM"
  assert_equal "$(failed_field phase)" training
}

@test "SIGTERM to the launcher: a trainer that ignores it is killed after KILL_GRACE" {
  export STANDIN_MODE=stubborn
  start_and_wait_for "$STANDIN_DUMP"
  local started=$SECONDS
  kill -TERM "$LAUNCHER"
  local status=0
  wait "$LAUNCHER" || status=$?
  assert_equal "$status" 143
  ((SECONDS - started < 20))
  gone_within 5 "experiment_name=$RUN_ID "
  assert_equal "$(failed_field signal)" TERM
  assert_equal "$(failed_field exit_status)" 143
  run cat "$BATS_TEST_TMPDIR/out"
  assert_output --partial "(LAUNCH-E021) phase training still ran 2 s after SIGTERM"
}

@test "SIGTERM to the training phase's own shell ends the whole phase, and the launcher goes on" {
  export STANDIN_MODE=sleep
  start_and_wait_for "$STANDIN_DUMP"
  local trainer phase status=0
  trainer=$(pgrep -f -- "experiment_name=$RUN_ID " | head -1)
  phase=$(ps -o pgid= -p "$trainer" | tr -d ' ')  # the phase's group: its leader is the phase's shell
  [[ "$phase" != "$LAUNCHER" ]]
  kill -TERM "$phase"  # that shell alone, as an operator's kill or a supervisor would
  gone_within 15 "experiment_name=$RUN_ID "
  gone_within 10 "tee -a $(run_dir "$RUN_ID")/"
  for _ in $(seq 60); do kill -0 "$LAUNCHER" 2>/dev/null || break; sleep 0.5; done
  run kill -0 "$LAUNCHER"
  assert_failure  # the launcher did not hang on the orphaned training
  wait "$LAUNCHER" || status=$?
  ((status != 0))
  assert_equal "$(failed_field phase)" training
  run cat "$(run_dir "$RUN_ID")/driver.log"
  assert_output --partial "(LAUNCH-E022) phase training ended by signal 15 while its process group"
}

@test "SIGKILL to the launcher during preflight: no orphan writes preflight.json later" {
  echo 120 >"$GPUS_CSV.hang"  # nvidia-smi hangs inside the probe
  start_and_wait_for "$(run_dir "$RUN_ID")/shared-storage-sentinel"
  kill -KILL "$LAUNCHER"
  wait "$LAUNCHER" || true
  gone_within 10 "verify-two-worker-grpo-v1.py preflight .*--run-id $RUN_ID "
  rm -f "$GPUS_CSV.hang"
  sleep 5  # an orphaned preflight would finish its probe and write its record now
  assert_file_not_exist "$(run_dir "$RUN_ID")/preflight.json"
  assert_equal "$(failed_field phase)" preflight
}

@test "a full runs volume after training: no empty marker, the cause named, judged again later" {
  [[ $(id -u) == 0 ]] || skip "needs root to mount a tmpfs"
  umask 022
  mkdir -p "$STORAGE/runs"
  mount -t tmpfs -o size=16m tmpfs "$STORAGE/runs"
  MOUNTS+=("$STORAGE/runs")
  STANDIN_MODE=artifacts STANDIN_FAULT=fill-disk run bash -c "$(driver_command "$RUN_ID")"
  assert_failure 1
  assert_output --partial "No space left on device"
  assert_output --partial "(GEN-E002) cannot write"
  refute_output --partial "Traceback"
  local run
  run=$(run_dir "$RUN_ID")
  assert_file_not_exist "$run/SUCCESS"
  [[ ! -e "$run/FAILED" || -s "$run/FAILED" ]]
  run find "$run" -name '.*.tmp'
  assert_output ""
  run grep -c "phase training ended with status 0" "$run/driver.log"
  assert_output 1  # the launcher's own record of the phase fitted in the page left
  # space again: the same run is judged from its artifacts, nothing was lost
  rm -f "$run/.filler" "$run/.filler-small"
  run python3 -I -B "$BUNDLE/verify-two-worker-grpo-v1.py" postflight --storage-root "$STORAGE" \
    --run-id "$RUN_ID"
  assert_success
  assert_file_exist "$run/SUCCESS"
  [[ -s "$run/SUCCESS" ]]
  # records are readable by others, as the usual umask allows
  assert_equal "$(stat -c '%a' "$run/run.json" "$run/inputs.json" "$run/preflight.json" \
    "$run/verification.json" "$run/SUCCESS" | sort -u)" 644
  run find "$BUNDLE" -name __pycache__
  assert_output ""
}
