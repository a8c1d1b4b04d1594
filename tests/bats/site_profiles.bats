#!/usr/bin/env bats
# A site's profile lives outside the bundle: installed on the volume under its own sha256 and
# pinned by the Driver command, it runs to SUCCESS against a real Ray head (stand-in verl),
# run.json records its hash and content, and a changed, missing or unpinned one is refused
# before anything is written. The bundle's SHA256SUMS and launcher never change.

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
  export STORAGE_ROOT=$STORAGE RUN_ID=site-$BATS_TEST_NUMBER PROBE_TIMEOUT=30
  export STANDIN_MODE=artifacts STANDIN_LIB=$REPO/tests/lib
  SITE=$BATS_TEST_TMPDIR/site
  mkdir -p "$SITE"
  sed 's/^PROFILE_NAME=.*/PROFILE_NAME=ours/' "$BUNDLE/profiles/test-fixture.env" >"$SITE/ours.env"
  export PROFILE=$SITE/ours.env  # as make passes SITE/PROFILE.env to the tools
}

install_site() {  # make install-tools SITE=... does this beside the bundle version
  "$VENV/bin/python" -c 'import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tools/verl/two-worker-grpo"]
from pathlib import Path
from prep import site
raise SystemExit(site.install(Path(sys.argv[2]), Path(sys.argv[3])))' "$REPO" "$STORAGE" "$SITE"
}

installed_file() {
  echo "$STORAGE/tools/verl/two-worker-grpo-profiles/ours/$(sha256sum "$SITE/ours.env" | cut -d' ' -f1).env"
}

@test "a site profile installed under its sha256 and pinned by the Driver command runs to SUCCESS" {
  local sums
  sums=$(sha256sum "$BUNDLE/SHA256SUMS" "$BUNDLE/run-two-worker-grpo-v1.sh")
  run install_site
  assert_success
  assert_output --partial "site profile ours (sha256 "
  assert_file_exist "$(installed_file)"
  [[ ! -w "$(installed_file)" || $(id -u) == 0 ]]
  assert_equal "$(stat -c %a "$(installed_file)")" 444
  run install_site  # again: the same bytes are already there, nothing is rewritten
  assert_success
  assert_output --partial "is already installed"
  run driver_command "$RUN_ID"
  assert_output --partial "export PROFILE=ours PROFILE_SHA256=$(sha256sum "$SITE/ours.env" | cut -d' ' -f1)"
  run bash -c "$(driver_command "$RUN_ID")"
  assert_success
  assert_output --partial "SUCCESS $RUN_ID"
  local record=$STORAGE/runs/verl/two-worker-grpo/$RUN_ID/run.json
  assert_equal "$(jq -r '.profile.name, .profile.path, .profile.sha256' "$record")" \
    "$(printf 'ours\n%s\n%s' "$(installed_file)" "$(sha256sum "$SITE/ours.env" | cut -d' ' -f1)")"
  assert_equal "$(jq -r '.profile.values.PROFILE_NAME' "$record")" ours
  assert_equal "$(sha256sum "$BUNDLE/SHA256SUMS" "$BUNDLE/run-two-worker-grpo-v1.sh")" "$sums"
  # re-judged later from the run's own record, the site folder gone
  rm -r "$SITE"
  run python3 -I -B "$BUNDLE/verify-two-worker-grpo-v1.py" postflight --storage-root "$STORAGE" \
    --run-id "$RUN_ID"
  assert_success
}

@test "an edited site profile is a new file beside the old one; the old pin still runs the old bytes" {
  install_site
  local old new
  old=$(installed_file)
  echo "TEST_FREQ=1" >>"$SITE/ours.env"
  run install_site
  assert_success
  new=$(installed_file)
  [[ "$old" != "$new" ]]
  assert_file_exist "$old"
  assert_file_exist "$new"
  run grep -c "^TEST_FREQ=1" "$old"
  assert_output 0
}

@test "a site profile changed on the volume after install is refused before anything is written" {
  install_site
  local file
  file=$(installed_file)
  chmod u+w "$file"
  sed -i 's/^TARGET_STEPS=.*/TARGET_STEPS=1/' "$file"
  run bash -c "$(driver_command "$RUN_ID")"
  assert_failure 2
  assert_output --partial "(PROF-E008)"
  assert_output --partial "not the one its file name pins"
  assert_file_not_exist "$STORAGE/runs/verl/two-worker-grpo/$RUN_ID"
}

@test "a Driver command whose site profile is not installed names the install command" {
  run bash -c "$(driver_command "$RUN_ID")"
  assert_failure 2
  assert_output --partial "(LAUNCH-E095) site profile ours with sha256"
  assert_output --partial "make install-tools SITE="
  assert_file_not_exist "$STORAGE/runs/verl/two-worker-grpo/$RUN_ID"
}

@test "PROFILE_SHA256 that is not a sha256, or without PROFILE, is refused" {
  install_site
  local command
  command=$(driver_command "$RUN_ID")
  run bash -c "${command/PROFILE_SHA256=/PROFILE_SHA256=x}"
  assert_failure 2
  assert_output --partial "(LAUNCH-E096)"
  run env -u PROFILE bash -c "${command/export PROFILE=ours /export }"
  assert_failure 2
  assert_output --partial "(LAUNCH-E096)"
  # a bundle profile's command clears a PROFILE_SHA256 the job's environment may carry
  PROFILE=test-fixture
  run driver_command "$RUN_ID"
  assert_output --partial $'export PROFILE=test-fixture; \\unset PROFILE_SHA256\n'
}

@test "a site profile that names a shipped profile, or a FIFO in the site folder, is refused at once" {
  sed 's/^PROFILE_NAME=.*/PROFILE_NAME=smoke-1x1/' "$SITE/ours.env" >"$SITE/smoke-1x1.env"
  run install_site
  assert_failure
  assert_output --partial "have the name of a profile the bundle ships"
  rm "$SITE/smoke-1x1.env"
  mkfifo "$SITE/zz.env"
  run timeout 20 bash -c "$(declare -f install_site); REPO=$REPO VENV=$VENV STORAGE=$STORAGE SITE=$SITE install_site"
  assert_failure 1
  assert_output --partial "not a regular file"
  assert_file_not_exist "$STORAGE/tools/verl/two-worker-grpo-profiles"
}

@test "a job variable cannot set PROFILE_SHA256 through make submit, rayjob or sbatch" {
  run "$VENV/bin/python" "$REPO/prep/sbatch.py" --run-id "$RUN_ID" --profile "$PROFILE" \
    --storage-root /mnt/v --bundle "$BUNDLE" --var PROFILE_SHA256=0000
  assert_failure
  assert_output --partial "(SUB-E011) job variable 'PROFILE_SHA256' cannot be set: the Driver command sets it"
}
