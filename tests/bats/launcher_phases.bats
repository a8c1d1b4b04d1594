#!/usr/bin/env bats
# The launcher's phases against a real single-node Ray head (stub nvidia-smi, 2 GPUs) and a
# stand-in verl: the FAILED marker per phase and per signal, the training environment and the
# recorded command. Nothing written earlier is ever removed.

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
  export STORAGE_ROOT=$STORAGE RUN_ID=run-$BATS_TEST_NUMBER PROBE_TIMEOUT=30
  export STANDIN_DUMP=$BATS_TEST_TMPDIR/standin.json
  SESSION_FILE=$BATS_TEST_TMPDIR/launcher.session
  gpus_csv "$GPUS_CSV" 2
  rm -f "$GPUS_CSV.hang"
}

teardown() {
  rm -f "$GPUS_CSV.hang"
  stop_launcher_session
}

# The Driver command in a session of its own, so that teardown can end everything it started
# (phases run as their own process groups) whatever happened. SIGINT is reset to its default:
# `make test` started in the background has it ignored, and bash cannot trap an ignored signal.
start_launcher() {  # start_launcher: the launcher's pid (= its session id) goes to $SESSION_FILE
  setsid env --default-signal=INT bash -c 'echo "$$" >"$1" && exec bash -c "$2"' _ \
    "$SESSION_FILE" "$(driver_command "$RUN_ID")"
}

stop_launcher_session() {  # TERM, then KILL, every process left in the launcher's session
  [[ -s "$SESSION_FILE" ]] || return 0
  local sid
  sid=$(<"$SESSION_FILE")
  pkill -TERM -s "$sid" 2>/dev/null || return 0
  for _ in $(seq 20); do
    pgrep -s "$sid" >/dev/null || return 0
    sleep 0.5
  done
  pkill -KILL -s "$sid" 2>/dev/null || true
}

launch() {
  run start_launcher 3>&-
}

failed_field() {  # failed_field KEY: a value from the run's FAILED marker
  sed -n "s/^$1=//p" "$(run_dir "$RUN_ID")/FAILED"
}

# Start the Driver command in the background, wait for FILE, send SIGNAL, wait for the end.
launch_and_signal() {  # launch_and_signal FILE SIGNAL
  start_launcher >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local job=$! pid=""
  for _ in $(seq 120); do
    [[ -e "$1" && -s "$SESSION_FILE" ]] && break
    sleep 0.5
  done
  [[ -e "$1" ]] || { cat "$BATS_TEST_TMPDIR/out"; return 1; }
  pid=$(<"$SESSION_FILE")
  kill -"$2" "$pid"
  for _ in $(seq 60); do  # the launcher must end promptly, not after the training
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "the launcher ignored SIG$2" >&2
    return 1
  fi
  status=0
  wait "$job" || status=$?
  output=$(cat "$BATS_TEST_TMPDIR/out")
}

@test "a tampered model file leaves FAILED with phase=inputs and keeps what was written" {
  local weights
  weights=$(find "$STORAGE/models" -name model.safetensors)
  printf 'x' >>"$weights"
  launch
  assert_failure 1
  assert_output --partial "(INP-E008)"
  assert_equal "$(failed_field phase)" inputs
  assert_equal "$(failed_field exit_status)" 1
  assert_equal "$(failed_field signal)" none
  assert_equal "$(failed_field cause)" "failed checks inputs: model-files (INP-E008); inputs: model-weights (INP-E014)"
  local run
  run=$(run_dir "$RUN_ID")
  assert_file_exist "$run/driver.log"
  assert_file_exist "$run/inputs.json"
  assert_file_exist "$run/run.json"
  assert_file_not_exist "$run/preflight.json"
  assert_file_not_exist "$run/SUCCESS"
}

