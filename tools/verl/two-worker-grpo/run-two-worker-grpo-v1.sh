#!/usr/bin/env bash
# Summary: Run one verified verl GRPO job on an existing Ray cluster and leave SUCCESS or FAILED.
# Usage: STORAGE_ROOT=/mnt/verl-reproduction RUN_ID=exp-001 [PROFILE=name] run-two-worker-grpo-v1.sh
#        run-two-worker-grpo-v1.sh --verify-bundle | --help
#
# Checks this bundle's files against SHA256SUMS (whose sha256 is pinned below), then the run
# request; claims runs/verl/two-worker-grpo/$RUN_ID/ (never reused), and runs the phases
# inputs, preflight (Ray probes on every node), training (python3 -m verl.trainer.main_ppo)
# and postflight. It only connects to the cluster: it never starts or submits to Ray.
#
# Environment: STORAGE_ROOT (required), RUN_ID (required, new), PROFILE (a profile in
#   profiles/, default the tutorial's 2x2 A100), PROBE_TIMEOUT (seconds, default 120),
#   TRACE=1 (trace commands).
# Exit codes: 0 SUCCESS; 1 a check failed; 2 usage error or missing input; 128+N stopped by
#   signal N; otherwise the training command's status. Any failure after the run folder is
#   claimed leaves FAILED there (time, phase, exit status, signal); nothing is removed.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

# Pinned by `make checksums`: the sha256 of SHA256SUMS beside this file.
readonly BUNDLE_SUMS_SHA256=ecb0928cdbd32de7a3959f798ae9bb266ad10d0f8c80e58f9008e438d1f9ce03
readonly PROG=run-two-worker-grpo-v1
readonly RUN_ID_FORM='^[A-Za-z0-9][A-Za-z0-9._-]*$'
BUNDLE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly BUNDLE_DIR
readonly VERIFY="$BUNDLE_DIR/verify-two-worker-grpo-v1.py"

PHASE=checks      # the phase FAILED names
RUN_DIR=""        # set once the run folder is ours
CHILD=""          # the running phase's process group
SIGNAL=none
WORK=""           # scratch folder for NUL-separated lists

