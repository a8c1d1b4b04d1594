#!/usr/bin/env bash
# Summary: The bundle's main job, for real on one GPU: generated inputs, a local Ray head, the
#   pasted Driver command, verl GRPO for 2 steps, postflight, SUCCESS.
# Usage: dev/smoke.sh [SMOKE_ROOT]        (make smoke [SMOKE_ROOT=DIR])
#
# Needs one NVIDIA GPU (nvidia-smi) and a python3 with a CUDA torch; the rest of verl 0.6.0's
# packages come from python3 itself when it has them (the verl image), else from a venv built
# from dev/smokeenv/lock.txt (.smoke-env/; WHEELHOUSE=<dir> installs offline). The verl 0.6.0
# wheel: SMOKE_VERL_WHEEL, else .whl/ or WHEELHOUSE's, else `pip download` fetches it. SMOKE_ROOT (default
# .smoke/ in the repo) must not be an overlay mount. Each run gets a new RUN_ID and keeps the
# runs before it. The Ray head it starts is stopped afterwards, by process group.
# Exit codes: 0 SUCCESS; 2 this machine cannot run it (no GPU, missing package); otherwise
# the launcher's exit code (1 a check failed).
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

readonly PROG=smoke
readonly PROFILE=smoke-1x1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO
readonly VERL_WHEEL_NAME=verl-0.6.0-py3-none-any.whl
readonly VERL_WHEEL_SHA256=2666528b8ab4494e2ac40c282a99281296c2d9dc9675ceac6bea8d41fb69b321  # PyPI's
# shellcheck source=dev/ray-head.bash
source "$REPO/dev/ray-head.bash"

die() {
  local code=$1
  shift
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit "$code"
}

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# What make driver-command prints for the smoke root's flat install (not a version folder).
pasted_command() {  # pasted_command STORAGE PROFILE RUN_ID [driver-command options...]
  local storage=$1 profile=$2 run_id=$3
  shift 3
  python3 "$REPO/prep/bundle.py" driver-command "$storage" --profile "$profile" --run-id "$run_id" \
    --bundle-dir tools/verl/two-worker-grpo "$@"
}

# make smoke's Python first on PATH: python3 itself when it has a working stack (the verl image),
# else the venv dev/smoke-env.py builds from dev/smokeenv/lock.txt (WHEELHOUSE=<dir>: offline).
# It checks the GPU, the driver and torch first; any reason this machine cannot run is exit 2.
use_smoke_env() {
  [[ "${TWGRPO_SMOKE_ENV:-}" == ready ]] && return 0
  local bin
  local python=${SMOKE_PYTHON:-python3}
  bin=$("$python" "$REPO/dev/smoke-env.py" ensure --python "$(command -v "$python")" \
    ${WHEELHOUSE:+--wheelhouse "$WHEELHOUSE"} ${SMOKE_ENV:+--env "$SMOKE_ENV"}) || exit "$?"
  export PATH="${bin##*$'\n'}:$PATH" TWGRPO_SMOKE_ENV=ready
}

check_machine() {
  use_smoke_env
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die 2 "torch does not see a CUDA GPU — check the driver and CUDA_VISIBLE_DEVICES"
  command -v ray >/dev/null || die 2 "the ray command is not on PATH — put ray's bin folder on PATH"
}

find_wheel() {
  local wheel=${SMOKE_VERL_WHEEL:-$REPO/.whl/$VERL_WHEEL_NAME} folder folders=()
  if [[ ! -f "$wheel" && -z "${SMOKE_VERL_WHEEL:-}" ]]; then
    IFS=: read -ra folders <<<"${WHEELHOUSE:-}"
    for folder in "${folders[@]}"; do
      if [[ -f "$folder/$VERL_WHEEL_NAME" ]]; then wheel=$folder/$VERL_WHEEL_NAME; fi
    done
    if [[ -f "$wheel" ]]; then  # kept in .whl/, so later runs need no WHEELHOUSE
      mkdir -p "$REPO/.whl" && cp "$wheel" "$REPO/.whl/$VERL_WHEEL_NAME.part" &&
        mv "$REPO/.whl/$VERL_WHEEL_NAME.part" "$REPO/.whl/$VERL_WHEEL_NAME"
    fi
  fi
  if [[ ! -f "$wheel" ]]; then
    wheel=$SMOKE_ROOT/wheels/$VERL_WHEEL_NAME
    [[ -f "$wheel" ]] || python3 -m pip download -q --no-deps -d "$SMOKE_ROOT/wheels" verl==0.6.0 ||
      die 2 "cannot get $VERL_WHEEL_NAME (no network?) — set SMOKE_VERL_WHEEL=/path/to/$VERL_WHEEL_NAME"
  fi
  local actual
  actual=$(sha256sum "$wheel")
  [[ "${actual%% *}" == "$VERL_WHEEL_SHA256" ]] ||
    die 2 "$wheel: sha256 expected $VERL_WHEEL_SHA256, actual ${actual%% *} — use PyPI's verl 0.6.0 wheel"
  printf '%s\n' "$wheel"
}

