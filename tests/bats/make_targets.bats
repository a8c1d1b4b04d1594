#!/usr/bin/env bats
# The Makefile front door: every target documented, and each one doing what it says.

load test_helper

setup_file() {
  build_fixture_once
}

setup() {
  sandbox
}

@test "make help lists every target with one line, and every knob" {
  run make -s -C "$REPO" help
  assert_success
  local target
  while read -r target; do
    assert_line --regexp "^  $target +[A-Z].+"
  done < <(sed -n 's/^\([a-z][a-z0-9-]*\):.*/\1/p' "$REPO/Makefile")
  for knob in PREP_ROOT STORAGE_ROOT PROFILE RUN_ID FORCE SMOKE_ROOT; do
    assert_line --regexp "^  $knob +.+"
  done
}

@test "every target has a help line" {
  run bash -c "grep -E '^[a-z][a-z0-9-]*:' '$REPO/Makefile' | grep -v ' ## '"
  assert_failure  # grep finds no target without '## help'
  assert_output ""
}

@test "make runtime-env prints runtime-env.json, the RuntimeEnv to paste" {
  run make -s -C "$REPO" runtime-env
  assert_success
  assert_equal "$output" "$(cat "$REPO/runtime-env.json")"
  run python3 -c 'import json, sys; env = json.load(open(sys.argv[1]))["env_vars"]; assert env["NCCL_IB_DISABLE"] == "1" and env["PYTHONPATH"].startswith("/mnt/verl-reproduction/code/verl/")' "$REPO/runtime-env.json"
  assert_success
}

@test "make runtime-env puts this version's rollout adapter on PYTHONPATH for a ROLLOUT_ENGINE=hf profile" {
  run make -s -C "$REPO" runtime-env PROFILE=smoke-1x1 STORAGE_ROOT=/mnt/volume
  assert_success
  run python3 -c 'import json, sys; print(json.loads(sys.argv[1])["env_vars"]["PYTHONPATH"])' "$output"
  local version
  version=$(python3 "$REPO/prep/bundle.py" version)
  [[ "$version" =~ ^bundle-[0-9a-f]{12}$ ]]
  assert_output "/mnt/volume/code/verl/999af4135fcd9518fa40f62bbea21b5cf568a3e3:/mnt/volume/tools/verl/two-worker-grpo/$version/rollout"
}

@test "make install-tools puts the rollout adapter where make runtime-env points" {
  local root=$BATS_TEST_TMPDIR/volume
  mkdir -p "$root"
  run make -s -C "$REPO" install-tools PREP_ROOT="$root"
  assert_success
  run make -s -C "$REPO" runtime-env PROFILE=smoke-1x1 STORAGE_ROOT="$root"
  assert_success
  local rollout
  rollout=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["env_vars"]["PYTHONPATH"].split(":")[1])' "$output")
  assert_file_exists "$rollout/twgrpo_hf_rollout.py"
}

@test "make rayjob prints a RayJob for RUN_ID with the image knob, and refuses a missing RUN_ID" {
  run make -s -C "$REPO" rayjob RUN_ID=exp-9 RAYJOB_IMAGE=registry.example/verl:0.6
  assert_success
  assert_line "apiVersion: \"ray.io/v1\""
  assert_line "  jobId: \"exp-9\""
  assert_line --partial "image: \"registry.example/verl:0.6\""
  run make -s -C "$REPO" rayjob
  assert_failure
  assert_line --index 0 --partial "rayjob: (SUB-E012) no RUN_ID given"
}

@test "make driver-command pins the current launcher and exports the job's settings, never RUN_ID" {
  run make -s -C "$REPO" driver-command STORAGE_ROOT=/mnt/volume PROFILE=smoke-1x1 RUN_ID=exp-9
  assert_success
  assert_line "export STORAGE_ROOT=/mnt/volume"
  assert_line 'export PROFILE=smoke-1x1; \unset PROFILE_SHA256'
  refute_line --partial "export RUN_ID"
  assert_line --partial "RUN_ID=exp-9 is left out: the Driver command is the same for every run"
  assert_line --partial "# The job's environment variables: RUN_ID=<a new name> (required); SAVE_FREQ=<N>"
  assert_line --partial "RESUME_FROM=<a preempted run's RUN_ID> continues that run"
  local sha
  sha=$(sha256sum "$REPO/$LAUNCHER_REL" | cut -d' ' -f1)
  assert_line "b=\$STORAGE_ROOT/tools/verl/two-worker-grpo v=bundle-${sha:0:12}; launcher=\$b/\$v/run-two-worker-grpo-v1.sh"
  assert_line --partial "\"$sha \"*) echo \"driver: \$launcher verified (bundle \$v)\""
  run make -s -C "$REPO" driver-command 'STORAGE_ROOT=/mnt/my volume'
  assert_failure
  assert_output --partial "holds characters a job form would mangle"
}