die() {  # die CODE "(ID) what went wrong — what to do"
  local code=$1
  shift
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit "$code"
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

sha256_of() {
  local line
  line=$(sha256sum "$1")
  printf '%s\n' "${line%% *}"
}

check_dependencies() {
  local cmd
  for cmd in python3 sha256sum tee git mkdir date; do
    command -v "$cmd" >/dev/null ||
      die 2 "(LAUNCH-E001) '$cmd' is not on PATH — run in the verl image, which provides it"
  done
}

# Every file the run uses must match SHA256SUMS, and SHA256SUMS must match the pin above.
# Reports every mismatching file before refusing; runs before anything is exported or written.
verify_bundle() {
  local sums="$BUNDLE_DIR/SHA256SUMS" actual expected name bad=0
  [[ -f "$sums" ]] || die 1 "(LAUNCH-E010) $sums is missing — reinstall the bundle: make install-tools"
  actual=$(sha256_of "$sums")
  [[ "$actual" == "$BUNDLE_SUMS_SHA256" ]] ||
    die 1 "(LAUNCH-E011) SHA256SUMS: sha256 expected $BUNDLE_SUMS_SHA256, actual $actual — reinstall the bundle: make install-tools"
  while read -r expected name; do
    name=${name#\*}
    if [[ ! "$expected" =~ ^[0-9a-f]{64}$ || -z "$name" || "$name" == /* || "$name" == *..* ]]; then
      printf '%s: (LAUNCH-E012) SHA256SUMS has a malformed line: %s %s\n' "$PROG" "$expected" "$name" >&2
      bad=$((bad + 1))
    elif [[ ! -f "$BUNDLE_DIR/$name" ]]; then
      printf '%s: (LAUNCH-E012) %s: listed in SHA256SUMS but missing\n' "$PROG" "$name" >&2
      bad=$((bad + 1))
    elif actual=$(sha256_of "$BUNDLE_DIR/$name") && [[ "$actual" != "$expected" ]]; then
      printf '%s: (LAUNCH-E012) %s: sha256 expected %s, actual %s\n' "$PROG" "$name" "$expected" "$actual" >&2
      bad=$((bad + 1))
    fi
  done <"$sums"
  ((bad == 0)) || die 1 "(LAUNCH-E012) $bad bundle file(s) differ from SHA256SUMS — reinstall the bundle: make install-tools"
}

# Reads the run's paths from the profile (KEY=value lines) into globals.
load_paths() {
  local out line
  out=$(python3 "$VERIFY" paths --profile "$PROFILE" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID") ||
    die 2 "(LAUNCH-E009) profile '${PROFILE:-default}' cannot be used (see above) — pick one in $BUNDLE_DIR/profiles/"
  while IFS= read -r line; do
    case "${line%%=*}" in
      PROFILE_NAME | VERL_ROOT | MODEL_ROOT | DATA_ROOT | WORLD_SIZE)
        printf -v "${line%%=*}" '%s' "${line#*=}" ;;
      RUN_DIR) RUN_DIR_PLANNED=${line#*=} ;;
    esac
  done <<<"$out"
  PROFILE=$PROFILE_NAME
}

check_request() {
  [[ -n "${STORAGE_ROOT:-}" ]] ||
    die 2 "(LAUNCH-E002) STORAGE_ROOT is not set — export STORAGE_ROOT=<the shared volume's mount path in the job>"
  [[ -n "${RUN_ID:-}" ]] ||
    die 2 "(LAUNCH-E003) RUN_ID is not set — add a new RUN_ID to the job's environment variables"
  [[ "$RUN_ID" =~ $RUN_ID_FORM ]] ||
    die 2 "(LAUNCH-E004) RUN_ID '$RUN_ID' must match $RUN_ID_FORM — use letters, digits, '.', '_' and '-'"
  PROFILE=${PROFILE:-}  # empty: the bundle's default profile
  [[ -z "$PROFILE" || ("$PROFILE" =~ $RUN_ID_FORM && "$PROFILE" != *.env) ]] ||
    die 2 "(LAUNCH-E009) PROFILE '$PROFILE' must name a profile in the bundle (profiles/<name>.env, hash-checked), not a path"
  [[ -d "$STORAGE_ROOT" ]] ||
    die 2 "(LAUNCH-E005) STORAGE_ROOT $STORAGE_ROOT is not a directory — mount the shared volume there"
  [[ -w "$STORAGE_ROOT" ]] ||
    die 2 "(LAUNCH-E006) STORAGE_ROOT $STORAGE_ROOT is not writable — mount the volume read-write"
  load_paths
  local dir
  for dir in "$VERL_ROOT" "$MODEL_ROOT" "$DATA_ROOT"; do
    [[ -d "$dir" ]] ||
      die 2 "(LAUNCH-E007) input folder $dir is missing — prepare and check inputs on the prep box: make prepare-inputs verify-inputs"
  done
  [[ ! -e "$RUN_DIR_PLANNED" ]] ||
    die 2 "(LAUNCH-E008) run folder $RUN_DIR_PLANNED already exists — set a new RUN_ID; a run folder is never reused"
}

claim_run_folder() {
  mkdir -p "$(dirname "$RUN_DIR_PLANNED")"
  # mkdir without -p fails if the folder exists, so two launchers cannot share one RUN_ID.
  mkdir "$RUN_DIR_PLANNED" 2>/dev/null ||
    die 2 "(LAUNCH-E008) run folder $RUN_DIR_PLANNED already exists — set a new RUN_ID; a run folder is never reused"
  RUN_DIR=$RUN_DIR_PLANNED
  WORK=$(mktemp -d)
}

write_failed() {  # never overwrites: a FAILED that exists keeps its first cause
  local status=$1
  [[ -n "$RUN_DIR" && ! -e "$RUN_DIR/FAILED" && ! -e "$RUN_DIR/SUCCESS" ]] || return 0
  (
    set -o noclobber
    printf 'time=%s\nphase=%s\nexit_status=%s\nsignal=%s\nrun_id=%s\n' \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PHASE" "$status" "$SIGNAL" "$RUN_ID" >"$RUN_DIR/FAILED"
  ) 2>/dev/null || true
  printf '%s: FAILED in phase %s (exit status %s, signal %s): %s/FAILED\n' \
    "$PROG" "$PHASE" "$status" "$SIGNAL" "$RUN_DIR" >&2
}

on_signal() {
  local name=$1 number=$2
  SIGNAL=$name
  trap - TERM INT
  write_failed $((128 + number))  # first: a preempted machine may not live long
  if [[ -n "$CHILD" ]]; then
    kill -"$name" -- "-$CHILD" 2>/dev/null || true
  fi
  exit $((128 + number))
}

on_exit() {
  local status=$?
  trap - EXIT
  ((status == 0)) || write_failed "$status"
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  if [[ -n "${TEE_PID:-}" ]]; then  # let tee write the last lines of driver.log
    exec 1>&- 2>&-
    wait "$TEE_PID" 2>/dev/null || true
  fi
  exit "$status"
}

start_logging() {
  exec > >(tee -a "$RUN_DIR/driver.log") 2>&1
  TEE_PID=$!
  printf '%s: run %s, profile %s, storage %s, RAY_ADDRESS=%s, bundle %s\n' "$PROG" "$RUN_ID" \
    "$PROFILE_NAME" "$STORAGE_ROOT" "${RAY_ADDRESS:-auto}" "$BUNDLE_DIR"
}

# Runs "$@" as its own process group in the background, so that a TERM or INT reaches the
# trap at once (bash defers traps while a foreground command runs) and is forwarded to it all.
run_phase() {
  PHASE=$1
  shift
  printf '%s: phase %s started %s\n' "$PROG" "$PHASE" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local status=0 started=$SECONDS
  set -m
  "$@" &
  CHILD=$!
  set +m
  wait "$CHILD" || status=$?
  CHILD=""
  printf '%s: phase %s ended with status %s after %s s\n' "$PROG" "$PHASE" "$status" $((SECONDS - started))
  return "$status"
}

read_nul_list() {  # read_nul_list ARRAY_NAME FILE
  mapfile -d '' -t "$1" <"$2"
}

export_environment() {
  python3 "$VERIFY" env --profile "$PROFILE" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/env" ||
    die 2 "(LAUNCH-E009) cannot build the run environment (see above)"
  local -a assignments
  local kv
  read_nul_list assignments "$WORK/env"
  for kv in "${assignments[@]}"; do
    export "${kv?}"
    printf 'export %q\n' "$kv"
  done
}

train_and_log() {  # the training command, teed to training.log; exits with its status
  set +m
  "${TRAINING_COMMAND[@]}" 2>&1 | tee -a "$RUN_DIR/training.log"
  exit "${PIPESTATUS[0]}"
}

main() {
  case "${1:-}" in
    -h | --help) usage; return 0 ;;
    --verify-bundle) check_dependencies; verify_bundle; echo "$PROG: bundle $BUNDLE_DIR verified"; return 0 ;;
    "") ;;
    *) die 2 "(LAUNCH-E000) unknown argument '$1' — see --help" ;;
  esac
  check_dependencies
  verify_bundle
  check_request
  trap on_exit EXIT
  trap 'on_signal TERM 15' TERM
  trap 'on_signal INT 2' INT
  claim_run_folder
  start_logging

  local launcher_sha
  launcher_sha=$(sha256_of "${BASH_SOURCE[0]}")
  python3 "$VERIFY" record-run --profile "$PROFILE" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --bundle-sums-sha256 "$BUNDLE_SUMS_SHA256" --launcher-sha256 "$launcher_sha"

  run_phase inputs python3 "$VERIFY" inputs --profile "$PROFILE" --storage-root "$STORAGE_ROOT" \
    --output-dir "$RUN_DIR"

  PHASE=environment
  export_environment

  run_phase preflight python3 "$VERIFY" preflight --profile "$PROFILE" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR" --storage-root "$STORAGE_ROOT" --probe-timeout "${PROBE_TIMEOUT:-120}"

  PHASE=training
  python3 "$VERIFY" command --profile "$PROFILE" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/command" ||
    die 2 "(LAUNCH-E009) cannot build the training command (see above)"
  read_nul_list TRAINING_COMMAND "$WORK/command"
  printf '%q ' "${TRAINING_COMMAND[@]}" >"$RUN_DIR/resolved-command.txt"
  printf '\n' >>"$RUN_DIR/resolved-command.txt"
  printf 'Executing: %s\n' "$(cat "$RUN_DIR/resolved-command.txt")"
  run_phase training train_and_log

  run_phase postflight python3 "$VERIFY" postflight --profile "$PROFILE" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR"
  [[ -s "$RUN_DIR/SUCCESS" ]] ||
    die 1 "(LAUNCH-E013) postflight passed but wrote no SUCCESS — see $RUN_DIR/verification.json"
  printf '%s: SUCCESS %s (verification: %s/verification.json)\n' "$PROG" "$RUN_ID" "$RUN_DIR"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
