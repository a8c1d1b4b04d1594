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
# The installed bundle must be exactly SHA256SUMS: a file or folder it does not list stops the
# launcher. The verifier runs as `python3 -I -B` (nothing beside it, on PYTHONPATH or in the
# user's site-packages can stand in for a module; no __pycache__ is written). A phase runs in a
# process group of its own with a watchdog: however the launcher ends, KILL included, the
# phase's whole group is stopped (TERM, then KILL after KILL_GRACE seconds).
#
# Environment: STORAGE_ROOT (required), RUN_ID (required, new, at most 128 characters),
#   PROFILE (a profile in profiles/, default the tutorial's 2x2 A100), PROBE_TIMEOUT (seconds,
#   default 120), KILL_GRACE (seconds a stopped phase gets before KILL, default 10),
#   SAVE_FREQ (checkpoint every N steps, default the profile's), RESUME_FROM (the RUN_ID of a
#   preempted run to continue from its latest complete checkpoint, or auto: the newest
#   resumable run of this RUN_ID's lineage), HEARTBEAT_INTERVAL and HEARTBEAT_LEASE (seconds,
#   default 30 and 120: heartbeat.json is refreshed while the launcher lives; a run without a
#   beat for the lease and without a verdict is lost, and resumable), TRACE=1 (trace commands).
# A re-run of the same job (a platform's retry) whose run folder holds a stopped run of the
#   same profile and bundle becomes the next attempt, RUN_ID.2, RUN_ID.3, ..., resuming the
#   newest attempt with a complete checkpoint; never while one is alive or after a SUCCESS.
# Exit codes: 0 SUCCESS; 1 a check failed; 2 usage error or missing input; 128+N stopped by
#   signal N; otherwise the training command's status. Any failure after the run folder is
#   claimed leaves FAILED there (time, phase, exit status, signal, cause), written whole or
#   not at all; nothing is removed.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

# Pinned by `make checksums`: the sha256 of SHA256SUMS beside this file.
readonly BUNDLE_SUMS_SHA256=1113de4952631cc5fdbb3e3e4a7af6c65f19aa8032428bc5eaca5cb956e522ab
readonly PROG=run-two-worker-grpo-v1
readonly RUN_ID_FORM='^[A-Za-z0-9][A-Za-z0-9._-]*$'
readonly MAX_RUN_ID=128  # the verifier's limit too
readonly LAUNCHER_NAME=${BASH_SOURCE[0]##*/}
BUNDLE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly BUNDLE_DIR
readonly VERIFY="$BUNDLE_DIR/verify-two-worker-grpo-v1.py"

# Globals. The job's environment gives STORAGE_ROOT and RUN_ID (checked by check_request) and
# PROFILE, which is never changed here; load_paths fills the next five from the profile; the
# rest track the run as it goes.
PROFILE=${PROFILE:-} # a profile name in profiles/; empty: the bundle's default profile
PROFILE_NAME=""      # the profile's own name, passed to every later verifier call
VERL_ROOT=""         # the pinned verl checkout on the volume
MODEL_ROOT=""        # the pinned model folder
DATA_ROOT=""         # the pinned parquet folder
RUN_DIR_PLANNED=""   # where the run folder will be, before it is claimed
RUN_DIR=""           # set once the run folder is ours
PHASE=checks         # the phase FAILED names
CHILD=""             # the running phase's process group
WATCHDOG=""          # the running phase's watchdog (a process group of its own)
SIGNAL=none          # the signal that stopped the run, for FAILED
CAUSE=""             # what FAILED says beyond phase, status and signal
WORK=""              # scratch folder for NUL-separated lists
TEE_PID=""           # the tee that writes driver.log
TRAINING_COMMAND=()  # the training command, one word per element
HEARTBEAT=""         # the heartbeat process (a process group of its own)
ATTEMPT_NOTES=()     # what plan_attempt decided, for driver.log
KILL_GRACE=${KILL_GRACE:-10}  # seconds a phase gets between TERM and KILL
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the bundle, the inputs or anywhere else

verify() {  # the verifier, isolated: -I keeps cwd, PYTHONPATH and user site off sys.path
  python3 -I -B "$VERIFY" "$@"
}

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
  for cmd in python3 sha256sum tee git mkdir date find ln sync; do
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
  find_intruders "$sums"
}

