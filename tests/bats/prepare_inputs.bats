#!/usr/bin/env bats
# make prepare-inputs and pin-inputs, offline: a local git repo as the verl origin, a model
# folder and GSM8K-format jsonl as sources. Then checksums and verify-inputs pass on them.

load test_helper

setup_file() {
  sandbox
  export SOURCES=$BATS_FILE_TMPDIR/sources
  mkdir -p "$SOURCES/gsm8k"
  # verl's origin: a git repository with one commit
  cp -r "$REPO/tests/fixtures/verl-standin" "$SOURCES/verl-origin"
  git -C "$SOURCES/verl-origin" init -q
  git -C "$SOURCES/verl-origin" add -A
  GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t \
    git -C "$SOURCES/verl-origin" commit -q -m "verl at some commit"
  export VERL_COMMIT_PINNED
  VERL_COMMIT_PINNED=$(git -C "$SOURCES/verl-origin" rev-parse HEAD)
  # a model folder, as a hub snapshot would leave it
  python3 "$REPO/dev/generate-inputs.py" --storage-root "$BATS_FILE_TMPDIR/gen" --profile smoke-1x1 \
    --verl-source "$REPO/tests/fixtures/verl-standin" --unpinned >/dev/null
  cp -r "$BATS_FILE_TMPDIR"/gen/models/generated/two-worker-grpo/tiny-qwen2/v1 "$SOURCES/model"
  rm "$SOURCES/model/SHA256SUMS"
  # GSM8K's main config as jsonl, with a thousands separator in one answer
  python3 - "$SOURCES/gsm8k" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for split, n in (("train", 30), ("test", 10)):
    rows = [{"question": f"{split} question {i}: how many?", "answer": f"Work {i}.\n#### {i * 1000:,}"}
            for i in range(n)]
    (out / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
PY
}

setup() {
  sandbox
  copy_repo "$BATS_TEST_TMPDIR/repo"
  export REPO_COPY=$BATS_TEST_TMPDIR/repo VOL=$BATS_TEST_TMPDIR/vol
  mkdir -p "$VOL"
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  sed -e 's/^PROFILE_NAME=.*/PROFILE_NAME=prep-test/' -e "s/^VERL_COMMIT=.*/VERL_COMMIT=$VERL_COMMIT_PINNED/" \
    -e 's/^TRAIN_ROWS=.*/TRAIN_ROWS=30/' -e 's/^TEST_ROWS=.*/TEST_ROWS=10/' \
    "$profiles/tutorial-2x2-a100.env" >"$profiles/prep-test.env"
}

prepare() {  # prepare [extra make arguments]
  run make -s -C "$REPO_COPY" prepare-inputs PREP_ROOT="$VOL" PROFILE=prep-test \
    VERL_MIRROR="$SOURCES/verl-origin" MODEL_SOURCE="$SOURCES/model" GSM8K_SOURCE="$SOURCES/gsm8k" "$@"
}

data_dir() {
  echo "$VOL/datasets/huggingface/openai/gsm8k/740312add88f781978c0658806c59bc2815b9866/processed/verl-v0.6.0-v1"
}

model_dir() {
  echo "$VOL/models/modelscope/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03"
}

@test "prepare-inputs, pin-inputs and checksums make verify-inputs pass on what was prepared" {
  prepare
  assert_success
  assert_line --partial "prepare-inputs: verl: written, tree manifest $VERL_COMMIT_PINNED.SHA256SUMS"
  assert_file_exist "$VOL/code/verl/$VERL_COMMIT_PINNED.SHA256SUMS"
  assert_line "prepare-inputs: model: written"
  assert_line "prepare-inputs: data: train: 30 rows converted"
  assert_equal "$(git -C "$VOL/code/verl/$VERL_COMMIT_PINNED" rev-parse HEAD)" "$VERL_COMMIT_PINNED"
  # freshly prepared bytes are not the tutorial's: the pins must be renewed on purpose
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=prep-test
  assert_failure
  assert_output --partial "(INP-E007) "
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=prep-test NAME=local
  assert_success
  assert_output --partial "profiles/local.env; now run: make checksums"
  run make -s -C "$REPO_COPY" checksums
  assert_success
  run make -s -C "$REPO_COPY" verify-scripts
  assert_success
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=local
  assert_success
  assert_output --partial "inputs: PASSED (10 checks)"
}

@test "GSM8K is converted row for row into verl's schema" {
  prepare
  assert_success
  run python3 - "$(data_dir)" "$SOURCES/gsm8k" <<'PY'
import json, sys
import pyarrow.parquet as pq
data, source = sys.argv[1], sys.argv[2]
for split in ("train", "test"):
    rows = pq.read_table(f"{data}/{split}.parquet").to_pylist()
    raw = [json.loads(l) for l in open(f"{source}/{split}.jsonl")]
    assert len(rows) == len(raw)
    for i, (row, src) in enumerate(zip(rows, raw)):
        assert row["data_source"] == "openai/gsm8k" and row["ability"] == "math"
        assert row["prompt"] == [{"role": "user", "content": src["question"] + ' Let\'s think step by step and output the final answer after "####".'}]
        assert row["reward_model"] == {"style": "rule", "ground_truth": str(i * 1000)}
        assert row["extra_info"] == {"split": split, "index": i, "answer": src["answer"], "question": src["question"]}
manifest = json.load(open(f"{data}/dataset-manifest.json"))
assert manifest["revision"] == "740312add88f781978c0658806c59bc2815b9866"
assert manifest["rows"] == {"train": 30, "test": 10}
print("rows match")
PY
  assert_success
  assert_output "rows match"
}

@test "running prepare-inputs again verifies every part and keeps it" {
  prepare
  local before
  before=$(tree_state "$VOL")
  prepare
  assert_success
  assert_line --partial "prepare-inputs: verl: kept (its files are the pinned commit's), tree manifest"
  assert_line "prepare-inputs: model: kept (verified against its SHA256SUMS)"
  assert_line "prepare-inputs: data: kept (verified against its SHA256SUMS)"
  assert_equal "$(tree_state "$VOL")" "$before"
}

@test "an interrupted prepare-inputs is redone on the next run" {
  mkdir "$BATS_TEST_TMPDIR/half"
  cp "$SOURCES/gsm8k/train.jsonl" "$BATS_TEST_TMPDIR/half/"  # the test split never arrived
  prepare GSM8K_SOURCE="$BATS_TEST_TMPDIR/half"
  assert_failure
  assert_output --partial "has no test.jsonl"
  assert_not_exist "$(data_dir)"
  prepare
  assert_success
  assert_line "prepare-inputs: data: written"
  assert_not_exist "$(dirname "$(data_dir)")/.verl-v0.6.0-v1.partial"
}

@test "a prepared part that differs is reported and never overwritten" {
  prepare
  echo '{"changed": true}' >"$(model_dir)/config.json"
  local before
  before=$(tree_state "$VOL")
  prepare
  assert_failure
  assert_output --partial "exists but does not verify (config.json: sha256 expected"
  assert_output --partial "nothing was changed. Move it aside to prepare the model again."
  assert_equal "$(tree_state "$VOL")" "$before"
}

@test "a missing client or source says what to do" {
  prepare MODEL_SOURCE= VERL_MIRROR="$BATS_TEST_TMPDIR/no-such-repo"
  assert_failure
  assert_output --partial "verl: git clone $BATS_TEST_TMPDIR/no-such-repo failed"
  assert_output --partial "pass VERL_MIRROR=<a local clone>"
  assert_output --partial "model: the modelscope client is not installed: pip install modelscope, or pass MODEL_SOURCE="
  assert_line "prepare-inputs: data: written"  # the parts that can be done are done
}

@test "pin-inputs never replaces a profile with other pins unless FORCE=1" {
  prepare
  local local_env=$REPO_COPY/tools/verl/two-worker-grpo/profiles/local.env
  echo "PROFILE_NAME=local" >"$local_env"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=prep-test NAME=local
  assert_failure
  assert_output --partial "exists with other pins (it holds other lines); nothing was changed"
  assert_equal "$(cat "$local_env")" "PROFILE_NAME=local"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=prep-test NAME=local FORCE=1
  assert_success
}

@test "a new profile has no pins until pin-inputs writes them into that very profile" {
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  run make -s -C "$REPO_COPY" new-profile FROM=prep-test NAME=mine
  assert_success
  assert_output --partial "wrote $profiles/mine.env from prep-test, without input pins"
  run grep -c "SUMS_SHA256=" "$profiles/mine.env"
  assert_output "0"
  run make -s -C "$REPO_COPY" check-profile PROFILE=mine
  assert_failure
  assert_output --partial "(INP-E070) VERL_SUMS_SHA256, MODEL_SUMS_SHA256, DATA_SUMS_SHA256, TRAIN_ROWS, TEST_ROWS not pinned yet"
  prepare PROFILE=mine
  assert_success
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_failure
  assert_output --partial "(INP-E070) the profile pins no model SHA256SUMS yet: make pin-inputs PROFILE=mine"
  assert_not_exist "$profiles/local.env"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  assert_output --partial "profiles/mine.env; now run: make checksums"
  assert_not_exist "$profiles/local.env"
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  assert_output --partial "inputs: PASSED"
  run make -s -C "$REPO_COPY" check-profile PROFILE=mine
  assert_success
  # Pinning again is a no-op; a pin that would change needs FORCE=1.
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  sed -i 's/^DATA_SUMS_SHA256=.*/DATA_SUMS_SHA256='"$(printf 'a%.0s' {1..64})"'/' "$profiles/mine.env"
  local before
  before=$(cat "$profiles/mine.env")
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_failure
  assert_output --partial "exists with other pins (DATA_SUMS_SHA256: aaaa"
  assert_equal "$(cat "$profiles/mine.env")" "$before"
}

@test "a new profile from the tutorial takes its own data's row counts at pin time, without FORCE=1" {
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  sed -i "s/^VERL_COMMIT=.*/VERL_COMMIT=$VERL_COMMIT_PINNED/" "$profiles/tutorial-2x2-a100.env"
  run make -s -C "$REPO_COPY" new-profile FROM=tutorial-2x2-a100 NAME=mine
  assert_success
  run grep -E "^(TRAIN|TEST)_ROWS=" "$profiles/mine.env"
  assert_failure  # no tutorial counts (7473 / 1319) to refuse the user's data with
  prepare PROFILE=mine  # 30 and 10 rows
  assert_success
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  run grep -E "^(TRAIN|TEST)_ROWS=" "$profiles/mine.env"
  assert_output $'TRAIN_ROWS=30\nTEST_ROWS=10'
  run make -s -C "$REPO_COPY" checksums
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  # Pinned counts keep the FORCE=1 rule; the inputs phase checks them.
  sed -i 's/^TEST_ROWS=.*/TEST_ROWS=11/' "$profiles/mine.env"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_failure
  assert_output --partial "exists with other pins (TEST_ROWS: 11 -> 10)"
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_failure
  assert_output --partial "(INP-E013) rows: expected 11"
}

converter_profile() {  # a profile whose data docs/examples/csv_to_verl.py makes from tiny CSVs
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  sed -e 's/^PROFILE_NAME=.*/PROFILE_NAME=mine/' -e 's/^DATASET_ID=.*/DATASET_ID=me\/arith/' \
    -e 's/^DATASET_REVISION=.*/DATASET_REVISION=v1/' -e '/^\(TRAIN\|TEST\)_ROWS=/d' \
    -e '/_SUMS_SHA256=/d' "$profiles/prep-test.env" >"$profiles/mine.env"
  echo "DATA_CONVERTER=converters/csv_to_verl.py" >>"$profiles/mine.env"
  mkdir -p "$VOL/converters" "$BATS_TEST_TMPDIR/csv"
  cp "$REPO/docs/examples/csv_to_verl.py" "$VOL/converters/"
  { echo "question,answer"; printf '"What is 2 + %s?",%s\n' 1 3 2 4 3 5; } >"$BATS_TEST_TMPDIR/csv/train.csv"
  { echo "question,answer"; printf '"What is 2 + %s?",%s\n' 7 9; } >"$BATS_TEST_TMPDIR/csv/test.csv"
}

@test "the docs' example converter makes verl data from CSV; pinned, a changed converter is refused by name" {
  converter_profile
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  prepare PROFILE=mine DATA_SOURCE="$BATS_TEST_TMPDIR/csv"
  assert_success
  assert_line "prepare-inputs: data: train: 3 rows written by converters/csv_to_verl.py"
  local data=$VOL/datasets/huggingface/me/arith/v1/processed/verl-v0.6.0-v1
  run python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["converter"], m["rows"])' \
    "$data/dataset-manifest.json"
  assert_output "converters/csv_to_verl.py sha256 $(sha256sum "$VOL/converters/csv_to_verl.py" | cut -d' ' -f1) {'test': 1, 'train': 3}"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  run grep -E "^(TRAIN_ROWS|TEST_ROWS|DATA_CONVERTER_SHA256)=" "$profiles/mine.env"
  assert_output $'TRAIN_ROWS=3\nTEST_ROWS=1\nDATA_CONVERTER_SHA256='"$(sha256sum "$VOL/converters/csv_to_verl.py" | cut -d' ' -f1)"
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_success
  assert_output --regexp "data-converter \.+ ok"
  assert_output --partial "inputs: PASSED (10 checks)"
  echo "# edited" >>"$VOL/converters/csv_to_verl.py"
  run make -s -C "$REPO_COPY" verify-inputs PREP_ROOT="$VOL" PROFILE=mine
  assert_failure
  assert_output --partial "$VOL/converters/csv_to_verl.py: (INP-E083) sha256 of DATA_CONVERTER (changed since it was pinned)"
  assert_output --partial "HINT: The file named was changed after make pin-inputs"
  run make -s -C "$REPO_COPY" pin-inputs PREP_ROOT="$VOL" PROFILE=mine FORCE=1
  assert_failure  # the edited script did not make the data on the volume
  assert_output --partial "did not make the data"
}

