#!/usr/bin/env bats
# Preemption without a person: a job KILLed whole (no trap, no watchdog, no FAILED) is lost
# once its heartbeat is older than its lease, and the same command re-run with
# RESUME_FROM=auto becomes attempt 2 and resumes it; a platform's retry of the same command
# after a TERM becomes the next attempt each time, resuming the newest one, until SUCCESS;
# then a retry is refused. A real single-node Ray head and the stand-in verl.

load test_helper

setup_file() {
  sandbox
  build_fixture_once --nodes 1 --gpus-per-node 1 --set TARGET_STEPS=3 --set SAVE_FREQ=3
  start_standin_head 1
}

teardown_file() {
  stop_standin_head
}

setup() {
  sandbox
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=spot PROBE_TIMEOUT=30 SAVE_FREQ=1
  export HEARTBEAT_INTERVAL=1 HEARTBEAT_LEASE=3  # a short lease: the test waits it out
  export RAY_JOB_SUBMISSION_ID=spot  # the platform's name for the job: its retries carry it too
  export STANDIN_DUMP=$BATS_TEST_TMPDIR/standin STANDIN_LIB=$REPO/tests/lib
  JOB_SID=""
}

teardown() {
  [[ -z "$JOB_SID" ]] || kill_session "$JOB_SID"
}

# KILL every process of one session, by pid: what a reclaimed VM does to the whole job.
kill_session() {  # kill_session SID
  local -a pids
  mapfile -t pids < <(ps -eo pid=,sid= | awk -v sid="$1" '$2 == sid {print $1}')
  ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true  # one call: all at once
}

# The Driver command as a job of its own (a new session), in the background; sets JOB_SID.
start_job() {
  setsid bash -c "$(driver_command "$RUN_ID")" >"$BATS_TEST_TMPDIR/job.out" 2>&1 3>&- &
  local pid=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  [[ -e "$STANDIN_DUMP" ]] || { cat "$BATS_TEST_TMPDIR/job.out"; return 1; }
  rm -f "$STANDIN_DUMP"
  JOB_SID=$(ps -o sid= -p "$pid" | tr -d ' ')
  JOB_PID=$pid
}

launch() {  # the same Driver command again, in the foreground
  run bash -c "$(driver_command "$RUN_ID")"
}

field() {  # field RUN FILE KEY: a top-level value of a JSON record of a run
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$(run_dir "$1")/$2" "$3"
}

lineage() {  # lineage RUN FIELD
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["resume"][sys.argv[2]])' \
    "$(run_dir "$1")/run.json" "$2"
}

verify_runs() {
  run python3 "$BUNDLE/verify-two-worker-grpo-v1.py" runs --storage-root "$STORAGE"
}

@test "a job KILLed whole after its step-1 checkpoint is lost after its lease and RESUME_FROM=auto resumes it, no hand-written file" {
  export RESUME_FROM=auto
  STANDIN_STOP_AFTER=1 start_job
  grep -q "RESUME_FROM=auto: no resumable run of spot with profile test-fixture: starting fresh" "$(run_dir spot)/driver.log"
  assert_equal "$(field spot heartbeat.json state)" alive
  # while its heartbeat is fresh the run is RUNNING and a retry is refused
  verify_runs
  assert_output --regexp "spot +.*RUNNING"
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E091)"
  kill_session "$JOB_SID"
  JOB_SID=""
  wait "$JOB_PID" || true
  assert_file_not_exist "$(run_dir spot)/FAILED"
  sleep 4  # the lease runs out
  verify_runs
  assert_output --regexp "spot +.*PREEMPTED \\(resumable from step 1\\)"
  launch
  assert_success
  assert_output --partial "this launch is the next attempt, spot.2"
  assert_output --partial "attempt spot.2 resumes from spot: PREEMPTED (resumable from step 1)"
  assert_output --partial "SUCCESS spot.2"
  assert_equal "$(lineage spot.2 from_run_id)" spot
  assert_equal "$(lineage spot.2 step)" 1
  run lineage spot.2 earlier_ended
  # Lost either way: the lease ran out, or (the KILLs are not one instant) the heartbeat process
  # outlived the launcher by a moment and said so; never a hand-written marker.
  assert_output --regexp "(no heartbeat for longer than its lease|its launcher ended without a verdict): last beat"
  assert_output --partial "lease 3 s, state"
  assert_file_not_exist "$(run_dir spot)/FAILED"  # the lost run is only read
  assert_equal "$(field spot.2 heartbeat.json state)" ended
  verify_runs
  assert_output --regexp "spot +.*PREEMPTED \\(resumable from step 1\\) +-> spot.2"
  assert_output --regexp "spot.2 +.*SUCCESS +<- spot@1"
}