@test "make driver-command refuses a profile the bundle does not have, and names the ones it has" {
  run make -s -C "$REPO" driver-command PROFILE=typo
  assert_failure
  assert_output --partial "PROFILE=typo is not a profile of the bundle; set PROFILE= to one of: "
  assert_output --partial "smoke-1x1"
  refute_output --partial "sha256sum"
}

@test "make verify-scripts passes on this checkout: every pin is current" {
  run make -s -C "$REPO" verify-scripts
  assert_success
  assert_output --partial "verify-scripts: PASSED"
}

@test "make verify-scripts names a changed file, and make checksums renews every pin" {
  copy_repo "$BATS_TEST_TMPDIR/repo"
  local repo=$BATS_TEST_TMPDIR/repo before
  before=$(sha256sum "$repo/$LAUNCHER_REL" | cut -d' ' -f1)
  sed -i 's/^TARGET_STEPS=2$/TARGET_STEPS=3/' "$repo/tools/verl/two-worker-grpo/profiles/smoke-1x1.env"
  run make -s -C "$repo" verify-scripts
  assert_failure
  assert_output --partial "profiles/smoke-1x1.env: sha256 expected"
  run make -s -C "$repo" checksums
  assert_success
  run make -s -C "$repo" verify-scripts
  assert_success
  [[ "$(sha256sum "$repo/$LAUNCHER_REL" | cut -d' ' -f1)" != "$before" ]]
}

@test "make install-tools copies the bundle into its version folder and verifies it there" {
  mkdir "$BATS_TEST_TMPDIR/vol"
  local version dest
  version=bundle-$(sha256sum "$REPO/$LAUNCHER_REL" | cut -c1-12)
  dest=$BATS_TEST_TMPDIR/vol/tools/verl/two-worker-grpo/$version
  run make -s -C "$REPO" install-tools PREP_ROOT="$BATS_TEST_TMPDIR/vol"
  assert_success
  assert_output --partial "bundle $dest verified"
  assert_file_executable "$dest/run-two-worker-grpo-v1.sh"
  assert_file_exist "$dest/runtime-env.json"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/vol/tools/verl/two-worker-grpo/LATEST")" "$version"
  run make -s -C "$REPO" install-tools PREP_ROOT="$BATS_TEST_TMPDIR/vol"
  assert_success  # installing the same version again changes nothing
  assert_output --partial "$version is already installed"
}

@test "make install-tools names PREP_ROOT and creates nothing when the volume is not mounted" {
  run make -s -C "$REPO" install-tools PREP_ROOT="$BATS_TEST_TMPDIR/not-mounted"
  assert_failure
  assert_output --partial "PREP_ROOT $BATS_TEST_TMPDIR/not-mounted is not a directory; nothing was created"
  assert_not_exist "$BATS_TEST_TMPDIR/not-mounted"
}

@test "make install-tools never overwrites an installed version, even one changed by hand" {
  local dest
  dest=$BATS_TEST_TMPDIR/vol/tools/verl/two-worker-grpo/bundle-$(sha256sum "$REPO/$LAUNCHER_REL" | cut -c1-12)
  mkdir "$BATS_TEST_TMPDIR/vol"
  make -s -C "$REPO" install-tools PREP_ROOT="$BATS_TEST_TMPDIR/vol" >/dev/null
  echo "# an older version" >>"$dest/profiles/tutorial-2x2-a100.env"
  local before
  before=$(tree_state "$dest")
  for force in "" 1; do
    run make -s -C "$REPO" install-tools PREP_ROOT="$BATS_TEST_TMPDIR/vol" FORCE=$force
    assert_failure
    assert_output --partial "(LAUNCH-E012) profiles/tutorial-2x2-a100.env: sha256 expected"
    assert_output --partial "(LAUNCH-E050) $dest differs from its own SHA256SUMS (see above)"
  assert_output --partial "HINT: Installed versions are never overwritten"
    assert_equal "$(tree_state "$dest")" "$before"
  done
  run find "$BATS_TEST_TMPDIR/vol/tools/verl/two-worker-grpo" -maxdepth 1 -name '.installing-*'
  assert_output ""
}