@test "a wrong GPU model leaves FAILED with phase=preflight" {
  gpus_csv "$GPUS_CSV" 2 "NVIDIA H100 80GB HBM3"
  launch
  assert_failure 1
  assert_output --partial "(PRE-E021) GPU model: expected NVIDIA A100-SXM4-80GB, actual NVIDIA H100 80GB HBM3"
  assert_equal "$(failed_field phase)" preflight
  assert_file_exist "$(run_dir "$RUN_ID")/preflight.json"
  assert_file_not_exist "$(run_dir "$RUN_ID")/training.log"
}

@test "a failing training command leaves FAILED with phase=training and its exit status" {
  STANDIN_MODE=fail launch
  assert_failure 3
  assert_equal "$(failed_field phase)" training
  assert_equal "$(failed_field exit_status)" 3
  run cat "$(run_dir "$RUN_ID")/training.log"
  assert_output --partial "standin: training failed on purpose"
}

@test "the collective probe runs over Gloo in preflight and preflight.json records its ranks" {
  STANDIN_MODE=fail COLLECTIVE_PROBE=gloo COLLECTIVE_TIMEOUT=40 launch  # only preflight matters here
  assert_failure 3
  assert_output --regexp "preflight: collective \.+ ok"  # the dots pad to the longest check name
  assert_equal "$(failed_field phase)" training
  run python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["collective"]; print(c["backend"], c["world"], [r["stage"] for r in c["ranks"]])' \
    "$(run_dir "$RUN_ID")/preflight.json"
  assert_output "gloo 1 ['done']"
}

@test "a nonsense COLLECTIVE_PROBE or watchdog setting is refused before anything is written" {
  COLLECTIVE_PROBE=yes STALL_FIRST_STEP=soon launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E053) COLLECTIVE_PROBE 'yes' must be nccl"
  assert_output --partial "(LAUNCH-E052) STALL_FIRST_STEP 'soon' must be a number of seconds"
  assert_file_not_exist "$(run_dir "$RUN_ID")"
}

@test "a training with no step line in time is stopped by the watchdog: FAILED names the stall" {
  STANDIN_MODE=sleep STALL_FIRST_STEP=3 launch
  assert_failure
  assert_output --partial "watch-training: training stalled after step 0: no step line for"
  assert_equal "$(failed_field phase)" training
  run failed_field cause
  assert_output --partial "(POST-E129) the training watchdog stopped a stalled training"
  assert_file_exist "$(run_dir "$RUN_ID")/stall.json"
  assert_file_exist "$(run_dir "$RUN_ID")/stall-evidence.json"
  run pgrep -f "experiment_name=$RUN_ID "
  assert_failure
}

