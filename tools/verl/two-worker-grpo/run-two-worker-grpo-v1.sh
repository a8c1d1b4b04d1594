#!/usr/bin/env bash
# Summary: Run one verified verl GRPO job on an existing Ray cluster and leave SUCCESS or FAILED.
# Usage: STORAGE_ROOT=/mnt/verl-reproduction RUN_ID=exp-001 [PROFILE=name] run-two-worker-grpo-v1.sh
#        run-two-worker-grpo-v1.sh --verify-bundle | --help
#
# Verifies this bundle before any of its Python runs (SHA256SUMS and check-bundle-v1.py against
# the pins below, then every listed file and every intruder, __pycache__ included), then the run
# request (verify request: every job variable, the profile, the volume); claims
# runs/verl/two-worker-grpo/$RUN_ID/ (never reused) and runs the phases inputs, preflight (Ray
# probes on every node), training (python3 -m verl.trainer.main_ppo) and postflight. It only
# connects to the cluster: it never starts or submits to Ray. Shell orchestrates; every rule
# lives in the verifier, which runs as `python3 -I -B` (nothing beside it, on PYTHONPATH or in
# the user's site-packages stands in for a module; no __pycache__ is written).
#
# Each phase runs in a process group of its own; a watchdog, from the claim to the verdict,
# writes FAILED (ended_without_verdict=1) and stops the phase's group if the launcher is KILLed,
# in a phase or between two. TERM, INT and PIPE write FAILED first, then stop the phase (TERM,
# then KILL after KILL_GRACE seconds); further signals are ignored meanwhile, and tee ignores
# TERM and INT, so a signal to the whole process group cannot take the log down first.
#
# Environment: STORAGE_ROOT (required), RUN_ID (required, new, at most 128 characters),
#   PROFILE (a profile in profiles/, default the tutorial's 2x2 A100; or a site profile, whose
#   sha256 the Driver command pins in PROFILE_SHA256: tools/verl/two-worker-grpo-profiles/
#   <name>/<sha256>.env on the volume, from make install-tools SITE=<folder>), PROBE_TIMEOUT
#   (seconds above 0, at most 86400, default 120), COLLECTIVE_PROBE (nccl, the default: NCCL on every
#   GPU node, then Gloo; gloo: Gloo alone, no GPU; off) and COLLECTIVE_TIMEOUT (seconds its
#   ranks get to meet and all-reduce, default 60), STALL_FIRST_STEP and STALL_STEP_FLOOR
#   (the training watchdog: seconds until the first step line, default 3600, or off; later
#   steps may take 5x the slowest one, never less than the floor, default 900; a stalled
#   training is stopped with its evidence in stall.json), TMPDIR (if set, a writable
#   folder), KILL_GRACE (seconds a stopped phase gets before KILL, default 10), SAVE_FREQ
#   (checkpoint every N steps, default the profile's), RESUME_FROM (the RUN_ID of a preempted
#   run to continue from its latest complete checkpoint, or auto: the newest resumable run of
#   this RUN_ID's lineage), HEARTBEAT_INTERVAL and HEARTBEAT_LEASE (seconds, default 30 and
#   120: heartbeat.json is refreshed while the launcher lives; a run without a beat for the
#   lease and without a verdict is lost, and resumable, unless its launcher is seen running on
#   its host: a heartbeat process that died alone loses no run), TRACE=1 (trace commands).
# A re-run of the same job (a platform's retry) whose run folder holds a stopped run of the
#   same profile, bundle and job identity (the Ray Jobs submission id or SLURM_JOB_ID, in
#   run.json) becomes the next attempt, RUN_ID.2, RUN_ID.3, ..., resuming the newest attempt with
#   a complete checkpoint; never while one is alive or after a SUCCESS. A folder of another job,
#   or of none, is refused (LAUNCH-E094), never adopted.
# Exit codes: 0 SUCCESS; 1 a check failed; 2 usage error or missing input; 128+N stopped by
#   signal N; otherwise the training command's status. Any failure after the run folder is
#   claimed leaves FAILED there (time, phase, exit status, signal, cause), written whole or
#   not at all; nothing is removed.
POSIXLY_CORRECT=y  # see "shell hooks" below; an assignment, so no function can stand in for it
case ${BASH_VERSION:-} in '')  # POSIX sh from here to "esac": `sh launcher` explains itself
  echo "run-two-worker-grpo-v1: (LAUNCH-E048) run by sh, not bash: bash $0 — Run it with bash (the Driver command does, from bash or sh)." >&2
  exit 2