check_root() {
  mkdir -p "$SMOKE_ROOT"
  local fstype
  fstype=$(PYTHONPATH="$REPO/tools/verl/two-worker-grpo" python3 -c 'import sys; from twgrpo.run.mounts import mount_for; m = mount_for(sys.argv[1]); print(m["fstype"] if m else "")' \
    "$SMOKE_ROOT")
  [[ "$fstype" != overlay ]] ||
    die 2 "SMOKE_ROOT $SMOKE_ROOT is on an overlay mount, which the inputs check refuses for storage — set SMOKE_ROOT to a real filesystem, e.g. make smoke SMOKE_ROOT=/dev/shm/two-worker-grpo-smoke"
}

# The RuntimeEnv a managed cluster would apply to every node, applied here to the one node.
export_runtime_env() {
  local storage=$1 kv caller_path=${PYTHONPATH:-}
  while IFS= read -r -d '' kv; do
    export "${kv?}"
  done < <(python3 - "$REPO" "$storage" <<'EOF'
import json, subprocess, sys
repo, storage = sys.argv[1], sys.argv[2]
out = subprocess.run([sys.executable, f"{repo}/tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py",
                      "runtime-env", "--profile", "smoke-1x1", "--storage-root", storage],
                     capture_output=True, text=True, check=True).stdout
for key, value in json.loads(out)["env_vars"].items():
    sys.stdout.write(f"{key}={value}\0")
EOF
  )
  # The RuntimeEnv's path (the pinned verl, then the HF-generate rollout adapter), then whatever
  # the caller had on the path (packages the image lacks, for instance).
  export PYTHONPATH="$PYTHONPATH${caller_path:+:$caller_path}"
  # Never use NVLink multicast (NVLS): it is not needed and can wedge shared GPU hosts.
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
}

phase_times() {  # one line per launcher phase, from driver.log
  sed -n 's/^run-two-worker-grpo-v1: phase \([a-z]*\) ended with status \([0-9]*\) after \([0-9]*\) s$/  \1: \3 s (status \2)/p' "$1"
}

main() {
  SMOKE_ROOT=${1:-${SMOKE_ROOT:-$REPO/.smoke}}
  check_machine
  check_root
  local storage=$SMOKE_ROOT/storage run_id t0 t1 t2 t3 t4 status=0 wheel
  run_id=smoke-$(date -u +%Y%m%dT%H%M%SZ)-$$
  wheel=$(find_wheel)
  t0=$(now)
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$storage" --profile "$PROFILE" --verl-wheel "$wheel"
  t1=$(now)
  # The smoke root is this checkout's scratch space: its bundle copy follows the checkout.
  python3 "$REPO/prep/bundle.py" install "$storage/tools/verl/two-worker-grpo" --force
  export_runtime_env "$storage"
  trap stop_ray_head EXIT
  start_ray_head "$SMOKE_ROOT/ray-head.log" --num-gpus=1 ||
    die 2 "cannot start a Ray head (see $SMOKE_ROOT/ray-head.log) — is another Ray running here?"
  t2=$(now)
  bash -c "$(pasted_command "$storage" "$PROFILE" "$run_id")" || status=$?
  t3=$(now)
  stop_ray_head
  t4=$(now)
  local run=$storage/runs/verl/two-worker-grpo/$run_id
  printf '\n%s: run %s: %s\n' "$PROG" "$run_id" "$( [[ -s $run/SUCCESS ]] && echo SUCCESS || echo "FAILED (exit $status)")"
  printf '%s: wall times (s): inputs generated %s, Ray head up %s, launcher %s, Ray stopped %s\n' "$PROG" \
    "$(elapsed "$t0" "$t1")" "$(elapsed "$t1" "$t2")" "$(elapsed "$t2" "$t3")" "$(elapsed "$t3" "$t4")"
  phase_times "$run/driver.log"
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