@test "the training command sees the offline and NCCL environment and the pinned verl first" {
  STANDIN_MODE="env" launch
  local run dump
  run=$(run_dir "$RUN_ID")
  dump=$STANDIN_DUMP
  python3 - "$dump" "$STORAGE" "$run" <<'PY'
import json, os, sys
dump, storage, run = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
env = dump["env"]
want = {"NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO", "GLOO_LOG_LEVEL": "INFO",
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled", "TENSORBOARD_DIR": f"{run}/tensorboard"}
bad = {k: (v, env.get(k)) for k, v in want.items() if env.get(k) != v}
assert not bad, bad
assert env["PYTHONPATH"].split(":")[0].startswith(f"{storage}/code/verl/"), env["PYTHONPATH"]
argv = dump["argv"]
for item in ("trainer.nnodes=1", "trainer.n_gpus_per_node=2", "+ray_kwargs.ray_init.address=auto",
             f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR='{run}/tensorboard'",
             "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG='INFO'",
             "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE='1'",
             f"trainer.default_local_dir={run}/checkpoints", "actor_rollout_ref.rollout.name=hf",
             "+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_DUMP_ON_TIMEOUT='1'",
             f"+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_DEBUG_INFO_PIPE_FILE='/tmp/twgrpo-nccl-{os.path.basename(run)}-rank_'"):
    assert item in argv, item
PY
  # resolved-command.txt is the exact argv, shell-quoted
  run bash -c "eval \"args=(\$(cat '$run/resolved-command.txt'))\"; printf '%s\n' \"\${args[@]:3}\""
  assert_success
  assert_equal "$output" "$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["argv"]))' "$dump")"
}

@test "SIGTERM during training leaves FAILED with signal=TERM and stops the training process" {
  export STANDIN_MODE=sleep
  launch_and_signal "$STANDIN_DUMP" TERM
  assert_equal "$status" 143
  assert_equal "$(failed_field phase)" training
  assert_equal "$(failed_field signal)" TERM
  assert_equal "$(failed_field exit_status)" 143
  run pgrep -f "experiment_name=$RUN_ID "
  assert_failure
  assert_file_exist "$(run_dir "$RUN_ID")/preflight.json"
}

# The launcher's whole process group gets the signal (tee included), as coreutils timeout, a
# container stop or `ray job stop` send it, and a second TERM follows at once.
signal_group_twice() {  # signal_group_twice TARGET_PID: TERM to its process group, twice
  kill -TERM -- "-$1"
  kill -TERM -- "-$1" 2>/dev/null || true
}

@test "TERM twice to the launcher's whole process group: tee survives, FAILED says TERM, exit 143" {
  export STANDIN_MODE=sleep
  start_launcher >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local job=$! pid
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" && -s "$SESSION_FILE" ]] && break
    sleep 0.5
  done
  pid=$(<"$SESSION_FILE")
  signal_group_twice "$pid"
  local ended=0
  wait "$job" || ended=$?
  assert_equal "$ended" 143
  assert_equal "$(failed_field phase)" training
  assert_equal "$(failed_field signal)" TERM
  run grep -c "FAILED in phase training (exit status 143, signal TERM)" "$(run_dir "$RUN_ID")/driver.log"
  assert_output 1  # tee was alive to write the last line
  run pgrep -f "experiment_name=$RUN_ID "
  assert_failure
}

@test "TERM through coreutils timeout: FAILED records TERM, not unknown" {
  export STANDIN_MODE=sleep
  setsid timeout 600 bash -c "$(driver_command "$RUN_ID")" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local job=$!
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" ]] && break
    sleep 0.5
  done
  kill -TERM "$job"  # timeout passes it on to the launcher and to its whole process group
  wait "$job" || true
  assert_equal "$(failed_field signal)" TERM
  assert_equal "$(failed_field phase)" training
  run grep -c "ended_without_verdict" "$(run_dir "$RUN_ID")/FAILED"
  assert_output 0
}

@test "a tee that died cannot take the launcher down: a later TERM still writes FAILED with TERM" {
  export STANDIN_MODE=sleep
  start_launcher >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local job=$! pid tee
  for _ in $(seq 120); do
    [[ -e "$STANDIN_DUMP" && -s "$SESSION_FILE" ]] && break
    sleep 0.5
  done
  pid=$(<"$SESSION_FILE")
  tee=$(pgrep -s "$pid" -f "^tee -a $(run_dir "$RUN_ID")/driver.log")
  kill -KILL "$tee"
  sleep 1
  kill -TERM "$pid"
  local ended=0
  wait "$job" || ended=$?
  assert_equal "$ended" 143  # not 141: the launcher's writes to the dead pipe do not kill it
  assert_equal "$(failed_field signal)" TERM
  assert_equal "$(failed_field phase)" training
}

@test "SIGINT during training leaves FAILED with signal=INT" {
  export STANDIN_MODE=sleep
  launch_and_signal "$STANDIN_DUMP" INT
  assert_equal "$status" 130
  assert_equal "$(failed_field phase)" training
  assert_equal "$(failed_field signal)" INT
}

@test "SIGTERM during preflight leaves FAILED with phase=preflight and signal=TERM" {
  echo 120 >"$GPUS_CSV.hang"  # nvidia-smi hangs inside the probe
  launch_and_signal "$(run_dir "$RUN_ID")/shared-storage-sentinel" TERM
  assert_equal "$status" 143
  assert_equal "$(failed_field phase)" preflight
  assert_equal "$(failed_field signal)" TERM
  assert_file_exist "$(run_dir "$RUN_ID")/driver.log"
}

@test "an empty SUCCESS that postflight did not write is not taken for a verdict" {
  STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib STANDIN_FAULT=empty-success launch
  assert_failure 1
  assert_output --partial "postflight: PASSED"
  assert_output --partial "(LAUNCH-E013) postflight passed but wrote no SUCCESS"
  assert_file_empty "$(run_dir "$RUN_ID")/SUCCESS"  # kept as it was, never taken for a verdict
}

@test "a run that trains but leaves no artifacts fails in phase=postflight" {
  STANDIN_MODE="env" launch
  assert_failure 1
  assert_equal "$(failed_field phase)" postflight
  assert_file_exist "$(run_dir "$RUN_ID")/verification.json"
  assert_file_not_exist "$(run_dir "$RUN_ID")/SUCCESS"
}

verl_checkout() { find "$STORAGE/code/verl" -mindepth 1 -maxdepth 1 -type d; }

@test "a verl edit hidden from git with skip-worktree stops the run in phase=inputs" {
  local checkout
  checkout=$(verl_checkout)
  echo "import os  # edited" >>"$checkout/verl/trainer/main_ppo.py"
  git -C "$checkout" update-index --skip-worktree verl/trainer/main_ppo.py
  run git -C "$checkout" status --porcelain
  refute_output --partial main_ppo.py  # git calls the tree clean
  launch
  assert_failure 1
  assert_output --partial "(INP-E005)"
  assert_output --partial "verl/trainer/main_ppo.py"
  assert_equal "$(failed_field phase)" inputs
  assert_file_not_exist "$(run_dir "$RUN_ID")/SUCCESS"
}

@test "a verl edit behind core.worktree stops the run in phase=inputs" {
  local checkout
  checkout=$(verl_checkout)
  cp -a "$checkout" "$BATS_TEST_TMPDIR/pristine"
  echo "raise SystemExit('edited')" >"$checkout/verl/__init__.py"
  git -C "$checkout" config core.worktree "$BATS_TEST_TMPDIR/pristine"
  launch
  assert_failure 1
  assert_output --partial "(INP-E005)"
  assert_equal "$(failed_field phase)" inputs
}

@test "a checkout's core.fsmonitor never runs, in the inputs phase or any node's probe" {
  local checkout marker=$BATS_TEST_TMPDIR/fsmonitor-ran
  checkout=$(verl_checkout)
  printf '#!/bin/sh\ntouch %s\n' "$marker" >"$BATS_TEST_TMPDIR/fsmonitor.sh"
  chmod +x "$BATS_TEST_TMPDIR/fsmonitor.sh"
  git -C "$checkout" config core.fsmonitor "$BATS_TEST_TMPDIR/fsmonitor.sh"
  STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib launch
  assert_success
  assert_output --partial "inputs: verl-checkout ....... ok"
  assert_file_exist "$(run_dir "$RUN_ID")/SUCCESS"
  assert_file_not_exist "$marker"
}

@test "the launcher's postflight judges the run by the profile run.json recorded, the job's SAVE_FREQ in it" {
  SAVE_FREQ=1 STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib launch
  assert_success
  assert_file_exist "$(run_dir "$RUN_ID")/SUCCESS"
  python3 - "$(run_dir "$RUN_ID")" <<'PY'
import json, sys
run = sys.argv[1]
recorded = json.load(open(f"{run}/run.json"))["profile"]
judged = json.load(open(f"{run}/verification.json"))["profile"]
assert recorded["values"]["SAVE_FREQ"] == "1", recorded["values"]["SAVE_FREQ"]
assert judged["values"] == recorded["values"], (judged["values"], recorded["values"])
assert judged["path"].startswith(f"{run}/run.json"), judged["path"]  # not the profile file
PY
}
