#!/usr/bin/env bash
# Summary: Your own run for real on one GPU: a site profile outside the bundle, data made from CSV
#   by the docs' converter, a reward function that scores, validation before training and at
#   every step, two epochs, a replaced and an appended Hydra override, labels and (when the image
#   has wandb) W&B offline, through the pasted Driver command to postflight.
# Usage: dev/smoke-recipe.sh [SMOKE_ROOT]
#
# Needs what dev/smoke.sh needs (one NVIDIA GPU, the smoke environment, verl 0.6.0's wheel).
# The site profile smoke-recipe (SMOKE_ROOT/site/) is smoke-1x1 with its own dataset
# (DATA_CONVERTER=converters/csv_to_verl.py over arithmetic CSV files), REWARD_FILE=rewards/
# arith.py, TEST_FREQ=1, VAL_BEFORE_TRAIN=true, TOTAL_EPOCHS=2 of one batch each (TARGET_STEPS=
# auto), ROLLOUT_MAX_NUM_SEQS=8, labels
# and EXTRA_OVERRIDES; prepare-inputs converts the data, pin-inputs pins data, converter and
# reward into it, and it is installed on the volume under its sha256 (the bundle is untouched).
# Prints the verdict, the rewards the rollouts scored, the validation evidence postflight
# recorded and the resolved command's recipe words.
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

# The reward: 1 for the right number in the answer, else a little for each digit written (a tiny
# random model writes some), so the rollouts' scores are visibly not all zero.
readonly REWARD='def score(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth.strip() and ground_truth.strip() in solution_str:
        return 1.0
    return min(sum(c.isdigit() for c in solution_str), 10) / 20.0
'

recipe_profile() {  # the profile's text on stdout: smoke-1x1 with its own data and reward, unpinned
  local loggers=console,tensorboard
  python3 -c 'import wandb' 2>/dev/null && loggers=console,tensorboard,wandb
  sed -e "s/^PROFILE_NAME=.*/PROFILE_NAME=$RECIPE/" -e 's/^DATASET_ID=.*/DATASET_ID=smoke\/arith/' \
    -e 's/^DATASET_REVISION=.*/DATASET_REVISION=v1/' -e '/^\(TRAIN_ROWS\|TEST_ROWS\|DATA_SUMS_SHA256\|TARGET_STEPS\)=/d' \
    "$REPO/tools/verl/two-worker-grpo/profiles/smoke-1x1.env"
  printf '%s\n' TEST_FREQ=1 VAL_BEFORE_TRAIN=true TOTAL_EPOCHS=2 TARGET_STEPS=auto ROLLOUT_MAX_NUM_SEQS=8 \
    "LOGGERS=$loggers" DATA_CONVERTER=converters/csv_to_verl.py REWARD_FILE=rewards/arith.py \
    REWARD_FUNCTION=score PROJECT_NAME=smoke-recipe EXPERIMENT_NAME=arith \
    "EXTRA_OVERRIDES=data.shuffle=true trainer.log_val_generations=2"
}

site_profile() {  # site_profile STORAGE: data, converter, reward and the pinned, installed profile
  local storage=$1 site=$SMOKE_ROOT/site csv=$SMOKE_ROOT/arith-csv
  mkdir -p "$site" "$csv" "$storage/converters" "$storage/rewards"
  cp "$REPO/docs/examples/csv_to_verl.py" "$storage/converters/"
  printf '%s' "$REWARD" >"$storage/rewards/arith.py"
  python3 - "$csv" <<'PY'
import random, sys
rng = random.Random(7)
for split, rows in (("train", 4), ("test", 8)):  # one batch an epoch: TARGET_STEPS=auto is 2
    with open(f"{sys.argv[1]}/{split}.csv", "w") as out:
        out.write("question,answer\n")
        for _ in range(rows):
            a, b = rng.randint(2, 60), rng.randint(2, 40)
            out.write(f'"Sam has {a} apples and buys {b} more. How many apples does Sam have?",{a + b}\n')
PY
  recipe_profile >"$site/$RECIPE.env"
  python3 "$REPO/prep/prepare-inputs.py" prepare --prep-root "$storage" --profile "$site/$RECIPE.env" \
    --data-source "$csv"
  python3 "$REPO/prep/prepare-inputs.py" pin --prep-root "$storage" --profile "$site/$RECIPE.env"
  python3 -c 'import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tools/verl/two-worker-grpo"]
from pathlib import Path
from prep import site
raise SystemExit(site.install(Path(sys.argv[2]), Path(sys.argv[3])))' "$REPO" "$storage" "$site"
}

export_recipe_env() {  # the RuntimeEnv of smoke-recipe (W&B offline when it logs there)
  local storage=$1 kv
  export_runtime_env "$storage"
  while IFS= read -r -d '' kv; do
    export "${kv?}"
  done < <(python3 - "$storage" "$SMOKE_ROOT/site/$RECIPE.env" <<'PY'
import json, subprocess, sys
storage, profile = sys.argv[1], sys.argv[2]
out = subprocess.run([sys.executable, f"{storage}/tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py",
                      "runtime-env", "--profile", profile, "--storage-root", storage],
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
  python3 "$REPO/prep/bundle.py" install "$bundle" --force
  site_profile "$storage"
  export_recipe_env "$storage"
  trap stop_ray_head EXIT
  start_ray_head "$SMOKE_ROOT/ray-head.log" --num-gpus=1 ||
    die 2 "cannot start a Ray head (see $SMOKE_ROOT/ray-head.log) — is another Ray running here?"
  bash -c "$(pasted_command "$storage" "$SMOKE_ROOT/site/$RECIPE.env" "$run_id" \
    --launcher "$bundle/run-two-worker-grpo-v1.sh")" || status=$?
  stop_ray_head
  local run=$storage/runs/verl/two-worker-grpo/$run_id
  printf '\n%s: run %s: %s\n' "$PROG" "$run_id" "$( [[ -s $run/SUCCESS ]] && echo SUCCESS || echo "FAILED (exit $status)")"
  python3 - "$run" <<'PY'
import json, shlex, sys
from pathlib import Path
run = Path(sys.argv[1])
scores = [json.loads(line).get("score") for f in sorted((run / "rollouts").glob("*.jsonl"))
          for line in f.read_text().splitlines() if line.strip()]
scores = [s for s in scores if isinstance(s, (int, float))]
print(f"rollout rewards: {len(scores)} scored, {sum(1 for s in scores if s)} non-zero, "
      f"mean {sum(scores) / max(len(scores), 1):.3f}, max {max(scores, default=0):.2f}")
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
    "trainer.total_epochs", "trainer.logger", "actor_rollout_ref.rollout.max_num_seqs",
    "custom_reward_function.path", "custom_reward_function.name", "trainer.project_name")))
print("wandb folder:", sorted(p.name for p in (run / "wandb").iterdir())[:5] if (run / "wandb").is_dir() else "none")
PY
  phase_times "$run/driver.log"
  return "$status"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