@test "a platform retry of the same command after TERM becomes attempt 2 resuming attempt 1, then attempt 3, then is refused after SUCCESS" {
  STANDIN_STOP_AFTER=1 start_job
  kill -TERM "$JOB_PID"
  wait "$JOB_PID" || true
  JOB_SID=""
  assert_equal "$(sed -n 's/^signal=//p' "$(run_dir spot)/FAILED")" TERM
  assert_equal "$(field spot heartbeat.json state)" ended
  # the first retry: attempt 2 resumes attempt 1 at step 1, and is preempted after step 2
  STANDIN_STOP_AFTER=2 start_job
  kill -TERM "$JOB_PID"
  wait "$JOB_PID" || true
  JOB_SID=""
  grep -q "attempt spot.2 resumes from spot" "$(run_dir spot.2)/driver.log"
  assert_equal "$(lineage spot.2 step)" 1
  # the second retry: attempt 3 resumes attempt 2 at step 2, to SUCCESS
  launch
  assert_success
  assert_output --partial "this launch is the next attempt, spot.3"
  assert_output --partial "attempt spot.3 resumes from spot.2"
  assert_equal "$(lineage spot.3 step)" 2
  assert_equal "$(lineage spot.3 chain)" "['spot', 'spot.2']"
  assert_file_exist "$(run_dir spot.3)/SUCCESS"
  # one attempt succeeded: a further retry is refused, nothing is claimed
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E092)"
  assert_not_exist "$(run_dir spot.4)"
  # the report of the last attempt: its lineage, the steps it trained and inherited
  run python3 "$BUNDLE/verify-two-worker-grpo-v1.py" report --storage-root "$STORAGE" --run-id spot.3
  assert_success
  assert_output --partial "resumed   from spot.2 at step 2; 1 step of 3 trained here (steps 3..3); 2 steps inherited from spot.2"
  assert_output --partial "saved     training time of the parent chain"
}

@test "HEARTBEAT_INTERVAL and HEARTBEAT_LEASE are checked before a run folder is claimed" {
  HEARTBEAT_LEASE=1 launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E090)"
  HEARTBEAT_INTERVAL=x launch
  assert_output --partial "(LAUNCH-E090)"
  assert_not_exist "$(run_dir spot)"
}

@test "a launcher whose heartbeat process alone is KILLed gets another: RUNNING past its lease, never retried" {
  STANDIN_STOP_AFTER=1 start_job
  local beater
  beater=$(field spot heartbeat.json beater_pid)
  kill -KILL "$beater"
  sleep 5  # longer than the 3 s lease: only a new beater keeps the beat fresh
  assert_equal "$(field spot heartbeat.json state)" alive
  [[ "$(field spot heartbeat.json beater_pid)" != "$beater" ]]
  local age
  age=$(python3 -c 'import json, sys, time; print(int(time.time() - json.load(open(sys.argv[1]))["beat_epoch"]))' \
    "$(run_dir spot)/heartbeat.json")
  ((age <= 3))  # fresh: another host reading it sees a live run too
  grep -q "(LAUNCH-W001) the heartbeat process $beater ended while the launcher ran" "$(run_dir spot)/driver.log"
  verify_runs
  assert_output --regexp "spot +.*RUNNING"
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E091)"
  assert_not_exist "$(run_dir spot.2)"
}
