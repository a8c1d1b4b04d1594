#!/usr/bin/env bats
# Every refusal of the launcher before it claims a run folder: exit 2 and nothing written.

load test_helper

setup_file() {
  build_fixture_once
}

setup() {
  sandbox
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=exp-001
  BEFORE=$(tree_state "$STORAGE")
}

launch() {
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh" "$@"
}

assert_nothing_written() {
  assert_equal "$(tree_state "$STORAGE")" "$BEFORE"
  assert_not_exist "$STORAGE/runs"
}

@test "launcher --help prints its summary and usage from the header" {
  launch --help
  assert_success
  assert_line --partial "Summary: Run one verified verl GRPO job"
  assert_line --partial "Usage: STORAGE_ROOT=/mnt/verl-reproduction RUN_ID=exp-001"
  assert_line --partial "Exit codes: 0 SUCCESS"
  refute_output --partial "POSIXLY_CORRECT=y"  # the header alone: no line of code after it
  refute_output --partial "main \"\$@\""
}

@test "launcher refuses an unknown argument" {
  launch --bogus
  assert_failure 2
  assert_output --partial "(LAUNCH-E000) unknown argument '--bogus'"
  assert_nothing_written
}

@test "launcher refuses when STORAGE_ROOT is not set" {
  unset STORAGE_ROOT
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E002) STORAGE_ROOT is not set"
  assert_nothing_written
}

@test "launcher refuses when RUN_ID is not set" {
  unset RUN_ID
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E003) RUN_ID is not set"
  assert_nothing_written
}

@test "launcher refuses a RUN_ID that is not a plain name" {
  local bad
  for bad in ../escape -leading-dash "has space" "semi;colon" .hidden; do
    RUN_ID=$bad launch
    assert_failure 2
    assert_output --partial "(LAUNCH-E004) RUN_ID '$bad' must match"
  done
  assert_nothing_written
}

@test "launcher refuses a STORAGE_ROOT that is not a directory" {
  STORAGE_ROOT=$BATS_TEST_TMPDIR/absent launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E005) STORAGE_ROOT $BATS_TEST_TMPDIR/absent is not a directory"
  assert_not_exist "$BATS_TEST_TMPDIR/absent"
}

@test "launcher refuses a read-only STORAGE_ROOT" {
  if [[ $(id -u) == 0 ]]; then  # root writes anywhere: make the mount itself read-only
    run unshare --mount bash -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec bash "$2"' \
      _ "$STORAGE" "$BUNDLE/run-two-worker-grpo-v1.sh"
  else
    chmod a-w "$STORAGE"
    launch
    chmod u+w "$STORAGE"
  fi
  assert_failure 2
  assert_output --partial "(LAUNCH-E006) STORAGE_ROOT $STORAGE is not writable"
  assert_nothing_written
}

@test "launcher refuses a PROFILE given as a path, which the hash chain does not cover" {
  PROFILE=$BUNDLE/profiles/test-fixture.env launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E009) PROFILE '$BUNDLE/profiles/test-fixture.env' must name a profile in the bundle"
  assert_nothing_written
}

@test "launcher refuses a PROFILE the bundle does not have" {
  PROFILE=no-such-profile launch
  assert_failure 2
  assert_output --partial "cannot read profile"
  assert_output --partial "(LAUNCH-E009) profile 'no-such-profile' cannot be used"
  assert_nothing_written
}

@test "launcher refuses when an input folder is missing" {
  local model
  model=$(find "$STORAGE/models" -name model.safetensors -printf '%h')
  mv "$model" "$BATS_TEST_TMPDIR/model-aside"
  BEFORE=$(tree_state "$STORAGE")
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E007) input folder $model is missing"
  assert_nothing_written
}

@test "launcher refuses a RUN_ID whose run folder exists, and leaves that folder alone" {
  local run
  run=$(run_dir exp-001)
  mkdir -p "$run"
  echo "an earlier run" >"$run/driver.log"
  BEFORE=$(tree_state "$STORAGE")
  launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E008) run folder $run already exists"
  assert_equal "$(tree_state "$STORAGE")" "$BEFORE"
  assert_file_not_exist "$run/FAILED"
}