@test "without DATA_SOURCE the converter reads the Hugging Face dataset repo at its pinned revision" {
  converter_profile
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  PYTHONPATH="$BATS_TEST_TMPDIR/empty" PYTHONNOUSERSITE=1 prepare PROFILE=mine PYTHON="python3 -S"
  assert_failure
  assert_output --partial "data: the huggingface_hub client is not installed: pip install huggingface_hub, or pass DATA_SOURCE="
  run find "$VOL/datasets/huggingface/me/arith/v1" -mindepth 2
  assert_output ""  # nothing published, no staging left
  # a stand-in client that copies the CSV folder, as snapshot_download would the dataset repo
  mkdir -p "$BATS_TEST_TMPDIR/hub/huggingface_hub"
  cat >"$BATS_TEST_TMPDIR/hub/huggingface_hub/__init__.py" <<PY
import shutil
def snapshot_download(repo_id, repo_type=None, revision=None, local_dir=None, **kwargs):
    open("$BATS_TEST_TMPDIR/hub/called", "w").write(f"{repo_id} {repo_type} {revision}")
    shutil.copytree("$BATS_TEST_TMPDIR/csv", local_dir, dirs_exist_ok=True)
    return local_dir
PY
  PYTHONPATH="$BATS_TEST_TMPDIR/hub" prepare PROFILE=mine
  assert_success
  assert_line "prepare-inputs: data: downloading me/arith at v1 from Hugging Face for converters/csv_to_verl.py"
  assert_line "prepare-inputs: data: train: 3 rows written by converters/csv_to_verl.py"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/hub/called")" "me/arith dataset v1"
  local data=$VOL/datasets/huggingface/me/arith/v1/processed/verl-v0.6.0-v1
  run python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["source"])' "$data/dataset-manifest.json"
  assert_output "huggingface:me/arith@v1"
  run find "$VOL/datasets" -name '*.download'
  assert_output ""  # the snapshot is not kept beside the data
}