@test "make verify-inputs passes on a prepared storage root and names a planted fault" {
  use_fixture
  local profile=$BUNDLE/profiles/test-fixture.env
  run make -s -C "$REPO" verify-inputs PREP_ROOT="$STORAGE" PROFILE="$profile"
  assert_success
  assert_output --partial "inputs: PASSED (10 checks)"
  echo "stray" >"$(find "$STORAGE/code/verl" -mindepth 1 -maxdepth 1 -type d)/stray.txt"
  run make -s -C "$REPO" verify-inputs PREP_ROOT="$STORAGE" PROFILE="$profile"
  assert_failure  # make exits 2; its message carries the verifier's 1
  assert_output --partial "stray.txt: (INP-E005) not listed in the verl tree's manifest"
  assert_output --partial "verify-inputs] Error 1"
}

@test "make postflight and make report need a RUN_ID and say so, each naming itself" {
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR"
  assert_failure
  assert_output --partial "make postflight RUN_ID=<run>"
  run make -s -C "$REPO" report PREP_ROOT="$BATS_TEST_TMPDIR"
  assert_failure
  assert_output --partial "make report RUN_ID=<run>"
  refute_output --partial "make postflight"
}

@test "a wrong PREP_ROOT or RUN_ID gets an error that names the knob to set" {
  run make -s -C "$REPO" verify-inputs PREP_ROOT="$BATS_TEST_TMPDIR/not-mounted"
  assert_failure
  assert_output --partial "set PREP_ROOT= to its path on this box"
  mkdir -p "$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo/empty"
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID=nope
  assert_failure
  assert_output --partial "set RUN_ID= to a run under PREP_ROOT= (make runs lists them)"
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID=empty
  assert_failure
  assert_output --partial "holds none of run.json, driver.log, training.log, inputs.json, preflight.json: it is not a run folder"
  refute_output --partial "POST-E"  # no pile of findings against a profile it guessed
  assert_not_exist "$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo/empty/verification.json"
}

@test "make postflight, make report and make runs judge a run from its folder on the prep box" {
  local runs=$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo run_id
  mkdir -p "$runs"
  cp -a "$REPO"/tests/fixtures/real-smoke-run/smoke-* "$runs/"
  run_id=$(basename "$runs"/smoke-*)
  rm "$runs/$run_id/SUCCESS"
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID="$run_id"
  assert_success
  assert_output --partial "postflight: PASSED (17 checks)"
  # this volume holds the run but not its inputs: named, not passed in silence
  assert_output --partial "(POST-W020) not re-hashed, not found on this box: model ($BATS_TEST_TMPDIR/vol/models/"
  assert_file_exist "$runs/$run_id/SUCCESS"
  run make -s -C "$REPO" report PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID="$run_id"
  assert_success
  assert_line "run $run_id: SUCCESS: every check of every phase passed"
  assert_line "  profile   smoke-1x1: 1 node x 1 GPU (any model), 2 steps, rollout hf, lr 1e-06"
  assert_line "  node 0    vm (192.0.2.2, head): 1 x NVIDIA H200, driver 580.159.04, ranks 0"
  assert_line --regexp "^  phases    inputs passed [0-9]+ s · preflight passed [0-9]+ s · training passed [0-9a-z ]+ s · postflight passed"
  assert_line --partial "  note      All rewards are 0, as expected"
  assert_line "report: $runs/$run_id/report.html"
  assert_file_exist "$runs/$run_id/report.html"
  run make -s -C "$REPO" runs PREP_ROOT="$BATS_TEST_TMPDIR/vol"
  assert_success
  local day="${run_id:6:4}-${run_id:10:2}-${run_id:12:2}"  # smoke-YYYYMMDDT...: the day it started
  assert_line --regexp "^$run_id +$day [0-9:]{8} UTC +[0-9a-z ]+ s +smoke-1x1 +SUCCESS$"
}

