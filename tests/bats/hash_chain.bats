#!/usr/bin/env bats
# Nothing runs unverified: the Driver command pins the launcher, the launcher pins SHA256SUMS,
# SHA256SUMS pins every other file. A flipped byte anywhere stops the run before it writes.

load test_helper

setup_file() {
  build_fixture_once
}

setup() {
  sandbox
  use_fixture
  export STORAGE_ROOT=$STORAGE RUN_ID=exp-001
}


@test "the installed bundle verifies as installed" {
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh" --verify-bundle
  assert_success
  assert_output --partial "bundle $BUNDLE verified"
}

@test "a flipped byte in any pinned file stops the launcher, naming the file and both hashes" {
  local digest name expected actual n=0
  while read -r digest name; do
    n=$((n + 1))
    cp -a "$BUNDLE/$name" "$BATS_TEST_TMPDIR/saved"
    flip_byte "$BUNDLE/$name"
    expected=$digest
    actual=$(sha256sum "$BUNDLE/$name" | cut -d' ' -f1)
    run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
    assert_failure 1
    if [[ "$name" == check-bundle-v1.py ]]; then  # the checker is pinned by the launcher too
      assert_output --partial "(LAUNCH-E044) $name: sha256 expected $expected, actual $actual"
    else
      assert_output --partial "(LAUNCH-E012) $name: sha256 expected $expected, actual $actual"
      assert_output --partial "1 bundle file(s) differ from SHA256SUMS"
    fi
    assert_not_exist "$STORAGE/runs"
    cp -a "$BATS_TEST_TMPDIR/saved" "$BUNDLE/$name"
  done <"$BUNDLE/SHA256SUMS"
  ((n >= 20))  # every file of the bundle was tried
}

@test "a changed part of the launcher is refused before it is sourced" {
  printf 'echo TAMPERED >&2\n' >>"$BUNDLE/launcher/phases.bash"
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) launcher/phases.bash: sha256 expected"
  refute_output --partial "TAMPERED"
  assert_not_exist "$STORAGE/runs"
}

@test "every mismatching file is reported, not only the first" {
  flip_byte "$BUNDLE/twgrpo/checks/inputs/inputs.py"
  flip_byte "$BUNDLE/profiles/test-fixture.env"
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "twgrpo/checks/inputs/inputs.py: sha256 expected"
  assert_output --partial "profiles/test-fixture.env: sha256 expected"
  assert_output --partial "2 bundle file(s) differ"
  assert_not_exist "$STORAGE/runs"
}

@test "a missing SHA256SUMS stops the launcher before it writes anything" {
  rm "$BUNDLE/SHA256SUMS"
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "(LAUNCH-E010) $BUNDLE/SHA256SUMS is missing"
  assert_not_exist "$STORAGE/runs"
}

@test "a changed SHA256SUMS stops the launcher against its pinned hash" {
  local pinned actual
  pinned=$(sed -n 's/^readonly BUNDLE_SUMS_SHA256=//p' "$BUNDLE/run-two-worker-grpo-v1.sh")
  echo "0000000000000000000000000000000000000000000000000000000000000000  extra.py" >>"$BUNDLE/SHA256SUMS"
  actual=$(sha256sum "$BUNDLE/SHA256SUMS" | cut -d' ' -f1)
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "(LAUNCH-E011) SHA256SUMS: sha256 expected $pinned, actual $actual"
  assert_not_exist "$STORAGE/runs"
}

@test "a file listed in SHA256SUMS but missing stops the launcher" {
  rm "$BUNDLE/twgrpo/checks/rules/sizes.py"
  run bash "$BUNDLE/run-two-worker-grpo-v1.sh"
  assert_failure 1
  assert_output --partial "(LAUNCH-E012) twgrpo/checks/rules/sizes.py: listed in SHA256SUMS but missing"
  assert_not_exist "$STORAGE/runs"
}

@test "the pasted Driver command refuses a launcher that differs from its pin" {
  local command
  command=$(driver_command exp-001)
  flip_byte "$BUNDLE/run-two-worker-grpo-v1.sh"
  run bash -c "$command"
  assert_failure 1
  assert_output --partial "(LAUNCH-E047) $BUNDLE/run-two-worker-grpo-v1.sh differs from this command's pin"
  refute_output --partial "run-two-worker-grpo-v1: run exp-001"
  assert_not_exist "$STORAGE/runs"
}

@test "the Driver command names the launcher's current hash and runs it in a bash without hooks" {
  run driver_command exp-001
  assert_success
  assert_line "export STORAGE_ROOT=$STORAGE"
  assert_line 'export PROFILE=test-fixture; \unset PROFILE_SHA256'
  assert_line "case \$(/usr/bin/env sha256sum \"\$launcher\") in"
  assert_line "  \"$(sha256sum "$BUNDLE/run-two-worker-grpo-v1.sh" | cut -d' ' -f1) \"*) echo \"driver: \$launcher verified (bundle \$v)\"; \\exec /usr/bin/env bash --noprofile --norc -p \"\$launcher\" ;;"
}
