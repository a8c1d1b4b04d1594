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
