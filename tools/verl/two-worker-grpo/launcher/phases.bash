# shellcheck shell=bash disable=SC2154,SC2034
# Summary: Each phase in a process group of its own; signals, exit, the log and the training.
# Sourced by run-two-worker-grpo-v1.sh, only after it has checked this file's sha256 (SHA256SUMS);
# never run on its own. It defines functions alone; the globals they read and set are the
# launcher's (SC2154 and SC2034 off for them: shellcheck -x on the launcher sees both).

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