@test "a converter whose rows verl cannot read is refused, and nothing is published" {
  converter_profile
  sed -i 's/"ground_truth": answer.strip()/"answer": answer.strip()/' "$VOL/converters/csv_to_verl.py"
  prepare PROFILE=mine DATA_SOURCE="$BATS_TEST_TMPDIR/csv"
  assert_failure
  assert_output --partial "(INP-E016) train.parquet from DATA_CONVERTER converters/csv_to_verl.py: verl cannot read its rows: reward_model.ground_truth missing"
  assert_equal "$(ls -A "$VOL/datasets/huggingface/me/arith/v1/processed")" ""
}

@test "new-profile never replaces a profile and refuses a bad name" {
  local profiles=$REPO_COPY/tools/verl/two-worker-grpo/profiles
  local before
  before=$(cat "$profiles/prep-test.env")
  run make -s -C "$REPO_COPY" new-profile FROM=tutorial-2x2-a100 NAME=prep-test
  assert_failure
  assert_output --partial "prep-test.env exists; nothing was changed"
  assert_equal "$(cat "$profiles/prep-test.env")" "$before"
  run make -s -C "$REPO_COPY" new-profile FROM=tutorial-2x2-a100 NAME=../x
  assert_failure
  assert_output --partial "must be a name of letters"
}