# A "preempted" run planted at the RUN_ID (same profile and bundle, a checkpoint, FAILED by TERM)
# made a fresh launch its attempt 2, resuming the planted checkpoint; it was not made by this job.
plant_preempted() {  # plant_preempted RUN_ID JOB_IDENTITY_JSON
  local run kind
  run=$(run_dir "$1")
  mkdir -p "$run/checkpoints/global_step_1/actor"  # complete for a world of 1 (run/preemption.py)
  echo 1 >"$run/checkpoints/latest_checkpointed_iteration.txt"
  for kind in data.pt actor/fsdp_config.json actor/{model,optim,extra_state}_world_size_1_rank_0.pt; do
    echo planted >"$run/checkpoints/global_step_1/$kind"
  done
  python3 -c 'import hashlib, json, sys
values = {"NODES": "1", "GPUS_PER_NODE": "1", "TARGET_STEPS": "3"}
json.dump({"run_id": sys.argv[2], "started_at": "2026-12-01T00:00:00Z",
           "profile": {"name": sys.argv[3], "values": values}, "job_identity": json.loads(sys.argv[5]),
           "bundle_sums_sha256": hashlib.sha256(open(sys.argv[4], "rb").read()).hexdigest()},
          open(sys.argv[1] + "/run.json", "w"))' "$run" "$1" "$PROFILE" "$BUNDLE/SHA256SUMS" "$2"
  printf 'time=2026-12-01T00:01:00Z\nphase=training\nexit_status=143\nsignal=TERM\n' >"$run/FAILED"
}

@test "a fresh launch refuses a preempted run folder planted at its RUN_ID, of no job or another job" {
  plant_preempted exp-001 null
  BEFORE=$(tree_state "$STORAGE")
  RAY_JOB_SUBMISSION_ID=exp-001 launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E094) run folder $(run_dir exp-001) was not made by this job: its job identity is none, this launch's is ray-job exp-001"
  assert_output --partial "to continue it, RESUME_FROM=exp-001"
  assert_output --partial "HINT: A launch continues only attempts whose run.json records its own job identity"
  assert_not_exist "$(run_dir exp-001.2)"
  assert_equal "$(tree_state "$STORAGE")" "$BEFORE"
  plant_preempted exp-001 '{"kind": "slurm", "id": "77"}'
  SLURM_JOB_ID=78 launch
  assert_failure 2
  assert_output --partial "its job identity is slurm 77, this launch's is slurm 78"
  assert_not_exist "$(run_dir exp-001.2)"
}

@test "RESUME_FROM=auto refuses a preempted <RUN_ID>.7 planted beside a new RUN_ID" {
  plant_preempted exp-001.7 '{"kind": "ray-job", "id": "someone-else"}'
  BEFORE=$(tree_state "$STORAGE")
  RESUME_FROM=auto RAY_JOB_SUBMISSION_ID=exp-001 launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E094) run folder $(run_dir exp-001.7) was not made by this job"
  assert_not_exist "$(run_dir exp-001)"
  assert_equal "$(tree_state "$STORAGE")" "$BEFORE"
}

@test "launcher refuses to start when a required command is missing" {
  mkdir "$BATS_TEST_TMPDIR/bin"
  local cmd
  for cmd in bash python3 tee mkdir date dirname sed; do
    ln -s "$(command -v "$cmd")" "$BATS_TEST_TMPDIR/bin/$cmd"
  done
  PATH=$BATS_TEST_TMPDIR/bin launch
  assert_failure 2
  assert_output --partial "(LAUNCH-E001) 'ln' is not on PATH"
  assert_nothing_written
}

@test "launcher checks every job variable before it writes anything, each with its id" {
  local pair
  for pair in "PROBE_TIMEOUT=abc LAUNCH-E040" "PROBE_TIMEOUT=nan LAUNCH-E040" "PROBE_TIMEOUT=inf LAUNCH-E040" \
      "PROBE_TIMEOUT=-1 LAUNCH-E040" "PROBE_TIMEOUT=0 LAUNCH-E040" "TMPDIR=/nonexistent LAUNCH-E041" \
      "STORAGE_ROOT=relative/vol LAUNCH-E042" "STORAGE_ROOT=-dash LAUNCH-E042" \
      "STORAGE_ROOT=$STORAGE,x LAUNCH-E043" "TRACE=yes LAUNCH-E049"; do
    run env "${pair% *}" bash "$BUNDLE/run-two-worker-grpo-v1.sh"
    assert_failure 2
    assert_output --partial "(${pair##* })"
    refute_output --partial "Traceback"
    assert_nothing_written
  done
}

@test "a profile value that is not a number stops the launcher before it writes anything" {
  sed -i 's/^LEARNING_RATE=.*/LEARNING_RATE=-e+./' "$BUNDLE/profiles/test-fixture.env"
  "$VENV/bin/python" -c 'import sys; sys.path.insert(0, sys.argv[1]); from dev.sandbox import repin; from pathlib import Path; repin(Path(sys.argv[2]))' "$REPO" "$BUNDLE"
  BEFORE=$(tree_state "$STORAGE")
  launch
  assert_failure 2
  assert_output --partial "LEARNING_RATE='-e+.' is not a valid actor learning rate"
  assert_output --partial "(LAUNCH-E009) profile 'test-fixture' cannot be used"
  assert_nothing_written
}
