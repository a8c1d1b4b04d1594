#!/usr/bin/env bats
# The job environment cannot bend the Driver command or the launcher (BASH_ENV, exported shell
# functions standing in for sha256sum and python3), paste mistakes explain themselves before
# any raw tool output, and installed bundle versions live side by side, each command working.

load test_helper

setup_file() {
  build_fixture_once
}

setup() {
  sandbox
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=exp-001
  # A model byte flipped: an untampered launch stops in the inputs phase, after run.json
  flip_byte "$(find "$STORAGE/models" -name '*.safetensors' | head -1)"
}

# A shell hook file as an image or a job form could set it: sha256sum answers what SHA256SUMS
# and the launcher's pin expect (the old hash chain then passes anything), python3 announces
# itself. FAKE_BUNDLE names the bundle folder.
write_hooks() {  # write_hooks FILE
  cat >"$1" <<'SH'
sha256sum() {
  if [[ $1 == --check ]]; then cat >/dev/null; return 0; fi
  local rel=${1#"$FAKE_BUNDLE"/}
  if [[ $rel == SHA256SUMS ]]; then
    echo "$(sed -n 's/^readonly BUNDLE_SUMS_SHA256=//p' "$FAKE_BUNDLE/run-two-worker-grpo-v1.sh")  $1"
  else
    echo "$(awk -v n="$rel" '$2 == n {print $1}' "$FAKE_BUNDLE/SHA256SUMS")  $1"
  fi
}
python3() { echo HOOKED >&2; command python3 "$@"; }
SH
}

tamper_verifier() {  # the verifier prints TAMPERED once it runs
  sed -i 's/^import sys$/import sys; print("TAMPERED", file=sys.stderr)/' \
    "$BUNDLE/verify-two-worker-grpo-v1.py"
}

@test "BASH_ENV defining sha256sum and python3 cannot make the Driver command run a tampered verifier" {
  write_hooks "$BATS_TEST_TMPDIR/hooks.sh"
  tamper_verifier
  local command
  command=$(driver_command exp-001)
  FAKE_BUNDLE=$BUNDLE BASH_ENV=$BATS_TEST_TMPDIR/hooks.sh run bash -c "$command"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) verify-two-worker-grpo-v1.py: sha256 expected"
  refute_output --partial "TAMPERED"
  refute_output --partial "HOOKED"
  assert_not_exist "$STORAGE/runs"
}

@test "exported functions standing in for sha256sum and python3 reach neither the Driver command nor the launcher" {
  write_hooks "$BATS_TEST_TMPDIR/hooks.sh"
  tamper_verifier
  local command
  command=$(driver_command exp-001)
  run bash -c 'source "$1"; export -f sha256sum python3; FAKE_BUNDLE=$2 bash -c "$3"' _ \
    "$BATS_TEST_TMPDIR/hooks.sh" "$BUNDLE" "$command"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) verify-two-worker-grpo-v1.py: sha256 expected"
  refute_output --partial "TAMPERED"
  refute_output --partial "HOOKED"
  # the launcher run by hand in such a shell starts itself again without them
  run bash -c 'source "$1"; export -f sha256sum python3; FAKE_BUNDLE=$2 BASH_ENV=$1 bash "$2/run-two-worker-grpo-v1.sh"' _ \
    "$BATS_TEST_TMPDIR/hooks.sh" "$BUNDLE"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) verify-two-worker-grpo-v1.py: sha256 expected"
  refute_output --partial "TAMPERED"
  refute_output --partial "HOOKED"
}

# Builtins as exported functions: each one says HOOKED and claims a verified start, so a
# hijack would show; exec then ends the shell without running the launcher.
export_builtin_hooks() {  # the environment entries bash imports as functions
  local name
  for name in exec '[' echo cat unset local mapfile; do
    printf 'BASH_FUNC_%s%%%%=() { printf "HOOKED %s\\ndriver: verified\\n" >&2; builtin exit 0; }\0' "$name" "$name"
  done
}

@test "exported functions named exec, [, echo or cat cannot stand in for the Driver command's builtins" {
  tamper_verifier
  local command
  local -a hooks
  command=$(driver_command exp-001)
  mapfile -d '' -t hooks < <(export_builtin_hooks)
  run env "${hooks[@]}" bash -c "$command"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) verify-two-worker-grpo-v1.py: sha256 expected"
  refute_output --partial "HOOKED"
  refute_output --partial "TAMPERED"
  # the launcher run by hand in such a shell: its restart is the builtin exec, not the function
  run env "${hooks[@]}" bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) verify-two-worker-grpo-v1.py: sha256 expected"
  refute_output --partial "HOOKED"
  assert_not_exist "$STORAGE/runs"
}

@test "the dropped hooks and what the environment can still change are recorded in run.json" {
  write_hooks "$BATS_TEST_TMPDIR/hooks.sh"
  local command
  command=$(driver_command exp-001)
  run bash -c 'source "$1"; export -f python3; FAKE_BUNDLE=$2 BASH_ENV=$1 PYTHONPATH=/opt/site LD_PRELOAD= bash -c "$3"' _ \
    "$BATS_TEST_TMPDIR/hooks.sh" "$BUNDLE" "$command"
  assert_failure 1  # the flipped model byte: the inputs phase fails
  refute_output --partial "HOOKED"
  assert_equal "$(sed -n 's/^phase=//p' "$(run_dir exp-001)/FAILED")" inputs
  run python3 -c 'import json, sys
env = json.load(open(sys.argv[1]))["job_environment"]
dropped = env["shell_hooks_dropped"]
print("BASH_ENV" in dropped, "BASH_FUNC_python3%%" in dropped, env["variables"]["PYTHONPATH"], env["variables"]["LD_PRELOAD"] == "")' \
    "$(run_dir exp-001)/run.json"
  assert_output "True True /opt/site True"
  # the phases' environment holds none of them
  run grep -c 'BASH_FUNC_\|BASH_ENV' "$(run_dir exp-001)/driver.log"
  assert_output 0
}