@test "through make a failed check exits 2 and make's last line names the tool's own code" {
  local runs=$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo run_id
  mkdir -p "$runs"
  cp -a "$REPO"/tests/fixtures/real-smoke-run/smoke-* "$runs/"
  run_id=$(basename "$runs"/smoke-*)
  rm "$runs/$run_id/training.log"
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR/vol" RUN_ID="$run_id"
  assert_failure 2
  assert_line --regexp "^make(\[[0-9]+\])?: \*\*\* \[Makefile:[0-9]+: postflight\] Error 1$"
  run make -s -C "$REPO" postflight PREP_ROOT="$BATS_TEST_TMPDIR/vol"
  assert_failure 2
  assert_line --regexp "^make(\[[0-9]+\])?: \*\*\* \[Makefile:[0-9]+: postflight\] Error 2$"
}

@test "make report and make runs into a closed pipe end quietly (make report | head)" {
  local runs=$BATS_TEST_TMPDIR/vol/runs/verl/two-worker-grpo
  mkdir -p "$runs"
  cp -a "$REPO"/tests/fixtures/real-smoke-run/smoke-* "$runs/"
  run bash -c "make -s -C '$REPO' report PREP_ROOT='$BATS_TEST_TMPDIR/vol' RUN_ID=$(basename "$runs"/smoke-*) | (exec 0<&-; sleep 0.5)"
  assert_success
  refute_output --partial "BrokenPipeError"
  refute_output --partial "Traceback"
  run bash -c "make -s -C '$REPO' runs PREP_ROOT='$BATS_TEST_TMPDIR/vol' | (exec 0<&-; sleep 0.5)"
  assert_success
  refute_output --partial "Traceback"
}

@test "make smoke on a machine without a GPU stops at once with exit 2 and writes nothing" {
  PATH=$VENV/bin:/usr/bin:/bin run make -s -C "$REPO" smoke SMOKE_ROOT="$BATS_TEST_TMPDIR/smoke" \
    SMOKE_ENV="$BATS_TEST_TMPDIR/env"
  assert_failure
  assert_output --partial "smoke-env: nvidia-smi: (ENV-E001) nvidia-smi is not on PATH"
  assert_output --partial "HINT: Run make smoke on a machine with one NVIDIA GPU"
  assert_output --regexp "Error 2"
  assert_not_exist "$BATS_TEST_TMPDIR/smoke"
  assert_not_exist "$BATS_TEST_TMPDIR/env"
}

@test "the pasted Driver command over an installed volume runs the hash and input checks, then preflight" {
  local wheel=$REPO/.cache/wheels/verl-0.6.0-py3-none-any.whl
  [[ -f "$wheel" ]] || skip "needs $wheel (tests/run.sh downloads it)"
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$STORAGE" --profile smoke-1x1 --verl-wheel "$wheel" >/dev/null
  make -s -C "$REPO" install-tools PREP_ROOT="$STORAGE" >/dev/null
  [[ $(id -u) == 0 ]] || skip "needs root: a private /tmp/ray and PID namespace, so that no Ray cluster of this machine is found"
  unset RAY_ADDRESS
  local command
  command=$(make -s -C "$REPO" driver-command STORAGE_ROOT="$STORAGE" PROFILE=smoke-1x1)
  export RUN_ID=pasted  # as the job form's environment variables set it
  # No cluster here: with RAY_ADDRESS unset, Ray looks in /tmp/ray and scans processes for one,
  # so both are made private; a Ray cluster someone else runs on this machine stays out of sight.
  mkdir -p /tmp/ray
  run unshare --mount --pid --fork --mount-proc \
    bash -c 'mount -t tmpfs tmpfs /tmp/ray && exec bash -c "$1"' _ "$command"
  assert_failure 1
  assert_output --regexp "driver: $STORAGE/tools/verl/two-worker-grpo/bundle-[0-9a-f]{12}/run-two-worker-grpo-v1.sh verified"
  assert_output --partial "inputs: PASSED (10 checks)"
  assert_output --partial "(PRE-E011) ray.init(address='auto') failed"
  run cat "$STORAGE/runs/verl/two-worker-grpo/pasted/FAILED"
  assert_line "phase=preflight"
}
