"""The profile's keys: each key's form and meaning, the defaults of the optional ones, and
which are input pins, numbers or fixed choices. The one place a key is declared.
"""
from __future__ import annotations

import re
from typing import Dict, List

SHA1 = re.compile(r"^[0-9a-f]{40}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A profile's name and the names of hub folders (RUN_IDs: run/runid.py). \Z, not $: $ also
# matches before a final newline.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
VERSION = re.compile(r"^\d+(\.\d+){0,2}$")
BOOL = re.compile(r"^(true|false)$")
NUMBER = re.compile(r"^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?$")  # a positive decimal
POSITIVE = re.compile(r"^[1-9][0-9]*$")
LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")

# The HF-generate rollout adapter module (rollout/), importable on every node where ROLLOUT_ENGINE=hf.
HF_ROLLOUT_MODULE = "twgrpo_hf_rollout"
# ROLLOUT_ENGINE -> the module every node must be able to import for it (the one list of engines).
ROLLOUT_ENGINES = {"sglang": "sglang", "vllm": "vllm", "hf": HF_ROLLOUT_MODULE}

# key -> (form, meaning). Every key is required; an empty value is allowed only where noted.
FIELDS: Dict[str, tuple] = {
    "PROFILE_NAME": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?<!\.env)\Z"),
                     "the profile's name, equal to its file name (not ending in .env)"),
    "VERL_COMMIT": (SHA1, "verl git commit checked out under code/verl/<commit>/"),
    "VERL_REPO_URL": (re.compile(r"^\S+$"), "where prepare-inputs clones verl from"),
    "VERL_SUMS_SHA256": (re.compile(r"^([0-9a-f]{64})?$"), "sha256 of code/verl/<commit>.SHA256SUMS, "
                         "the manifest of the checkout's tracked files (empty: not pinned yet)"),
    "MODEL_HUB": (NAME, "model hub folder under models/"),
    "MODEL_ID": (REPO_ID, "model id on that hub"),
    "MODEL_REVISION": (NAME, "model revision folder"),
    "MODEL_SUMS_SHA256": (SHA256, "sha256 of the model folder's SHA256SUMS"),
    "MODEL_WEIGHTS": (re.compile(r"^[A-Za-z0-9._-]+\.safetensors(\.index\.json)?$"),
                      "the weights file to read, or a sharded model's model.safetensors.index.json"),
    "DATASET_HUB": (NAME, "dataset hub folder under datasets/"),
    "DATASET_ID": (REPO_ID, "dataset id on that hub"),
    "DATASET_REVISION": (NAME, "dataset revision folder, also in dataset-manifest.json"),
    "DATASET_VARIANT": (NAME, "processed/<variant>/ folder of verl parquet"),
    "DATA_SUMS_SHA256": (SHA256, "sha256 of the data folder's SHA256SUMS"),
    "TRAIN_ROWS": (POSITIVE, "rows in train.parquet (make pin-inputs measures it)"),
    "TEST_ROWS": (POSITIVE, "rows in test.parquet (make pin-inputs measures it)"),
    "NODES": (POSITIVE, "Ray nodes"),
    "GPUS_PER_NODE": (POSITIVE, "GPUs on each Ray node"),
    "GPU_MODEL": (re.compile(r"^[^\s,][^,]*(,[^\s,][^,]*)*$"),
                  "nvidia-smi GPU name, several separated by commas, or * for any"),
    "MIN_DRIVER": (VERSION, "lowest NVIDIA driver allowed on any node"),
    "TARGET_STEPS": (re.compile(r"^([1-9][0-9]*|auto)$"),
                     "training steps, or auto for TOTAL_EPOCHS x the train split's batches"),
    "SAVE_FREQ": (POSITIVE, "checkpoint every N steps"),
    "TRAIN_BATCH_SIZE": (POSITIVE, "prompts per step"),
    "ROLLOUT_N": (POSITIVE, "responses per prompt"),
    "PPO_MINI_BATCH_SIZE": (POSITIVE, "prompts per PPO mini batch"),
    "PPO_MICRO_BATCH_SIZE_PER_GPU": (POSITIVE, "actor micro batch per GPU"),
    "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU": (POSITIVE, "log-prob micro batch per GPU"),
    "MAX_PROMPT_LENGTH": (POSITIVE, "prompt tokens"),
    "MAX_RESPONSE_LENGTH": (POSITIVE, "response tokens"),
    "ROLLOUT_ENGINE": (re.compile(f"^({'|'.join(ROLLOUT_ENGINES)})$"),
                       f"rollout engine: {', '.join(ROLLOUT_ENGINES)}"),
    "ROLLOUT_TP": (POSITIVE, "rollout tensor parallel size"),
    "GPU_MEMORY_UTILIZATION": (NUMBER, "rollout engine's share of GPU memory"),
    "LEARNING_RATE": (NUMBER, "actor learning rate"),
    "PARAM_OFFLOAD": (BOOL, "FSDP parameter offload"),
    "OPTIMIZER_OFFLOAD": (BOOL, "FSDP optimizer offload"),
    "USE_REMOVE_PADDING": (BOOL, "verl remove-padding (needs flash-attn)"),
    "GRADIENT_CHECKPOINTING": (BOOL, "activation checkpointing"),
    "ATTN_IMPLEMENTATION": (re.compile(r"^(|eager|sdpa|flash_attention_2)$"),
                            "attention override, empty for verl's default"),
}
# A Python file named relative to the storage root (the same on every mount path).
STORAGE_PY = re.compile(r"^(|[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*\.py)$")
# The open recipe and the cluster's network: optional keys whose defaults are the tutorial's run,
# so a profile that leaves them out runs the tutorial's command word for word.
OVERRIDE_WORDS = re.compile(r"^(|\S+( \S+)*)$")
DEFAULTS: Dict[str, str] = {
    "TOTAL_EPOCHS": "1",
    "TEST_FREQ": "-1",
    "VAL_BEFORE_TRAIN": "false",
    "LOGGERS": "console,tensorboard",
    "ROLLOUT_MAX_NUM_SEQS": "16",
    "ROLLOUT_MAX_NUM_BATCHED_TOKENS": "2048",
    "ROLLOUT_ENFORCE_EAGER": "true",
    "EXTRA_OVERRIDES": "",
    "NCCL_TRANSPORT": "socket",
    "NCCL_IB_HCA": "",
    "NCCL_SOCKET_IFNAME": "",
    "NCCL_IB_GID_INDEX": "",
    "WANDB_MODE": "offline",
    "WANDB_ENTITY": "",
    "PROJECT_NAME": "verl_aistudio",
    "EXPERIMENT_NAME": "",
    "REWARD_FILE": "",
    "REWARD_FUNCTION": "compute_score",
    "REWARD_SHA256": "",
    "DATA_CONVERTER": "",
    "DATA_CONVERTER_SHA256": "",
}
FIELDS.update({
    "TOTAL_EPOCHS": (POSITIVE, "passes over the train split (verl stops at TARGET_STEPS first)"),
    "TEST_FREQ": (re.compile(r"^(-1|[1-9][0-9]*)$"), "validate every N steps, -1 for never"),
    "VAL_BEFORE_TRAIN": (BOOL, "validate once before the first step"),
    "LOGGERS": (re.compile(r"^console,tensorboard(,wandb)?$"),
                "verl loggers: console,tensorboard, optionally ,wandb (see WANDB_MODE)"),
    # W&B's API key is never a profile value: only the platform's secret gives it to the job.
    "WANDB_MODE": (re.compile(r"^(offline|online)$"), "W&B with wandb in LOGGERS: offline (into "
                   "the run folder, wandb sync later) or online (the job's WANDB_API_KEY secret)"),
    "WANDB_ENTITY": (re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$"), "W&B entity (team or user; "
                     "empty: the API key's default)"),
    "ROLLOUT_MAX_NUM_SEQS": (POSITIVE, "rollout engine's max_num_seqs"),
    "ROLLOUT_MAX_NUM_BATCHED_TOKENS": (POSITIVE, "rollout engine's max_num_batched_tokens"),
    "ROLLOUT_ENFORCE_EAGER": (BOOL, "rollout engine's enforce_eager (no CUDA graphs)"),
    "EXTRA_OVERRIDES": (OVERRIDE_WORDS, "Hydra overrides appended to the training command, "
                        "separated by single spaces"),
    "NCCL_TRANSPORT": (re.compile(r"^(socket|ib)$"), "NCCL between nodes: socket or ib"),
    "NCCL_IB_HCA": (re.compile(r"^[A-Za-z0-9_.:,^=-]*$"), "NCCL_IB_HCA for ib, e.g. mlx5_0,mlx5_1"),
    "NCCL_SOCKET_IFNAME": (re.compile(r"^[A-Za-z0-9_.,^=-]*$"), "NCCL_SOCKET_IFNAME, e.g. eth0"),
    "NCCL_IB_GID_INDEX": (re.compile(r"^[0-9]*$"), "NCCL_IB_GID_INDEX for RoCE, e.g. 3"),
    # Labels the loggers file the run under (the tutorial's project; the experiment is RUN_ID).
    "PROJECT_NAME": (NAME, "trainer.project_name, the loggers' project"),
    "EXPERIMENT_NAME": (re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$"),
                        "trainer.experiment_name (empty: the RUN_ID)"),
    # A reward function of your own: a pinned input like the data (its sha256 in REWARD_SHA256).
    "REWARD_FILE": (STORAGE_PY,
                    "Python file under the storage root holding the reward function, e.g. "
                    "rewards/mine.py (empty: verl's own scorer for the data source)"),
    "REWARD_FUNCTION": (re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$"), "the function in REWARD_FILE"),
    "REWARD_SHA256": (re.compile(r"^([0-9a-f]{64})?$"), "sha256 of REWARD_FILE (make pin-inputs "
                      "writes it)"),
    # Data of your own: the script prepare-inputs runs to write it, a pinned input too.
    "DATA_CONVERTER": (STORAGE_PY, "Python file under the storage root that prepare-inputs runs to "
                       "write train.parquet and test.parquet, e.g. converters/mine.py (empty: "
                       "GSM8K, converted by the bundle)"),
    "DATA_CONVERTER_SHA256": (re.compile(r"^([0-9a-f]{64})?$"), "sha256 of DATA_CONVERTER (make "
                              "pin-inputs writes it)"),
})
# Input pins that a new profile leaves out until make pin-inputs writes them (inputs: INP-E070).
# The row counts are among them: pin-inputs measures the user's own data, never the tutorial's.
PINS = ("VERL_SUMS_SHA256", "MODEL_SUMS_SHA256", "DATA_SUMS_SHA256", "TRAIN_ROWS", "TEST_ROWS")
INTS = {k for k, (form, _) in FIELDS.items() if form is POSITIVE} | {"TEST_FREQ", "TARGET_STEPS"}
# Keys of a few fixed words: read case-insensitively (IB, True), kept in lower case.
CHOICES: Dict[str, List[str]] = {
    "ROLLOUT_ENGINE": list(ROLLOUT_ENGINES), "NCCL_TRANSPORT": ["socket", "ib"],
    "WANDB_MODE": ["offline", "online"],
    "ATTN_IMPLEMENTATION": ["eager", "sdpa", "flash_attention_2"],
    **{k: ["true", "false"] for k, (form, _) in FIELDS.items() if form is BOOL}}
LOWER = set(CHOICES) | {"LOGGERS", "TARGET_STEPS"}
OPTIONAL_EMPTY = {"ATTN_IMPLEMENTATION", "VERL_SUMS_SHA256"} | {k for k, v in DEFAULTS.items() if v == ""}
# Keys a run recorded before they existed: read from an older run.json as empty (not pinned).
ADDED_LATER = ("VERL_SUMS_SHA256",)