# The bundle folder must hold exactly what SHA256SUMS lists: a profile or module dropped beside
# the verified files could replace every pin or shadow a module. Lists every intruder (files,
# folders, symlinks; __pycache__ too, which nothing here writes) before refusing.
find_intruders() {  # find_intruders SUMS
  local -A listed=([SHA256SUMS]=1 ["$LAUNCHER_NAME"]=1) folders=()
  local expected name path rel kind count=0
  while read -r expected name; do
    name=${name#\*}
    listed[$name]=1
    while [[ "$name" == */* ]]; do
      name=${name%/*}
      folders[$name]=1
    done
  done <"$1"
  while IFS= read -r -d '' path; do
    rel=${path#"$BUNDLE_DIR"/}
    kind=""
    if [[ -L "$path" ]]; then
      kind="symlink"
    elif [[ -d "$path" ]]; then
      [[ -n "${folders[$rel]:-}" ]] || kind="folder"
    elif [[ ! -f "$path" ]]; then
      kind="special file"
    elif [[ -z "${listed[$rel]:-}" ]]; then
      kind="file"
    fi
    [[ -n "$kind" ]] || continue
    count=$((count + 1))
    ((count > 20)) || printf '%s: (LAUNCH-E014) %s not in SHA256SUMS: %q\n' "$PROG" "$kind" "$rel" >&2
  done < <(find "$BUNDLE_DIR" -mindepth 1 -print0)
  ((count == 0)) || die 1 "(LAUNCH-E014) $count path(s) in $BUNDLE_DIR are not in SHA256SUMS (shown above) — the bundle must be exactly SHA256SUMS: move them out, or reinstall into a new folder (make install-tools)"
}

# Reads the run's paths from the profile (KEY=value lines) into the globals declared above.
load_paths() {
  local out line value
  out=$(verify paths --profile "$PROFILE" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID") ||
    die 2 "(LAUNCH-E009) profile '${PROFILE:-default}' cannot be used (see above) — pick one in $BUNDLE_DIR/profiles/"
  while IFS= read -r line; do
    value=${line#*=}
    case "${line%%=*}" in
      PROFILE_NAME) PROFILE_NAME=$value ;;
      VERL_ROOT) VERL_ROOT=$value ;;
      MODEL_ROOT) MODEL_ROOT=$value ;;
      DATA_ROOT) DATA_ROOT=$value ;;
      RUN_DIR) RUN_DIR_PLANNED=$value ;;
      *) ;;  # PROFILE_FILE, WORLD_SIZE: not needed here
    esac
  done <<<"$out"
}

check_request() {
  [[ -n "${STORAGE_ROOT:-}" ]] ||
    die 2 "(LAUNCH-E002) STORAGE_ROOT is not set — export STORAGE_ROOT=<the shared volume's mount path in the job>"
  [[ -n "${RUN_ID:-}" ]] ||
    die 2 "(LAUNCH-E003) RUN_ID is not set — add a new RUN_ID to the job's environment variables"
  ((${#RUN_ID} <= MAX_RUN_ID)) ||
    die 2 "(LAUNCH-E015) RUN_ID is ${#RUN_ID} characters long; at most $MAX_RUN_ID are allowed — set a shorter RUN_ID"
  [[ "$RUN_ID" =~ $RUN_ID_FORM ]] ||
    die 2 "(LAUNCH-E004) RUN_ID '$RUN_ID' must match $RUN_ID_FORM — use letters, digits, '.', '_' and '-'"
  [[ -z "${SAVE_FREQ:-}" || "$SAVE_FREQ" =~ ^[1-9][0-9]{0,8}$ ]] ||
    die 2 "(LAUNCH-E030) SAVE_FREQ '$SAVE_FREQ' must be a positive whole number — set SAVE_FREQ=<steps between checkpoints>, or leave it unset"
  [[ -z "${RESUME_FROM:-}" || "$RESUME_FROM" == auto || ("$RESUME_FROM" =~ $RUN_ID_FORM && "$RESUME_FROM" != "$RUN_ID") ]] ||
    die 2 "(LAUNCH-E031) RESUME_FROM '$RESUME_FROM' must be the RUN_ID of another, preempted run — set it to that run's RUN_ID"
  [[ -z "$PROFILE" || ("$PROFILE" =~ $RUN_ID_FORM && "$PROFILE" != *.env) ]] ||
    die 2 "(LAUNCH-E009) PROFILE '$PROFILE' must name a profile in the bundle (profiles/<name>.env, hash-checked), not a path"
  [[ "$KILL_GRACE" =~ ^[1-9][0-9]{0,3}$ ]] ||
    die 2 "(LAUNCH-E016) KILL_GRACE '$KILL_GRACE' must be a whole number of seconds from 1 to 9999 — unset it for the default 10"
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
  plan_attempt
  [[ ! -e "$RUN_DIR_PLANNED" && ! -L "$RUN_DIR_PLANNED" ]] ||
    die 2 "(LAUNCH-E008) run folder $RUN_DIR_PLANNED already exists — set a new RUN_ID; a run folder is never reused"
  local runs=${RUN_DIR_PLANNED%/*}
  while [[ ! -e "$runs" ]]; do runs=${runs%/*}; done  # the deepest folder that exists
  [[ -w "$runs" ]] ||
    die 2 "(LAUNCH-E017) $runs is not writable, so the run folder cannot be created — mount the volume read-write (runs/ included)"
}

# --- preemption: heartbeat, retries as attempts, RESUME_FROM=auto (twgrpo/checks/attempt.py) ---

check_heartbeat_request() {  # HEARTBEAT_INTERVAL and HEARTBEAT_LEASE, before anything is written
  HEARTBEAT_INTERVAL=${HEARTBEAT_INTERVAL:-30} HEARTBEAT_LEASE=${HEARTBEAT_LEASE:-120}
  local ok=0
  if [[ "$HEARTBEAT_INTERVAL" =~ ^[1-9][0-9]{0,4}$ && "$HEARTBEAT_LEASE" =~ ^[1-9][0-9]{0,4}$ ]]; then
    ((HEARTBEAT_LEASE > 86400 || HEARTBEAT_LEASE < 2 * HEARTBEAT_INTERVAL)) || ok=1
  fi
  ((ok)) || die 2 "(LAUNCH-E090) HEARTBEAT_INTERVAL '$HEARTBEAT_INTERVAL' and HEARTBEAT_LEASE '$HEARTBEAT_LEASE' must be whole seconds up to 86400, the lease at least twice the interval — unset them for 30 and 120"
}

# A retry of a stopped run becomes its next attempt; RESUME_FROM=auto picks the run to resume.
plan_attempt() {
  [[ -e "$RUN_DIR_PLANNED" || -L "$RUN_DIR_PLANNED" || "${RESUME_FROM:-}" == auto ]] || return 0
  local out line
  out=$(verify attempt --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --resume-from "${RESUME_FROM:-}" --bundle-sums-sha256 "$BUNDLE_SUMS_SHA256") || exit 2
  while IFS= read -r line; do
    case "${line%%=*}" in
      RUN_ID) RUN_ID=${line#*=} ;;
      RESUME_FROM) RESUME_FROM=${line#*=} ;;
      NOTE) ATTEMPT_NOTES+=("${line#*=}") ;;
      *) ;;
    esac
  done <<<"$out"
  export RUN_ID RESUME_FROM
  load_paths
}

start_heartbeat() {  # heartbeat.json, refreshed in a process group of its own until we end
  set -m
  python3 -I -B "$VERIFY" heartbeat --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --launcher-pid $$ --interval "$HEARTBEAT_INTERVAL" --lease "$HEARTBEAT_LEASE" </dev/null >/dev/null 2>&1 &
  HEARTBEAT=$!
  set +m
  local note
  for note in "${ATTEMPT_NOTES[@]}"; do printf '%s: %s\n' "$PROG" "$note"; done
}

stop_heartbeat() {  # the beater writes state "ended" on TERM, then exits
  [[ -n "$HEARTBEAT" ]] || return 0
  kill -TERM "$HEARTBEAT" 2>/dev/null || true
  wait "$HEARTBEAT" 2>/dev/null || true
  HEARTBEAT=""
}

claim_run_folder() {
  local err
  err=$(mkdir -p -- "${RUN_DIR_PLANNED%/*}" 2>&1) ||
    die 2 "(LAUNCH-E018) cannot create ${RUN_DIR_PLANNED%/*}: $(cause "$err") — check the volume's space and permissions"
  # mkdir without -p fails if the folder exists, so two launchers cannot share one RUN_ID.
  if ! err=$(mkdir -- "$RUN_DIR_PLANNED" 2>&1); then
    [[ ! -e "$RUN_DIR_PLANNED" && ! -L "$RUN_DIR_PLANNED" ]] ||
      die 2 "(LAUNCH-E008) run folder $RUN_DIR_PLANNED already exists — set a new RUN_ID; a run folder is never reused"
    die 2 "(LAUNCH-E018) cannot create the run folder $RUN_DIR_PLANNED: $(cause "$err") — check the volume's space and permissions"
  fi
  RUN_DIR=$RUN_DIR_PLANNED
  WORK=$(mktemp -d)
}

cause() {  # cause "tool: path: reason": the first line's reason alone
  local text=${1%%$'\n'*}
  printf '%s\n' "${text##*: }"
}

# Writes a marker or record whole or not at all: a temporary file beside it, fsynced, then hard-linked
# into place (link is atomic and never replaces a file). A full or read-only disk leaves no
# marker and one error naming the cause.
write_marker() {  # write_marker PATH TEXT
  local path=$1 text=$2 temporary err
  temporary="${path%/*}/.${path##*/}.$$.tmp"
  # noclobber: a planted file or symlink at the temporary name is never written through
  if err=$({ set -C && printf '%s' "$text" >"$temporary" && sync -- "$temporary" && ln -- "$temporary" "$path"; } 2>&1); then
    rm -f -- "$temporary"
    sync -- "${path%/*}" 2>/dev/null || true
    return 0
  fi
  rm -f -- "$temporary" 2>/dev/null
  printf '%s: (LAUNCH-E019) cannot write %s: %s — free space on the volume or mount it read-write; nothing half-written was left\n' \
    "$PROG" "$path" "$(cause "$err")" >&2
  return 1
}

write_failed() {  # never overwrites: a FAILED that exists keeps its first cause
  local status=$1
  [[ -n "$RUN_DIR" && ! -e "$RUN_DIR/FAILED" && ! -e "$RUN_DIR/SUCCESS" ]] || return 0
  local where=$RUN_DIR/FAILED
  write_marker "$where" "$(printf 'time=%s\nphase=%s\nexit_status=%s\nsignal=%s\nrun_id=%s\ncause=%s' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PHASE" "$status" "$SIGNAL" "$RUN_ID" "${CAUSE:-exit status}")"$'\n' ||
    where="not recorded (LAUNCH-E019 above)"
  printf '%s: FAILED in phase %s (exit status %s, signal %s): %s\n' \
    "$PROG" "$PHASE" "$status" "$SIGNAL" "$where" >&2
}

# Stops a process group: SIGNAL first, then KILL once it has had KILL_GRACE seconds.
stop_group() {  # stop_group SIGNAL PGID
  local signal=$1 group=$2 tick
  kill -"$signal" -- "-$group" 2>/dev/null || return 0
  for ((tick = 0; tick < 2 * KILL_GRACE; tick++)); do
    kill -0 -- "-$group" 2>/dev/null || return 0
    sleep 0.5
  done
  printf '%s: (LAUNCH-E021) phase %s still ran %s s after SIG%s; sent KILL to its process group %s\n' \
    "$PROG" "$PHASE" "$KILL_GRACE" "$signal" "$group" >&2
  kill -KILL -- "-$group" 2>/dev/null || true
}

# A KILL runs no trap, so each phase gets a watchdog in a process group of its own (a KILL of
# the launcher's group does not reach it): once the launcher is gone, it writes what FAILED can
# say and stops the phase's whole group. It ends with the phase.
start_watchdog() {  # start_watchdog PGID
  local group=$1 launcher=$$ started
  started=$(start_time "$$")
  set -m
  (
    trap - TERM INT EXIT
    if [[ -w "$RUN_DIR/driver.log" ]]; then
      exec >>"$RUN_DIR/driver.log" 2>&1  # not the launcher's pipe to tee: tee may end
    else
      exec >/dev/null 2>&1
    fi
    while [[ "$(start_time "$launcher")" == "$started" ]]; do
      kill -0 -- "-$group" 2>/dev/null || exit 0
      sleep 0.5
    done
    kill -0 -- "-$group" 2>/dev/null || exit 0
    SIGNAL=unknown
    CAUSE="the launcher (pid $launcher) ended without stopping phase $PHASE (killed, e.g. SIGKILL); the watchdog stopped the phase's process group $group"
    printf '%s: (LAUNCH-E020) %s\n' "$PROG" "$CAUSE"
    write_failed unknown 2>&1
    stop_group TERM "$group"
  ) &
  WATCHDOG=$!
  set +m
}

# A process's start time (field 22 of /proc/PID/stat), empty once it is gone or a zombie; with
# the pid it names the launcher even if the pid is reused.
start_time() {  # start_time PID
  local stat
  read -r stat 2>/dev/null </proc/"$1"/stat || return 0
  stat=${stat##*) }  # the fields after "(command name)", which may hold spaces
  read -r -a stat <<<"$stat"
  [[ "${stat[0]}" == Z ]] || printf '%s\n' "${stat[19]}"
}

stop_watchdog() {
  [[ -n "$WATCHDOG" ]] || return 0
  kill -KILL -- "-$WATCHDOG" 2>/dev/null || true
  wait "$WATCHDOG" 2>/dev/null || true
  WATCHDOG=""
}

on_signal() {
  local name=$1 number=$2
  SIGNAL=$name
  trap - TERM INT
  write_failed $((128 + number))  # first: a preempted machine may not live long
  if [[ -n "$CHILD" ]]; then
    stop_group "$name" "$CHILD"
  fi
  stop_watchdog
  exit $((128 + number))
}

on_exit() {
  local status=$?
  trap - EXIT
  ((status == 0)) || write_failed "$status"
  stop_heartbeat
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  if [[ -n "$TEE_PID" ]]; then  # let tee write the last lines of driver.log
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
  start_watchdog "$CHILD"
  wait "$CHILD" || status=$?
  stop_watchdog
  CHILD=""
  printf '%s: phase %s ended with status %s after %s s\n' "$PROG" "$PHASE" "$status" $((SECONDS - started))
  return "$status"
}

read_nul_list() {  # read_nul_list ARRAY_NAME FILE
  mapfile -d '' -t "$1" <"$2"
}

export_environment() {
  verify env --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/env" ||
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
  check_heartbeat_request
  check_request
  trap on_exit EXIT
  trap 'on_signal TERM 15' TERM
  trap 'on_signal INT 2' INT
  claim_run_folder
  start_logging
  start_heartbeat

  local launcher_sha
  launcher_sha=$(sha256_of "${BASH_SOURCE[0]}")
  verify record-run --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --bundle-sums-sha256 "$BUNDLE_SUMS_SHA256" --launcher-sha256 "$launcher_sha" ${SAVE_FREQ:+--save-freq "$SAVE_FREQ"}
  if [[ -n "${RESUME_FROM:-}" ]]; then  # the earlier run and its checkpoint, before any GPU time
    run_phase resume python3 -I -B "$VERIFY" resume --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" \
      --run-id "$RUN_ID" --resume-from "$RESUME_FROM"
  fi

  run_phase inputs python3 -I -B "$VERIFY" inputs --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" \
    --output-dir "$RUN_DIR"

  PHASE=environment
  export_environment

  run_phase preflight python3 -I -B "$VERIFY" preflight --profile "$PROFILE_NAME" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR" --storage-root "$STORAGE_ROOT" --probe-timeout "${PROBE_TIMEOUT:-120}"

  PHASE=training
  verify command --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/command" ||
    die 2 "(LAUNCH-E009) cannot build the training command (see above)"
  read_nul_list TRAINING_COMMAND "$WORK/command"
  local resolved
  resolved=$(printf '%q ' "${TRAINING_COMMAND[@]}")
  write_marker "$RUN_DIR/resolved-command.txt" "$resolved"$'\n' ||
    die 1 "(LAUNCH-E019) the training command could not be recorded (see above), so the run could not be judged afterwards"
  printf 'Executing: %s\n' "$resolved"
  run_phase training train_and_log

  run_phase postflight python3 -I -B "$VERIFY" postflight --profile "$PROFILE_NAME" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR"
  [[ -s "$RUN_DIR/SUCCESS" ]] ||
    die 1 "(LAUNCH-E013) postflight passed but wrote no SUCCESS — see $RUN_DIR/verification.json"
  printf '%s: SUCCESS %s (verification: %s/verification.json)\n' "$PROG" "$RUN_ID" "$RUN_DIR"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
