#!/usr/bin/env bats
# make demo: the three moments on a scratch volume without a GPU, each step saying what it proves.

load test_helper

setup() {
  sandbox
  WHEEL=$REPO/.cache/wheels/verl-0.6.0-py3-none-any.whl
  [[ -f "$WHEEL" ]] || skip "needs $WHEEL (tests/run.sh downloads it)"
  export SMOKE_VERL_WHEEL=$WHEEL
}

@test "make demo walks every moment on a scratch volume and leaves a report to open" {
  local root=$BATS_TEST_TMPDIR/demo run_id
  run_id=$(basename "$REPO"/tests/fixtures/real-smoke-run/smoke-*)
  run make -s -C "$REPO" demo DEMO_ROOT="$root"
  assert_success
  assert_output --partial "inputs: PASSED (10 checks)"
  assert_output --partial "install: "
  assert_output --partial 'exec /usr/bin/env bash --noprofile --norc -p "$launcher"'
  assert_output --partial "postflight: PASSED (17 checks)"
  assert_output --partial "(POST-E022)"
  assert_line "run $run_id: SUCCESS: every check of every phase passed"
  assert_line --regexp "^demo-damaged-checkpoint +.* FAILED$"
  assert_output --partial "✓ every run on the volume with its latest verdict"
  refute_output --partial "Traceback"
  assert_file_exist "$root/volume/runs/verl/two-worker-grpo/$run_id/report.html"
  assert_exist "$root"/volume/tools/verl/two-worker-grpo/bundle-*/run-two-worker-grpo-v1.sh
}

@test "make demo starts afresh over its own earlier volume" {
  local root=$BATS_TEST_TMPDIR/demo
  make -s -C "$REPO" demo DEMO_ROOT="$root" >/dev/null
  echo "left over" >"$root/volume/leftover"
  run make -s -C "$REPO" demo DEMO_ROOT="$root"
  assert_success
  assert_not_exist "$root/volume/leftover"
}

@test "make demo never removes a folder it did not make" {
  local root=$BATS_TEST_TMPDIR/precious
  mkdir -p "$root"
  echo "keep me" >"$root/notes.txt"
  run make -s -C "$REPO" demo DEMO_ROOT="$root"
  assert_failure
  assert_output --partial "exists and was not made by the demo; nothing was removed — set DEMO_ROOT="
  assert_file_exist "$root/notes.txt"
}
