#!/usr/bin/env bats
# make compare and make runs FORMAT=json through the Makefile, on copies of the real run.

load test_helper

setup() {
  runs=$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo
  mkdir -p "$runs"
  cp -a "$REPO"/tests/fixtures/real-smoke-run/smoke-* "$runs/"
  run_id=$(basename "$runs"/smoke-*)
  cp -a "$runs/$run_id" "$runs/again"
}

@test "make compare of a run against its copy says the same, exits 0 and writes beside the runs" {
  find "$runs" -printf '%p %s %T@\n' | sort > "$BATS_TEST_TMPDIR/before"
  run make -s -C "$REPO" compare PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID=again AGAINST="$run_id"
  assert_success
  assert_line "compare again against $run_id: same inputs and recipe; metrics within tolerance"
  assert_line "compare: $BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo-compare/again-vs-$run_id.html"
  assert_file_exist "$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo-compare/again-vs-$run_id.html"
  find "$runs" -printf '%p %s %T@\n' | sort > "$BATS_TEST_TMPDIR/after"
  run diff "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after"
  assert_success
}

@test "make compare FORMAT=json and make runs FORMAT=json print JSON that parses" {
  run bash -c "make -s -C '$REPO' compare PREP_ROOT='$BATS_TEST_TMPDIR/vol' RUN_ID=again AGAINST='$run_id' FORMAT=json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d[\"same\"], d[\"runs\"])'"
  assert_success
  assert_output "True ['again', '$run_id']"
  run bash -c "make -s -C '$REPO' runs PREP_ROOT='$BATS_TEST_TMPDIR/vol' FORMAT=json | python3 -c 'import json, sys; print(sorted(r[\"id\"] for r in json.load(sys.stdin)))'"
  assert_success
  assert_output "['again', '$run_id']"
}

@test "make compare with a TOLERANCE that is not a number exits 2 and names the knob" {
  run make -s -C "$REPO" compare PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID=again AGAINST="$run_id" TOLERANCE=lots
  assert_failure 2
  assert_output --partial "(CMP-E003)"
  assert_output --partial "Set TOLERANCE to a number"
  assert_not_exist "$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo-compare"
}

@test "make compare without AGAINST says how to name the runs" {
  run make -s -C "$REPO" compare PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID=again
  assert_failure 2
  assert_output --partial "make compare RUN_ID=<run> AGAINST=<reference>"
}
