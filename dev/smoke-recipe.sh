#!/usr/bin/env bash
# Summary: The open recipe for real on one GPU: the smoke run with validation before training and
#   at every step, two epochs, a replaced and an appended Hydra override, other rollout limits and
#   (when the image has wandb) W&B offline, through the pasted Driver command to postflight.
# Usage: dev/smoke-recipe.sh [SMOKE_ROOT]
#
# Needs what dev/smoke.sh needs (one NVIDIA GPU, the verl image's packages, verl 0.6.0's wheel).
# The profile smoke-recipe is smoke-1x1 with TEST_FREQ=1, VAL_BEFORE_TRAIN=true, TOTAL_EPOCHS=2,
# ROLLOUT_MAX_NUM_SEQS=8 and EXTRA_OVERRIDES; it is installed with the bundle into SMOKE_ROOT
# only (the repo's profiles are untouched). Prints the verdict, the validation evidence
# postflight recorded and the resolved command's recipe words.
# Exit codes: 0 SUCCESS; 2 this machine cannot run it; otherwise the launcher's exit code.
set -euo pipefail
if [[ "${TRACE:-}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE[0]##*/}:${LINENO}:${FUNCNAME[0]:-main}: '
  set -x
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=dev/smoke.sh
source "$HERE/smoke.sh"  # its helpers: check_machine, find_wheel, start_ray_head, ...
readonly RECIPE=smoke-recipe

recipe_profile() {  # the profile's text on stdout
  local loggers=console,tensorboard
  python3 -c 'import wandb' 2>/dev/null && loggers=console,tensorboard,wandb
  sed -e "s/^PROFILE_NAME=.*/PROFILE_NAME=$RECIPE/" "$REPO/tools/verl/two-worker-grpo/profiles/smoke-1x1.env"
  printf '%s\n' TEST_FREQ=1 VAL_BEFORE_TRAIN=true TOTAL_EPOCHS=2 ROLLOUT_MAX_NUM_SEQS=8 \
    "LOGGERS=$loggers" \
    "EXTRA_OVERRIDES=data.shuffle=true trainer.log_val_generations=2"
}

install_with_recipe() {  # install_with_recipe BUNDLE_DIR: the bundle plus smoke-recipe, re-hashed
  recipe_profile >"$SMOKE_ROOT/$RECIPE.env"
  python3 - "$REPO" "$1" "$SMOKE_ROOT/$RECIPE.env" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from dev.sandbox import install_sandbox
install_sandbox(Path(sys.argv[2]), {"smoke-recipe": Path(sys.argv[3]).read_text()})
PY
}

export_recipe_env() {  # the RuntimeEnv of smoke-recipe (W&B offline when it logs there)
  local storage=$1 kv
  export_runtime_env "$storage"
  while IFS= read -r -d '' kv; do
    export "${kv?}"
  done < <(python3 - "$storage" <<'PY'
import json, subprocess, sys
storage = sys.argv[1]
out = subprocess.run([sys.executable, f"{storage}/tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py",
                      "runtime-env", "--profile", "smoke-recipe", "--storage-root", storage],
                     capture_output=True, text=True, check=True).stdout
for key in ("WANDB_MODE",):
    sys.stdout.write(f"{key}={json.loads(out)['env_vars'][key]}\0")
PY
  )
}

main() {
  SMOKE_ROOT=${1:-${SMOKE_ROOT:-$REPO/.smoke}}
  check_machine
  check_root
  local storage=$SMOKE_ROOT/storage run_id wheel status=0 bundle
  bundle=$storage/tools/verl/two-worker-grpo
  run_id=recipe-$(date -u +%Y%m%dT%H%M%SZ)-$$
  wheel=$(find_wheel)
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$storage" --profile "$PROFILE" --verl-wheel "$wheel"
  install_with_recipe "$bundle"
  export_recipe_env "$storage"
  trap stop_ray_head EXIT
  start_ray_head "$SMOKE_ROOT/ray-head.log" --num-gpus=1 ||
    die 2 "cannot start a Ray head (see $SMOKE_ROOT/ray-head.log) — is another Ray running here?"
  bash -c "$(pasted_command "$storage" "$RECIPE" "$run_id" --launcher "$bundle/run-two-worker-grpo-v1.sh")" || status=$?
  stop_ray_head
  local run=$storage/runs/verl/two-worker-grpo/$run_id
  printf '\n%s: run %s: %s\n' "$PROG" "$run_id" "$( [[ -s $run/SUCCESS ]] && echo SUCCESS || echo "FAILED (exit $status)")"
  python3 - "$run" <<'PY'
import json, shlex, sys
from pathlib import Path
run = Path(sys.argv[1])
try:
    record = json.loads((run / "verification.json").read_text())
    print("validation evidence:", json.dumps(record["evidence"].get("validation"), sort_keys=True))
    for check in record["checks"]:
        for f in check["findings"]:
            print(f"finding: {check['name']}: ({f['id']}) {f['message']}")
except (OSError, ValueError, KeyError) as exc:
    print(f"no verification.json: {exc}")
words = shlex.split((run / "resolved-command.txt").read_text()) if (run / "resolved-command.txt").is_file() else []
print("recipe words:", " ".join(w for w in words if w.split("=")[0].lstrip("+") in (
    "data.shuffle", "trainer.log_val_generations", "trainer.test_freq", "trainer.val_before_train",
    "trainer.total_epochs", "trainer.logger", "actor_rollout_ref.rollout.max_num_seqs")))
print("wandb folder:", sorted(p.name for p in (run / "wandb").iterdir())[:5] if (run / "wandb").is_dir() else "none")
PY
  phase_times "$run/driver.log"
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
