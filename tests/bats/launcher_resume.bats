#!/usr/bin/env bats
# RESUME_FROM: a run preempted with TERM after its step-1 checkpoint is resumed under a new
# RUN_ID to SUCCESS, and a chain of resumes; every refusal of the resume phase, which runs
# before inputs and preflight, leaves FAILED phase=resume; the earlier run is only read.
# A real single-node Ray head (stub nvidia-smi, 1 GPU) and the stand-in verl, which honours
# save_freq and resume_path like verl 0.6.0 and stops after STANDIN_STOP_AFTER steps.

load test_helper

setup_file() {
  sandbox
  build_fixture_once --nodes 1 --gpus-per-node 1 --set TARGET_STEPS=3 --set SAVE_FREQ=3
  start_standin_head 1
  # One run preempted after its step-1 checkpoint, shared (copied) by the tests.
  STORAGE=$BATS_FILE_TMPDIR/preempted
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=spot-1 SAVE_FREQ=1 PROBE_TIMEOUT=30
  export STANDIN_DUMP=$BATS_FILE_TMPDIR/standin STANDIN_STOP_AFTER=1 STANDIN_LIB=$REPO/tests/lib
  launch_and_term "$STANDIN_DUMP" >&3 2>&1 || true
  [[ "$(sed -n 's/^signal=//p' "$(run_dir spot-1)/FAILED")" == TERM ]]
  unset SAVE_FREQ STANDIN_STOP_AFTER
}

teardown_file() {
  stop_standin_head
}

setup() {
  sandbox
  cp -a "$BATS_FILE_TMPDIR/preempted" "$STORAGE"
  export BUNDLE=$STORAGE/tools/verl/two-worker-grpo PROFILE=test-fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=spot-2 RESUME_FROM=spot-1 PROBE_TIMEOUT=30
  export STANDIN_DUMP=$BATS_TEST_TMPDIR/standin
  EARLIER=$(run_dir spot-1)
  BEFORE=$(tree_state "$EARLIER")
}

launch() {
  run bash -c "$(driver_command "$RUN_ID")"
}

# Start the Driver command in the background, wait for FILE, TERM it, wait for its end.
launch_and_term() {  # launch_and_term FILE
  set -m
  bash -c "$(driver_command "$RUN_ID")" >"$BATS_FILE_TMPDIR/out-$RUN_ID" 2>&1 3>&- &
  local pid=$! tries
  set +m
  for tries in $(seq 120); do
    [[ -e "$1" ]] && break
    sleep 0.5
  done
  [[ -e "$1" ]] || { cat "$BATS_FILE_TMPDIR/out-$RUN_ID"; kill -KILL -- "-$pid"; return 1; }
  rm -f "$1"
  kill -TERM "$pid"
  wait "$pid" || true
}

failed_field() {  # failed_field RUN KEY
  sed -n "s/^$2=//p" "$(run_dir "$1")/FAILED"
}

assert_earlier_untouched() {
  assert_equal "$(tree_state "$EARLIER")" "$BEFORE"
}

assert_refused() {  # assert_refused ID: FAILED phase=resume, before inputs and preflight
  assert_failure 1
  assert_output --partial "($1)"
  assert_equal "$(failed_field "$RUN_ID" phase)" resume
  assert_file_exist "$(run_dir "$RUN_ID")/resume.json"
  assert_file_not_exist "$(run_dir "$RUN_ID")/inputs.json"
  assert_file_not_exist "$(run_dir "$RUN_ID")/preflight.json"
  assert_earlier_untouched
}

lineage() {  # lineage RUN FIELD: a field of run.json's resume record
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["resume"][sys.argv[2]])' \
    "$(run_dir "$1")/run.json" "$2"
}

@test "the preempted run left FAILED signal=TERM and its step-1 checkpoint" {
  assert_equal "$(failed_field spot-1 phase)" training
  assert_equal "$(failed_field spot-1 exit_status)" 143
  assert_file_exist "$EARLIER/checkpoints/global_step_1/actor/model_world_size_1_rank_0.pt"
  assert_equal "$(cat "$EARLIER/checkpoints/latest_checkpointed_iteration.txt")" 1
  run grep -c 'trainer.save_freq=1' "$EARLIER/resolved-command.txt"
  assert_output 1
}

@test "a newer bundle installed beside the earlier run's: its Driver command still resumes it; the newer one names the earlier version" {
  local b=$BATS_TEST_TMPDIR/repo-b profiles=tools/verl/two-worker-grpo/profiles
  copy_repo "$b"
  cp "$BUNDLE/profiles/test-fixture.env" "$b/$profiles/"
  sed 's/^PROFILE_NAME=.*/PROFILE_NAME=other/' "$BUNDLE/profiles/test-fixture.env" >"$b/$profiles/other.env"
  make -s -C "$b" checksums >/dev/null
  make -s -C "$b" install-tools PREP_ROOT="$STORAGE" >/dev/null
  launch  # the command pasted for the earlier run's bundle
  assert_success
  assert_output --partial "SUCCESS spot-2"
  # the newer bundle's command refuses to resume it, naming the bundle version it used
  RUN_ID=spot-3 run bash -c "$(make -s -C "$b" driver-command STORAGE_ROOT="$STORAGE" PROFILE=test-fixture)"
  assert_failure 1
  assert_output --partial "(RES-E005)"
  assert_earlier_untouched
}