esac
# The job environment's shell hooks never shape the launcher: it runs in a bash started with -p
# (which reads no BASH_ENV or ENV file and imports no exported function), with BASH_ENV, ENV and
# every BASH_FUNC_* removed from the environment its phases inherit; their names are recorded
# in run.json (job_environment). Started any other way, it starts itself again that way. Until
# then an imported function may shadow any builtin, so the first restart uses only what POSIX
# mode (POSIXLY_CORRECT above) puts before functions: keywords and the special builtin exec, a
# backslash keeping any alias off.
if [[ "${BASH_SOURCE[0]}" == "$0" && $- != *p* ]]; then
  \exec /usr/bin/env -u POSIXLY_CORRECT bash --noprofile --norc -p -- "${BASH_SOURCE[0]}" "$@"
fi
\unset POSIXLY_CORRECT  # ends POSIX mode: the launcher is bash from here
clean_shell() {
  local entry
  local -a hooks=()
  mapfile -d '' -t entries </proc/$$/environ || entries=()
  for entry in "${entries[@]}"; do
    case $entry in BASH_ENV=* | ENV=* | BASH_FUNC_*) hooks+=("${entry%%=*}") ;; esac
  done
  [[ $- == *p* && ${#hooks[@]} == 0 ]] && return 0
  [[ -z "${TWGRPO_CLEAN_SHELL:-}" ]] || return 0  # started once already: never loop
  local -a drop=()
  for entry in "${hooks[@]}"; do drop+=(-u "$entry"); done
  exec /usr/bin/env "${drop[@]}" TWGRPO_CLEAN_SHELL=1 TWGRPO_SHELL_HOOKS="${hooks[*]}" \
    bash --noprofile --norc -p -- "${BASH_SOURCE[0]}" "$@"
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then clean_shell "$@"; fi
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

# Pinned by `make checksums`: the sha256 of SHA256SUMS and of the bundle checker beside this file.
readonly BUNDLE_SUMS_SHA256=a7c12ead5319401e9db06354a4325fe959a9d29fb52f168bf5a3e4dab3d440e0
readonly BUNDLE_CHECK_SHA256=cc28c0499ae9ecd8c9bef6e53baf5b2ed523ec32836d4644b09e0ddca0a7e195
readonly PROG=run-two-worker-grpo-v1
readonly LAUNCHER_NAME=${BASH_SOURCE[0]##*/}
BUNDLE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly BUNDLE_DIR
readonly VERIFY="$BUNDLE_DIR/verify-two-worker-grpo-v1.py"
readonly CHECKER="$BUNDLE_DIR/check-bundle-v1.py"

# Globals. The job's environment gives STORAGE_ROOT, RUN_ID and the rest (checked in Python by
# `verify request`, which also sets the next nine); the others track the run as it goes.
PROFILE=${PROFILE:-} # a profile name in profiles/; empty: the bundle's default profile
PROFILE_NAME=""      # its name (a site profile: its installed file), for each later verifier call
RUN_DIR_PLANNED=""   # where the run folder will be, before it is claimed
KILL_GRACE=${KILL_GRACE:-10}       # seconds a phase gets between TERM and KILL (validated)
PROBE_TIMEOUT=${PROBE_TIMEOUT:-120} # seconds preflight waits for the node probes (validated)
COLLECTIVE_PROBE=${COLLECTIVE_PROBE:-nccl}  # the collective probe: nccl (then Gloo), gloo, or off
COLLECTIVE_TIMEOUT=${COLLECTIVE_TIMEOUT:-60} # seconds its ranks get to meet and all-reduce
STALL_FIRST_STEP=${STALL_FIRST_STEP:-3600}   # the training watchdog: seconds to the first step line, or off
STALL_STEP_FLOOR=${STALL_STEP_FLOOR:-900}    # and the least it waits for any later step line
RUN_DIR=""           # set once the run folder is ours
PHASE=checks         # the phase FAILED names
CHILD=""             # the running phase's process group
WATCHDOG=""          # the launcher's watchdog (a process group of its own)
SIGNAL=none          # the signal that stopped the run, for FAILED
CAUSE=""             # what FAILED says beyond phase, status and signal
WORK=""              # scratch folder: NUL-separated lists, the watchdog's state file
TEE_PID=""           # the tee that writes driver.log
TRAINING_COMMAND=()  # the training command, one word per element
HEARTBEAT=""         # the heartbeat process (a process group of its own)
ATTEMPT_NOTE=""      # what the request check decided about attempts and RESUME_FROM=auto
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the bundle, the inputs or anywhere else

verify() {  # the verifier, isolated: -I keeps cwd, PYTHONPATH and user site off sys.path
  python3 -I -B "$VERIFY" "$@"
}

die() {  # die CODE "(ID) what went wrong — what to do"
  local code=$1
  shift
  printf '%s: %s\n' "$PROG" "$*" >&2 || true
  exit "$code"
}

usage() {
  sed -n '2,/^if \[ -z/{/^if \[ -z/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

check_dependencies() {
  local cmd
  for cmd in python3 tee mkdir date ln sync; do
    command -v "$cmd" >/dev/null ||
      die 2 "(LAUNCH-E001) '$cmd' is not on PATH — Run in the verl image: bash, python3 and coreutils (tee, mkdir, date, ln, sync) must be on PATH."
  done
}

# Nothing of the bundle runs before its bytes are verified: SHA256SUMS and the checker against
# the pins above (hashed by python3 -I -S, no bundle code), then the checker (every listed file,
# every intruder, __pycache__ included), and only then the verifier.
verify_bundle() {
  local sums="$BUNDLE_DIR/SHA256SUMS" hashes
  [[ -f "$sums" ]] || die 1 "(LAUNCH-E010) $sums is missing — Install the bundle: make install-tools STORAGE_ROOT=<prep box mount>."
  hashes=$(python3 -I -S -B -c 'import hashlib, sys
for path in sys.argv[1:]:
    try:
        print(hashlib.sha256(open(path, "rb").read()).hexdigest())
    except OSError:
        print("missing")' "$sums" "$CHECKER")
  [[ "${hashes%%$'\n'*}" == "$BUNDLE_SUMS_SHA256" ]] ||
    die 1 "(LAUNCH-E011) SHA256SUMS: sha256 expected $BUNDLE_SUMS_SHA256, actual ${hashes%%$'\n'*} — The installed bundle is not the one this launcher was pinned to: reinstall it (make install-tools FORCE=1)."
  [[ "${hashes##*$'\n'}" == "$BUNDLE_CHECK_SHA256" ]] ||
    die 1 "(LAUNCH-E044) ${CHECKER##*/}: sha256 expected $BUNDLE_CHECK_SHA256, actual ${hashes##*$'\n'} — The installed bundle is not the one this launcher was pinned to: reinstall it (make install-tools) and re-copy the Driver command."
  python3 -I -S -B "$CHECKER" "$BUNDLE_DIR" "$LAUNCHER_NAME" || exit 1
}

check_request() {  # every job variable, the profile and the volume (twgrpo/checks/rules/request.py)
  local settings
  settings=$(verify request) || exit 2
  eval "$settings"  # KEY='value' lines, each value quoted by shlex
  export RUN_ID  # a retry's next attempt (<RUN_ID>.N) is decided there (checks/resume/attempt.py)
}

# --- preemption: the heartbeat (twgrpo/run/heartbeat.py) ---

start_heartbeat() {  # heartbeat.json, refreshed in a process group of its own until we end
  start_beater $$
  HEARTBEAT=$!
  local note
  while IFS= read -r note; do  # what the request check decided: attempt, RESUME_FROM=auto
    [[ -z "$note" ]] || printf '%s: %s\n' "$PROG" "$note"
  done <<<"$ATTEMPT_NOTE"
}

# The beater, in a process group of its own; $WORK/heartbeat names it (pid, start time) for the
# watchdog, which starts a new one when it dies while the launcher lives (keep_heartbeat): one
# helper process that dies never makes a live run read as lost, on any host.
start_beater() {  # start_beater LAUNCHER_PID
  set -m
  python3 -I -B "$VERIFY" heartbeat --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --launcher-pid "$1" --interval "$HEARTBEAT_INTERVAL" --lease "$HEARTBEAT_LEASE" </dev/null >/dev/null 2>&1 &
  set +m
  printf '%s %s\n' "$!" "$(start_time "$!")" >"$WORK/heartbeat"
}

keep_heartbeat() {  # keep_heartbeat LAUNCHER_PID: in the watchdog, a dead beater is replaced
  local pid started
  read -r pid started 2>/dev/null <"$WORK/heartbeat" || return 0
  [[ "$(start_time "$pid")" != "$started" ]] || return 0
  [[ ! -e "$WORK/heartbeat.stop" ]] || return 0  # checked after the death: the launcher ends it
  start_beater "$1"
  printf '%s: (LAUNCH-W001) the heartbeat process %s ended while the launcher ran; started another\n' \
    "$PROG" "$pid"
}

stop_heartbeat() {  # the beater writes state "ended" on USR1 (ours alone: it ignores TERM), then exits
  [[ -n "$HEARTBEAT" ]] || return 0
  local pid started tick
  : >"$WORK/heartbeat.stop"  # before the signal, so the watchdog never replaces the one it ends
  read -r pid started 2>/dev/null <"$WORK/heartbeat" || pid=$HEARTBEAT
  kill -USR1 "$pid" 2>/dev/null || true
  wait "$HEARTBEAT" 2>/dev/null || true  # the first beater is ours to reap; a later one the watchdog's
  for ((tick = 0; tick < 20; tick++)); do
    [[ "$(start_time "$pid")" == "$started" ]] || break
    sleep 0.5
  done
  HEARTBEAT=""
}

claim_run_folder() {
  local err
  err=$(mkdir -p -- "${RUN_DIR_PLANNED%/*}" 2>&1) ||
    die 2 "(LAUNCH-E018) cannot create ${RUN_DIR_PLANNED%/*}: $(cause "$err") — The message names the cause (no space left, name too long, permissions): fix it and start again with a new RUN_ID."
  # mkdir without -p fails if the folder exists, so two launchers cannot share one RUN_ID.
  if ! err=$(mkdir -- "$RUN_DIR_PLANNED" 2>&1); then
    [[ ! -e "$RUN_DIR_PLANNED" && ! -L "$RUN_DIR_PLANNED" ]] ||
      die 2 "(LAUNCH-E008) run folder $RUN_DIR_PLANNED already exists — Set a new RUN_ID for every run, clone or retry; a run folder is never reused."
    die 2 "(LAUNCH-E018) cannot create the run folder $RUN_DIR_PLANNED: $(cause "$err") — The message names the cause (no space left, name too long, permissions): fix it and start again with a new RUN_ID."
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
  printf '%s: (LAUNCH-E019) cannot write %s: %s — The disk is full or read-only (the message names the cause); nothing half-written is left. Free space and re-run with a new RUN_ID, or judge a finished run again with make postflight RUN_ID=...\n' \
    "$PROG" "$path" "$(cause "$err")" >&2
  return 1
}

write_failed() {  # never overwrites: a FAILED that exists keeps its first cause
  local status=$1 extra=${2:-}
  [[ -n "$RUN_DIR" && ! -e "$RUN_DIR/FAILED" && ! -e "$RUN_DIR/SUCCESS" ]] || return 0
  local where=$RUN_DIR/FAILED
  write_marker "$where" "$(printf 'time=%s\nphase=%s\nexit_status=%s\nsignal=%s\nrun_id=%s\ncause=%s\n%s' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PHASE" "$status" "$SIGNAL" "$RUN_ID" "${CAUSE:-exit status}" "$extra")" ||
    where="not recorded (LAUNCH-E019 above)"
  printf '%s: FAILED in phase %s (exit status %s, signal %s): %s\n' \
    "$PROG" "$PHASE" "$status" "$SIGNAL" "$where" >&2 || true
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
    "$PROG" "$PHASE" "$KILL_GRACE" "$signal" "$group" >&2 || true
  kill -KILL -- "-$group" 2>/dev/null || true
}

set_phase() {  # set_phase NAME [PGID]: what FAILED and the watchdog name
  PHASE=$1
  printf '%s %s\n' "$PHASE" "${2:--}" >"$WORK/state"
}

# A KILL runs no trap, so the launcher has a watchdog in a process group of its own (a KILL of
# the launcher's group does not reach it) from the claim of the run folder to its verdict. Once
# the launcher is gone without SUCCESS or FAILED, in a phase or between two, it writes FAILED
# (ended_without_verdict=1, the phase from the state file) and stops the running phase's group.
start_watchdog() {
  local started
  started=$(start_time "$$")
  set -m
  watch_launcher "$$" "$started" &
  WATCHDOG=$!
  set +m
}

watch_launcher() {  # watch_launcher PID START_TIME: the watchdog's body, in its own group
  local launcher=$1 started=$2 phase=unknown group=-
  trap - TERM INT EXIT PIPE
  exec >>"$RUN_DIR/driver.log" 2>&1 || exec >/dev/null 2>&1  # never the pipe to tee
  while [[ "$(start_time "$launcher")" == "$started" ]]; do
    keep_heartbeat "$launcher"
    sleep 0.5
  done
  read -r phase group <"$WORK/state" || true
  PHASE=$phase SIGNAL=unknown
  CAUSE="ended without a verdict: the launcher (pid $launcher) ended in phase $PHASE without writing SUCCESS or FAILED (killed, e.g. SIGKILL); its watchdog wrote this"
  [[ "$group" == - ]] || CAUSE+="; the watchdog stopped the phase's process group $group"
  if [[ ! -e "$RUN_DIR/FAILED" && ! -e "$RUN_DIR/SUCCESS" ]]; then
    printf '%s: (LAUNCH-E020) %s\n' "$PROG" "$CAUSE"
    write_failed unknown "ended_without_verdict=1"$'\n' 2>&1
  fi
  [[ "$group" == - ]] || stop_group TERM "$group"
  rm -rf -- "$WORK"
  exit 0
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

# A signal's word is kept: further TERM, INT and PIPE are ignored while FAILED is written (first,
# before any output: a preempted machine may not live long), then the phase's group is stopped.
on_signal() {  # on_signal NAME NUMBER
  trap '' TERM INT PIPE
  SIGNAL=$1
  write_failed $((128 + $2)) || true
  if [[ -n "$CHILD" ]]; then
    stop_group "${1/PIPE/TERM}" "$CHILD"
  fi
  exit $((128 + $2))
}

on_exit() {
  local status=$?
  trap - EXIT
  trap '' PIPE
  if ((status != 0)); then
    # a check failed (status 1): FAILED names the failed checks and their ids, not "exit status"
    [[ -n "$CAUSE" || "$status" != 1 || -z "$RUN_DIR" ]] ||
      CAUSE=$(verify failed-checks --run-dir "$RUN_DIR" 2>/dev/null) || CAUSE=""
    write_failed "$status" || true
  fi
  stop_heartbeat
  stop_watchdog
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  if [[ -n "$TEE_PID" ]]; then  # let tee write the last lines of driver.log
    exec 1>&- 2>&-
    wait "$TEE_PID" 2>/dev/null || true
  fi
  exit "$status"
}

start_logging() {  # tee ignores TERM and INT: a TERM to the whole process group cannot end it first
  exec > >(trap '' TERM INT && exec tee -a "$RUN_DIR/driver.log") 2>&1
  TEE_PID=$!
  printf '%s: run %s, profile %s, storage %s, RAY_ADDRESS=%s, bundle %s\n' "$PROG" "$RUN_ID" \
    "$PROFILE_NAME" "$STORAGE_ROOT" "${RAY_ADDRESS:-auto}" "$BUNDLE_DIR"
}

# Runs "$@" as its own process group in the background, so that a TERM or INT reaches the
# trap at once (bash defers traps while a foreground command runs) and is forwarded to it all.
run_phase() {
  local name=$1 status=0 started=$SECONDS
  shift
  set_phase "$name"
  printf '%s: phase %s started %s\n' "$PROG" "$PHASE" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  set -m
  "$@" &
  CHILD=$!
  set +m
  set_phase "$name" "$CHILD"
  wait "$CHILD" || status=$?
  # Nothing of a phase outlives it: when a signal ended the phase's own shell alone, its
  # commands (the training, tee, the watcher) still run in its group; they are stopped as a
  # signal to the launcher stops them, so the launcher never waits on an orphaned training.
  if ((status > 128)) && kill -0 -- "-$CHILD" 2>/dev/null; then
    printf '%s: (LAUNCH-E022) phase %s ended by signal %s while its process group %s still ran: stopping the group\n' \
      "$PROG" "$PHASE" $((status - 128)) "$CHILD" >&2
  fi
  stop_group TERM "$CHILD"
  CHILD=""
  set_phase "$name"
  printf '%s: phase %s ended with status %s after %s s\n' "$PROG" "$PHASE" "$status" $((SECONDS - started))
  return "$status"
}

export_environment() {
  verify env --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/env" ||
    die 2 "(LAUNCH-E009) cannot build the run environment (see above)"
  local -a assignments
  local kv
  mapfile -d '' -t assignments <"$WORK/env"
  for kv in "${assignments[@]}"; do
    export "${kv?}"
    printf 'export %q\n' "$kv"
  done
}

train_and_log() {  # the training command, teed to training.log; exits with its status
  set +m
  # The training watchdog shares this phase's process group: it ends once the rest of the
  # group has, or stops the group when no step line comes in time (twgrpo/checks/watch/stall.py).
  # (An if, not `test || cmd &`: that would leave a subshell between the group and the watcher.)
  if [[ "$STALL_FIRST_STEP" != off ]]; then
    python3 -I -B "$VERIFY" watch-training --run-dir "$RUN_DIR" --first-step-seconds "$STALL_FIRST_STEP" \
      --stall-floor "$STALL_STEP_FLOOR" --kill-grace "$KILL_GRACE" </dev/null &
  fi
  "${TRAINING_COMMAND[@]}" 2>&1 | tee -a "$RUN_DIR/training.log"
  exit "${PIPESTATUS[0]}"
}

training_failed() {  # training_failed STATUS: FAILED says so when the training watchdog stopped it
  [[ ! -e "$RUN_DIR/stall.json" ]] ||
    CAUSE="(POST-E129) the training watchdog stopped a stalled training (no step line in time); evidence in $RUN_DIR/stall.json"
  exit "$1"
}

main() {
  case "${1:-}" in
    -h | --help) usage; return 0 ;;
    --verify-bundle) check_dependencies; verify_bundle; echo "$PROG: bundle $BUNDLE_DIR verified"; return 0 ;;
    "") ;;
    *) die 2 "(LAUNCH-E000) unknown argument '$1' — Run the launcher with no arguments (the job's environment carries its settings), or --help, or --verify-bundle." ;;
  esac
  check_dependencies
  verify_bundle
  check_request
  trap on_exit EXIT
  trap 'on_signal TERM 15' TERM
  trap 'on_signal INT 2' INT
  trap 'on_signal PIPE 13' PIPE
  claim_run_folder
  start_logging
  set_phase record
  start_watchdog
  start_heartbeat

  verify record-run --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" \
    --bundle-sums-sha256 "$BUNDLE_SUMS_SHA256" --launcher "${BASH_SOURCE[0]}" ${SAVE_FREQ:+--save-freq "$SAVE_FREQ"}
  if [[ -n "${RESUME_FROM:-}" ]]; then  # the earlier run and its checkpoint, before any GPU time
    run_phase resume python3 -I -B "$VERIFY" resume --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" \
      --run-id "$RUN_ID" --resume-from "$RESUME_FROM"
  fi

  run_phase inputs python3 -I -B "$VERIFY" inputs --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" \
    --output-dir "$RUN_DIR"

  set_phase environment
  export_environment

  run_phase preflight python3 -I -B "$VERIFY" preflight --profile "$PROFILE_NAME" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR" --storage-root "$STORAGE_ROOT" --probe-timeout "$PROBE_TIMEOUT" \
    --collective "$COLLECTIVE_PROBE" --collective-timeout "$COLLECTIVE_TIMEOUT"

  set_phase training
  verify command --profile "$PROFILE_NAME" --storage-root "$STORAGE_ROOT" --run-id "$RUN_ID" >"$WORK/command" ||
    die 2 "(LAUNCH-E009) cannot build the training command (see above)"
  mapfile -d '' -t TRAINING_COMMAND <"$WORK/command"
  local resolved
  resolved=$(printf '%q ' "${TRAINING_COMMAND[@]}")
  write_marker "$RUN_DIR/resolved-command.txt" "$resolved"$'\n' ||
    die 1 "(LAUNCH-E019) the training command could not be recorded (see above), so the run could not be judged afterwards"
  printf 'Executing: %s\n' "$resolved"
  mkdir -p "$RUN_DIR/nccl-flight"  # NCCL's flight-recorder dumps, per rank, on a collective timeout
  run_phase training train_and_log || training_failed "$?"

  run_phase postflight python3 -I -B "$VERIFY" postflight --profile "$PROFILE_NAME" --run-id "$RUN_ID" \
    --output-dir "$RUN_DIR" --fan-out
  [[ -s "$RUN_DIR/SUCCESS" ]] ||
    die 1 "(LAUNCH-E013) postflight passed but wrote no SUCCESS in $RUN_DIR — This is a bug; verification.json holds the verdict."
  printf '%s: SUCCESS %s (verification: %s/verification.json)\n' "$PROG" "$RUN_ID" "$RUN_DIR"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