@test "a LATEST that is a FIFO does not hang the Driver command's missing-version message" {
  local command
  command=$(driver_command exp-001 | sed 's/ v=[^ ;]*;/ v=bundle-000000000000;/')  # a version not here
  mkfifo "$STORAGE/tools/verl/LATEST"
  run timeout 20 bash -c "$command"
  assert_failure 2
  assert_output --partial "(LAUNCH-E046) bundle bundle-000000000000 of this command is not in"
  assert_output --partial "(the latest installed is unknown)"
}

@test "the launcher run by sh says to use bash" {
  run sh "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 2
  assert_output --partial "(LAUNCH-E048) run by sh, not bash"
  assert_not_exist "$STORAGE/runs"
}

@test "the Driver command explains each paste mistake before any raw tool output, in sh or bash" {
  local command shell
  command=$(driver_command "")
  for shell in sh bash; do
    run env -u RUN_ID "$shell" -c "$command"
    assert_failure 2
    assert_output "driver: (LAUNCH-E003) RUN_ID is not set — Add RUN_ID=<new name> to the job's environment variables."
  done
  run sh -c "$command"  # RUN_ID in the environment, sh: the launcher runs, in bash
  assert_failure 1
  assert_output --partial "driver: $BUNDLE/run-two-worker-grpo-v1.sh verified"
  assert_output --partial "run-two-worker-grpo-v1: run exp-001"
  mv "$STORAGE" "$STORAGE.elsewhere"  # the volume mounted at another path
  run sh -c "$command"
  assert_failure 2
  assert_output "driver: (LAUNCH-E045) $STORAGE/tools/verl is missing: the shared volume is not mounted at STORAGE_ROOT=$STORAGE (or the bundle is not installed) — The volume is not mounted at STORAGE_ROOT in the job (the message names the path it looked at): mount it there, or install the bundle (make install-tools)."
  refute_output --partial "sha256sum"
}

@test "versions install side by side: A's pasted command keeps working after B adds a profile" {
  local a=$BATS_TEST_TMPDIR/repo-a b=$BATS_TEST_TMPDIR/repo-b profiles=tools/verl/two-worker-grpo/profiles
  copy_repo "$a"
  cp "$BUNDLE/profiles/test-fixture.env" "$a/$profiles/"
  make -s -C "$a" checksums >/dev/null
  run make -s -C "$a" install-tools PREP_ROOT="$STORAGE"
  assert_success
  local command_a command_b version_a version_b
  command_a=$(make -s -C "$a" driver-command STORAGE_ROOT="$STORAGE" PROFILE=test-fixture)
  version_a=bundle-$(sha256sum "$a/$LAUNCHER_REL" | cut -c1-12)
  cp -a "$a" "$b"
  sed 's/^PROFILE_NAME=.*/PROFILE_NAME=other/' "$a/$profiles/test-fixture.env" >"$b/$profiles/other.env"
  make -s -C "$b" checksums >/dev/null
  run make -s -C "$b" install-tools PREP_ROOT="$STORAGE"
  assert_success
  command_b=$(make -s -C "$b" driver-command STORAGE_ROOT="$STORAGE" PROFILE=other)
  version_b=bundle-$(sha256sum "$b/$LAUNCHER_REL" | cut -c1-12)
  [[ "$version_a" != "$version_b" ]]
  assert_equal "$(cat "$STORAGE/tools/verl/two-worker-grpo/LATEST")" "$version_b"
  # both commands verify their own version and run it (the flipped model byte stops inputs)
  RUN_ID=run-a run bash -c "$command_a"
  assert_failure 1
  assert_output --partial "$version_a/run-two-worker-grpo-v1.sh verified"
  RUN_ID=run-b run bash -c "$command_b"
  assert_failure 1
  assert_output --partial "$version_b/run-two-worker-grpo-v1.sh verified"
  run python3 -c 'import json, sys; print(*(json.load(open(p))["bundle_version"] for p in sys.argv[1:]))' \
    "$(run_dir run-a)/run.json" "$(run_dir run-b)/run.json"
  assert_output "$version_a $version_b"
  assert_equal "$(sed -n 's/^phase=//p' "$(run_dir run-a)/FAILED")" inputs
  # the flat install beside them is still exactly its SHA256SUMS
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh" --verify-bundle
  assert_success
  # a command for a version this volume does not hold says to re-copy it
  rm -rf "${STORAGE:?}/tools/verl/two-worker-grpo/$version_a"
  RUN_ID=run-c run bash -c "$command_a"
  assert_failure 2
  assert_output "driver: (LAUNCH-E046) bundle $version_a of this command is not in $STORAGE/tools/verl/two-worker-grpo (the latest installed is $version_b) — The command pins a bundle version this volume does not hold: install it (make install-tools from the checkout that printed the command), or re-copy the command for the installed version (make driver-command). make submit checks this before sending (SUB-E130)."
}
