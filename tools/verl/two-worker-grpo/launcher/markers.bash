# shellcheck shell=bash disable=SC2154,SC2034
# Summary: The run folder's claim and the markers written whole or not at all (FAILED, records).
# Sourced by run-two-worker-grpo-v1.sh, only after it has checked this file's sha256 (SHA256SUMS);
# never run on its own. It defines functions alone; the globals they read and set are the
# launcher's (SC2154 and SC2034 off for them: shellcheck -x on the launcher sees both).

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
