#!/usr/bin/env bash
# Summary: Run one verified verl GRPO job on an existing Ray cluster and leave SUCCESS or FAILED.
# Usage: STORAGE_ROOT=/mnt/verl-reproduction RUN_ID=exp-001 [PROFILE=name] run-two-worker-grpo-v1.sh
#        run-two-worker-grpo-v1.sh --verify-bundle | --help
#
# Verifies this bundle before any of its Python runs (SHA256SUMS and check-bundle-v1.py against
# the pins below, then every listed file and every intruder, __pycache__ included; only then
# are its parts, launcher/*.bash, sourced), then the run request (verify request: every job
# variable, the profile, the volume); claims
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
readonly BUNDLE_SUMS_SHA256=3b21de76fe98f7a32744dc082af97141ed0f39e7ca97f22c2c49a65d2100aa7b
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

usage() {  # the header comment: from line 2 to the first line that is not a comment
  sed -n '2,/^[^#]/{/^[^#]/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
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
# every intruder, __pycache__ included), and only then the launcher's parts and the verifier.
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

# The launcher's parts: its run folder and markers, its watchdog and heartbeat, its phases.
# Sourced only after verify_bundle has checked their bytes, like every other file of the bundle.
load_parts() {
  # shellcheck source=tools/verl/two-worker-grpo/launcher/markers.bash
  source "$BUNDLE_DIR/launcher/markers.bash"
  # shellcheck source=tools/verl/two-worker-grpo/launcher/watchdog.bash
  source "$BUNDLE_DIR/launcher/watchdog.bash"
  # shellcheck source=tools/verl/two-worker-grpo/launcher/phases.bash
  source "$BUNDLE_DIR/launcher/phases.bash"
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
  load_parts
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

  # The run folder alone: the profile is the one run.json recorded, as make postflight reads it.
  run_phase postflight python3 -I -B "$VERIFY" postflight --output-dir "$RUN_DIR" --fan-out
  [[ -s "$RUN_DIR/SUCCESS" ]] ||
    die 1 "(LAUNCH-E013) postflight passed but wrote no SUCCESS in $RUN_DIR — This is a bug; verification.json holds the verdict."
  printf '%s: SUCCESS %s (verification: %s/verification.json)\n' "$PROG" "$RUN_ID" "$RUN_DIR"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
else  # sourced, to call one function (the tests do): its parts come with it, as unverified as it
  load_parts
fi
