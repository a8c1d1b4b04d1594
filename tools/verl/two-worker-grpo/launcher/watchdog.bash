# shellcheck shell=bash disable=SC2154,SC2034
# Summary: The launcher's watchdog (FAILED after a KILL) and heartbeat (run/heartbeat.py).
# Sourced by run-two-worker-grpo-v1.sh, only after it has checked this file's sha256 (SHA256SUMS);
# never run on its own. It defines functions alone; the globals they read and set are the
# launcher's (SC2154 and SC2034 off for them: shellcheck -x on the launcher sees both).

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