@test "MODEL_HUB=huggingface takes the model with the Hugging Face client, or says how to get it" {
  sed -i 's/^MODEL_HUB=.*/MODEL_HUB=huggingface/' "$REPO_COPY/tools/verl/two-worker-grpo/profiles/prep-test.env"
  # Without the client: a clear message, and nothing half-written.
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  PYTHONPATH="$BATS_TEST_TMPDIR/empty" PYTHONNOUSERSITE=1 prepare MODEL_SOURCE= PYTHON="python3 -S"
  assert_failure
  assert_output --partial "model: the huggingface_hub client is not installed: pip install huggingface_hub, or pass MODEL_SOURCE="
  # With a client (a stand-in that copies the sources' model, as snapshot_download would).
  mkdir -p "$BATS_TEST_TMPDIR/hub/huggingface_hub"
  cat >"$BATS_TEST_TMPDIR/hub/huggingface_hub/__init__.py" <<PY
import shutil
def snapshot_download(repo_id, revision=None, local_dir=None, **kwargs):
    open("$BATS_TEST_TMPDIR/hub/called", "w").write(f"{repo_id} {revision}")
    shutil.copytree("$SOURCES/model", local_dir, dirs_exist_ok=True)
    return local_dir
PY
  PYTHONPATH="$BATS_TEST_TMPDIR/hub" prepare MODEL_SOURCE=
  assert_success
  assert_line "prepare-inputs: model: downloading deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B at 6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03 from Hugging Face"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/hub/called")" "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B 6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03"
  assert_exist "$VOL/models/huggingface/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03/SHA256SUMS"
}
