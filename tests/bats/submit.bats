#!/usr/bin/env bats
# make submit, stop and logs against a real single-node Ray head with its job server (the
# dashboard of ray[default]) and the stand-in verl: SUCCESS, a stop that leaves FAILED with
# signal=TERM, and one clear line for each wrong address or request. The head is started
# WITHOUT the rollout adapter on its PYTHONPATH: the submitted RuntimeEnv must bring it.

load test_helper

http_get() {  # http_get URL: the body, or nothing when the server does not answer 200
  python3 -c 'import sys, urllib.request
try:
    sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
except Exception:
    sys.exit(1)' "$1"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

setup_file() {
  sandbox
  build_fixture_once --nodes 1 --gpus-per-node 2
  "$VENV/bin/python" -c 'import aiohttp, aiohttp_cors, opencensus, prometheus_client' 2>/dev/null ||
    skip "the Ray job server needs ray[default] (aiohttp, opencensus, prometheus_client) in .venv"
  export GPUS_CSV=$BATS_FILE_TMPDIR/gpus.csv
  gpus_csv "$GPUS_CSV" 2
  export NVIDIA_SMI_STUB=$GPUS_CSV NCCL_IB_DISABLE=1
  local port
  port=$(free_port)
  # shellcheck source=dev/ray-head.bash
  source "$REPO/dev/ray-head.bash"
  # 3 CPUs: verl places a CPU with each of the 2 GPUs and one for its TaskRunner (job-shape)
  start_ray_head "$BATS_FILE_TMPDIR/ray-head.log" --num-gpus=2 --num-cpus=3 \
    --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port="$port" \
    --dashboard-agent-listen-port="$(free_port)" --dashboard-agent-grpc-port="$(free_port)" \
    --metrics-export-port="$(free_port)" 3>&-
  export RAY_HEAD_PGID RAY_HEAD_TEMP JOBS=http://127.0.0.1:$port
  for _ in $(seq 60); do
    http_get "$JOBS/api/version" >/dev/null && return 0
    sleep 1
  done
  echo "the job server did not answer at $JOBS — see $BATS_FILE_TMPDIR/ray-head.log" >&2
  return 1
}

teardown_file() {
  # shellcheck source=dev/ray-head.bash
  source "$REPO/dev/ray-head.bash"
  stop_ray_head
}

setup() {
  sandbox
  use_fixture
  RUN_ID=sub-$BATS_TEST_NUMBER-$RANDOM
  export STANDIN_DUMP=$BATS_TEST_TMPDIR/standin.json
}

# make submit for the sandbox's volume and installed bundle; JOB_ENV drives the stand-in verl.
submit() {  # submit [more make arguments]
  make -s -C "$REPO" submit RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS" PROFILE="$PROFILE" \
    STORAGE_ROOT="$STORAGE" PREP_ROOT="$STORAGE" SUBMIT_BUNDLE="$BUNDLE" "$@"
}

failed_field() {  # failed_field KEY: a value from the run's FAILED marker
  sed -n "s/^$1=//p" "$(run_dir "$RUN_ID")/FAILED"
}

@test "make submit runs the Driver command through the Ray job API to SUCCESS and exits 0" {
  run submit JOB_ENV="STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib"
  assert_success
  assert_line --partial "submit: submitted $RUN_ID to $JOBS (Ray 2.49.2)"
  assert_line --regexp "^submit: $RUN_ID: RUNNING after [0-9]+ s$"
  assert_line --regexp "^preflight: rollout-engine \.+ ok$"  # the RuntimeEnv brought rollout/
  assert_line "run-two-worker-grpo-v1: SUCCESS $RUN_ID (verification: $(run_dir "$RUN_ID")/verification.json)"
  assert_line --partial "submit: $RUN_ID: SUCCESS — the run's folder is $(run_dir "$RUN_ID")"
  assert_file_exist "$(run_dir "$RUN_ID")/SUCCESS"
  assert_file_not_exist "$(run_dir "$RUN_ID")/FAILED"
  # RUN_ID reached the launcher as the job's environment variable, never in the command.
  run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' "$(run_dir "$RUN_ID")/run.json"
  assert_output "$RUN_ID"
  # the job identity a retry must carry to continue it: Ray's submission id, handed to the driver
  run python3 -c 'import json, sys; job = json.load(open(sys.argv[1]))["job_identity"]; print(job["kind"], job["id"])' "$(run_dir "$RUN_ID")/run.json"
  assert_output "ray-job $RUN_ID"
  run http_get "$JOBS/api/jobs/$RUN_ID"
  assert_output --partial '"entrypoint": "bash -c '
  refute_output --partial "working_dir"
  refute_output --partial "export RUN_ID"
}

@test "make stop ends a submitted run with FAILED signal=TERM, and make submit exits with its status" {
  submit JOB_ENV="STANDIN_MODE=sleep STANDIN_DUMP=$STANDIN_DUMP" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local job=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  assert_file_exist "$STANDIN_DUMP"  # training had started
  run make -s -C "$REPO" stop RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS"
  assert_success
  assert_line "submit: $RUN_ID: stop sent (SIGTERM: the launcher writes FAILED with signal=TERM)"
  assert_line "submit: $RUN_ID: STOPPED"
  status=0
  wait "$job" || status=$?
  assert_equal "$status" 2  # make's own code for a failed recipe; the tool's is in its Error line
  run cat "$BATS_TEST_TMPDIR/out"
  assert_line --partial "submit: $RUN_ID: STOPPED, exit status 143: FAILED phase=training exit_status=143 signal=TERM"
  assert_line --partial "Error 143"
  assert_equal "$(failed_field signal)" TERM
  assert_equal "$(failed_field phase)" training
  assert_file_not_exist "$(run_dir "$RUN_ID")/SUCCESS"
  run make -s -C "$REPO" stop RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS"  # a second stop changes nothing
  assert_success
  assert_output "submit: $RUN_ID had already ended: STOPPED"
}

@test "make logs prints a failed run's log and status; make submit exits with the launcher's status" {
  run submit JOB_ENV="STANDIN_MODE=fail"
  assert_failure
  assert_line --partial "submit: $RUN_ID: FAILED, exit status 3: FAILED phase=training exit_status=3"
  assert_line --partial "Error 3"
  run make -s -C "$REPO" logs RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS"
  assert_success
  assert_line "standin: training failed on purpose"
  assert_line "submit: $RUN_ID: FAILED"
}

@test "make stop waits a bounded time for a job that ignores TERM, then says so (SUB-E014)" {
  submit JOB_ENV="STANDIN_MODE=stubborn STANDIN_DUMP=$STANDIN_DUMP KILL_GRACE=8" >/dev/null 2>&1 3>&- &
  local job=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  run "$VENV/bin/python" "$REPO/prep/submit.py" stop --address "$JOBS" --run-id "$RUN_ID" --wait 2
  assert_failure 1
  assert_output --partial "(SUB-E014) $RUN_ID is still not stopped after 2 s"
  wait "$job" || true  # the launcher KILLs its stubborn phase after KILL_GRACE and ends
  assert_equal "$(failed_field signal)" TERM
}

@test "a RUN_ID already submitted is refused by the job server (SUB-E005), or first by its run folder (SUB-E013)" {
  run submit JOB_ENV="STANDIN_MODE=fail"
  assert_failure
  local before
  before=$(tree_state "$(run_dir "$RUN_ID")")
  run submit PREP_ROOT=/nonexistent JOB_ENV="STANDIN_MODE=fail"
  assert_failure
  assert_output --partial "submit: (SUB-E005) RUN_ID $RUN_ID was already submitted to this cluster"
  assert_line --index 0 --partial "submit: (SUB-W001) PREP_ROOT is not mounted on this box"
  assert_line --index 1 --partial "    HINT: Set PREP_ROOT= to this box's mount"
  assert_equal "${#lines[@]}" 5  # the warning and our one line, each with its HINT, and make's Error line
  run submit JOB_ENV="STANDIN_MODE=fail"
  assert_failure
  assert_output --partial "submit: (SUB-E013) $(run_dir "$RUN_ID") exists: RUN_ID $RUN_ID has run before"
  assert_equal "$(tree_state "$(run_dir "$RUN_ID")")" "$before"
}

@test "a wrong or unreachable address gets one clear line and submits nothing" {
  local closed
  closed=$(free_port)
  run submit RAY_ADDRESS=""
  assert_line --index 0 "submit: (SUB-E001) RAY_ADDRESS is not set"
  assert_line --index 1 "    HINT: Set RAY_ADDRESS=http://<head>:8265, the address of the head's dashboard, which serves the Ray job API."
  run submit RAY_ADDRESS=127.0.0.1:6379
  assert_line --index 0 --partial "submit: (SUB-E002) RAY_ADDRESS='127.0.0.1:6379' is not an http:// address"
  run submit RAY_ADDRESS=ray://127.0.0.1:10001
  assert_line --index 0 --partial "(SUB-E002) RAY_ADDRESS='ray://127.0.0.1:10001' is not an http:// address (ray:// is Ray Client's port"
  run submit RAY_ADDRESS="$JOBS/api"
  assert_line --index 0 --partial "(SUB-E002) RAY_ADDRESS='$JOBS/api' has a path"
  run submit RAY_ADDRESS="http://127.0.0.1:$closed"
  assert_failure
  assert_equal "${#lines[@]}" 3  # the line, its HINT, make's own
  assert_line --index 0 --partial "submit: (SUB-E003) cannot reach the Ray job server at http://127.0.0.1:$closed (["
  assert_line --index 1 --partial "    HINT: Check the host and port in RAY_ADDRESS"
  # An HTTP server that is not Ray's job server.
  python3 -m http.server "$closed" --bind 127.0.0.1 >/dev/null 2>&1 3>&- &
  local web=$!
  for _ in $(seq 20); do http_get "http://127.0.0.1:$closed/" >/dev/null && break; sleep 0.25; done
  run submit RAY_ADDRESS="http://127.0.0.1:$closed"
  kill "$web"
  assert_line --index 0 "submit: (SUB-E004) http://127.0.0.1:$closed answered HTTP 404 to /api/version: it is not a Ray job server"
  assert_line --index 1 --partial "    HINT: Point RAY_ADDRESS at the head's dashboard"
  assert_dir_not_exist "$(run_dir "$RUN_ID")"
  run make -s -C "$REPO" logs RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS"
  assert_output --partial "(SUB-E007) the cluster at $JOBS has no job $RUN_ID"
}

@test "make submit refuses a bad request before it reaches the cluster" {
  run submit RUN_ID=""
  assert_line --index 0 "submit: (SUB-E012) no RUN_ID given"
  assert_line --index 1 --partial "    HINT: Set RUN_ID=<a new name>"
  run submit RUN_ID=-x
  assert_line --index 0 --partial "(SUB-E012) RUN_ID '-x' must be at most 128 of [A-Za-z0-9._-]"
  run submit PROFILE=no-such-profile
  assert_line --index 0 --partial "submit: (SUB-E010) driver-command: PROFILE=no-such-profile is not a profile of the bundle"
  run submit JOB_ENV="NCCL_IB_DISABLE=0"
  assert_line --index 0 --partial "(SUB-E011) job variable 'NCCL_IB_DISABLE' cannot be set: the bundle's RuntimeEnv pins it"
  run submit JOB_ENV="PROFILE=x"
  assert_line --index 0 --partial "(SUB-E011) job variable 'PROFILE' cannot be set: the Driver command sets it"
  run submit JOB_ENV="KILL_GRACE"
  assert_line --index 0 --partial "(SUB-E011) job variable 'KILL_GRACE' is not NAME=value"
  run submit SAVE_FREQ='1;reboot'
  assert_line --index 0 --partial "(SUB-E011) SAVE_FREQ='1;reboot' holds characters outside"
  run http_get "$JOBS/api/jobs/$RUN_ID"
  assert_failure  # 404: nothing was submitted
}

@test "make submit before make install-tools is refused on PREP_ROOT, naming make install-tools, and sends nothing" {
  local volume=$BATS_TEST_TMPDIR/fresh-volume
  mkdir -p "$volume"
  run make -s -C "$REPO" submit RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS" PROFILE="$PROFILE" \
    STORAGE_ROOT="$volume" PREP_ROOT="$volume" PROFILE=smoke-1x1
  assert_failure
  assert_line --index 0 --partial "submit: (SUB-E130) bundle bundle-"
  assert_line --index 1 --partial "    HINT: Run make install-tools PREP_ROOT=<this box's mount>"
  assert_line --index 2 "submit: $RUN_ID: not submitted, 1 check(s) failed before sending: SUB-E130 — nothing reached the cluster"
  refute_output --partial "re-copy the command for"  # LAUNCH-E046's way out is not this one
  run http_get "$JOBS/api/jobs/$RUN_ID"
  assert_failure  # 404: nothing was submitted
  assert_dir_not_exist "$volume/runs"
}

@test "a job that dies before its run folder ends with the driver's own error line" {
  local empty=$BATS_TEST_TMPDIR/empty-volume
  mkdir -p "$empty"
  run submit PREP_ROOT=/nonexistent STORAGE_ROOT="$empty" SUBMIT_BUNDLE= PROFILE=smoke-1x1
  assert_failure
  assert_line --index 0 --partial "submit: (SUB-W001) PREP_ROOT is not mounted on this box"
  assert_line --regexp "^submit: $RUN_ID: FAILED, exit status 2: driver: \(LAUNCH-E045\) $empty/tools/verl/two-worker-grpo is missing: .* \(this box does not mount the volume \(PREP_ROOT\), the run folder would be $empty/runs/verl/two-worker-grpo/$RUN_ID\)$"
}

@test "a failed preflight's last line names the failed checks and their ids" {
  local one_gpu=$BATS_TEST_TMPDIR/one-gpu.csv
  gpus_csv "$one_gpu" 1  # the node shows one GPU of the profile's two
  run submit JOB_ENV="STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib NVIDIA_SMI_STUB=$one_gpu"
  assert_failure
  assert_line --regexp "^submit: $RUN_ID: FAILED, exit status 1: FAILED phase=preflight .*failed checks preflight: [a-z-]+ \(PRE-E[0-9]{3}"
}

@test "make logs FOLLOW=1 follows a running run: phase, step k of N, s/step, ETA, heartbeat, then its verdict" {
  submit JOB_ENV="STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib STANDIN_STEP_S=4" >/dev/null 2>&1 3>&- &
  local submitter=$!
  for _ in $(seq 120); do
    [[ -f "$(run_dir "$RUN_ID")/training.log" ]] && break
    sleep 0.5
  done
  run make -s -C "$REPO" logs RUN_ID="$RUN_ID" RAY_ADDRESS="$JOBS" PREP_ROOT="$STORAGE" FOLLOW=1
  wait "$submitter"
  assert_success
  assert_line --regexp "^submit: $RUN_ID: phase training · step 0 of 2 · heartbeat [0-9]+ s ago$"
  assert_line --regexp "^submit: $RUN_ID: phase training · step 1 of 2 · 4\.0 s/step · ETA 4 s · heartbeat [0-9]+ s ago$"
  assert_line --regexp "^submit: $RUN_ID: phase [a-z ]+ · step 2 of 2 · 4\.0 s/step · heartbeat [0-9]+ s ago$"
  assert_line "submit: $RUN_ID: SUCCESS — the run's folder is $(run_dir "$RUN_ID") (make report RUN_ID=$RUN_ID)"
  assert_line --partial "run-two-worker-grpo-v1: phase postflight started"  # the job's log, followed
}

@test "the job server's refusal is one line with its reason (SUB-E006)" {
  run "$VENV/bin/python" -c 'import sys; sys.path.insert(0, sys.argv[1])
from prep.jobs_api import JobsClient, JobsError
try:
    JobsClient(sys.argv[2]).submit(sys.argv[3], "true", {}, {"bad": 5})
except JobsError as exc:
    print(exc)' "$REPO" "$JOBS" "$RUN_ID"
  assert_output "(SUB-E006) the job server refused the job (HTTP 400: TypeError: metadata values must be strings, got <class 'int'>)"
}