@test "a preempted run resumes under a new RUN_ID to SUCCESS and the earlier run is only read" {
  launch
  assert_success
  assert_output --partial "resume: PASSED"
  assert_output --partial "training starts at step 2"
  assert_output --partial "SUCCESS spot-2"
  local run
  run=$(run_dir spot-2)
  assert_file_exist "$run/SUCCESS"
  assert_equal "$(lineage spot-2 from_run_id)" spot-1
  assert_equal "$(lineage spot-2 step)" 1
  run grep -o 'trainer.resume_from_path=[^ ]*' "$(run_dir spot-2)/resolved-command.txt"
  # verl loaded this run's own copy of the checkpoint, hashed as the resume phase wrote it
  assert_output "trainer.resume_from_path=$(run_dir spot-2)/resume-from/spot-1/checkpoints/global_step_1"
  assert_file_not_exist "$(run_dir spot-2)/rollouts/1.jsonl"
  assert_file_exist "$(run_dir spot-2)/rollouts/3.jsonl"
  assert_earlier_untouched
  # make postflight re-derives the verdict from the files alone
  run python3 "$BUNDLE/verify-two-worker-grpo-v1.py" postflight --storage-root "$STORAGE" --run-id spot-2
  assert_success
  assert_output --partial "postflight: resume"
}

@test "a chain of resumes: preempted again after step 2, resumed again to SUCCESS" {
  STANDIN_STOP_AFTER=2 SAVE_FREQ=1 launch_and_term "$STANDIN_DUMP"
  assert_equal "$(failed_field spot-2 signal)" TERM
  assert_equal "$(cat "$(run_dir spot-2)/checkpoints/latest_checkpointed_iteration.txt")" 2
  RUN_ID=spot-3 RESUME_FROM=spot-2 launch
  assert_success
  assert_equal "$(lineage spot-3 step)" 2
  assert_equal "$(lineage spot-3 chain)" "['spot-1', 'spot-2']"
  assert_file_exist "$(run_dir spot-3)/SUCCESS"
  assert_earlier_untouched
}

@test "resume refuses a run that is still running (no FAILED, its driver alive)" {
  export RUN_ID=spot-live
  unset RESUME_FROM
  STANDIN_STOP_AFTER=1 SAVE_FREQ=1 bash -c "$(driver_command spot-live)" >"$BATS_TEST_TMPDIR/live" 2>&1 3>&- &
  local pid=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  RUN_ID=spot-late RESUME_FROM=spot-live run bash -c "$(driver_command spot-late)"
  kill -TERM "$pid"
  wait "$pid" || true
  assert_failure 1
  assert_output --partial "(RES-E007)"
  assert_equal "$(failed_field spot-late phase)" resume
}

@test "resume refuses a run whose driver is alive even beside a hand-written FAILED" {
  export RUN_ID=spot-live
  unset RESUME_FROM
  STANDIN_STOP_AFTER=1 SAVE_FREQ=1 bash -c "$(driver_command spot-live)" >"$BATS_TEST_TMPDIR/live" 2>&1 3>&- &
  local pid=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  printf 'time=now\nphase=unknown\nexit_status=1\nsignal=none\nrun_id=spot-live\ncause=by hand\n' \
    >"$(run_dir spot-live)/FAILED"
  RUN_ID=spot-late RESUME_FROM=spot-live run bash -c "$(driver_command spot-late)"
  kill -TERM "$pid"
  wait "$pid" || true
  assert_failure 1
  assert_output --partial "(RES-E007)"
  assert_output --partial "is alive, whatever its markers say"
  assert_file_not_exist "$(run_dir spot-late)/resume-from"
}

@test "resume refuses an unknown earlier run" {
  RESUME_FROM=no-such-run launch
  assert_refused RES-E001
}

set_earlier_value() {  # set_earlier_value KEY VALUE: a profile value in the earlier run.json
  python3 - "$EARLIER/run.json" "$1" "$2" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
assert sys.argv[2] in data["profile"]["values"]
data["profile"]["values"][sys.argv[2]] = sys.argv[3]
json.dump(data, open(sys.argv[1], "w"))
PY
  BEFORE=$(tree_state "$EARLIER")
}

@test "resume refuses an earlier run of another profile" {
  set_earlier_value LEARNING_RATE 1e-5
  launch
  assert_refused RES-E003
}

@test "resume refuses an earlier run of other input pins" {
  set_earlier_value DATA_SUMS_SHA256 "$(printf '0%.0s' {1..64})"
  launch
  assert_refused RES-E004
}

@test "resume refuses an earlier run of another bundle" {
  sed -i 's/"bundle_sums_sha256": "[0-9a-f]*"/"bundle_sums_sha256": "0000"/' "$EARLIER/run.json"
  BEFORE=$(tree_state "$EARLIER")
  launch
  assert_refused RES-E005
}

@test "resume refuses an earlier run that succeeded" {
  echo "2026-12-02T13:10:33+00:00" >"$EARLIER/SUCCESS"
  BEFORE=$(tree_state "$EARLIER")
  launch
  assert_refused RES-E006
}

@test "resume refuses an earlier run without a FAILED marker or a heartbeat whose driver is gone" {
  rm "$EARLIER/FAILED" "$EARLIER/heartbeat.json"  # as a run from before heartbeats
  BEFORE=$(tree_state "$EARLIER")
  launch
  assert_refused RES-E008
}

@test "resume refuses an earlier run without a complete checkpoint" {
  flip_byte "$EARLIER/checkpoints/global_step_1/actor/optim_world_size_1_rank_0.pt"
  BEFORE=$(tree_state "$EARLIER")
  launch
  assert_refused RES-E009
}

@test "SAVE_FREQ and RESUME_FROM are checked before a run folder is claimed" {
  SAVE_FREQ=0 launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E030)"
  SAVE_FREQ=1x launch
  assert_output --partial "(LAUNCH-E030)"
  RESUME_FROM=spot-2 launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E031)"
  RESUME_FROM=../spot-1 launch
  assert_output --partial "(LAUNCH-E031)"
  assert_not_exist "$(run_dir spot-2)"
}
