"""A profile's EXTRA_OVERRIDES: Hydra overrides the user adds to the training command.

The bundle owns every key that fixes where the run reads and writes, its topology, its names,
its size and what postflight judges; an override of one of those is refused (GEN-E050), since
the proof would then describe another run than the one that ran. So is one that names code or a
file outside the pinned inputs (GEN-E052). Any other key is the user's:
one the command already sets to the tutorial's value is replaced in place (each key stays once
on the command line), a new one is appended.
"""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

# [+|++|~]dotted.key[=value]: Hydra's override grammar for plain config values.
WORD = re.compile(r"^(\+\+|\+|~)?([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*)(=(.*))?$", re.S)

# key -> what to set instead: the profile value, or why the bundle decides it.
OWNED: Dict[str, str] = {
    "data.train_files": "the bundle reads the profile's pinned data folder",
    "data.val_files": "the bundle reads the profile's pinned data folder",
    "data.train_batch_size": "set TRAIN_BATCH_SIZE",
    "data.max_prompt_length": "set MAX_PROMPT_LENGTH",
    "data.max_response_length": "set MAX_RESPONSE_LENGTH",
    "actor_rollout_ref.model.path": "the bundle reads the profile's pinned model folder",
    "actor_rollout_ref.actor.strategy": "postflight checks FSDP2 checkpoints",
    "actor_rollout_ref.model.override_config._attn_implementation": "set ATTN_IMPLEMENTATION",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "set PPO_MINI_BATCH_SIZE",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "set PPO_MICRO_BATCH_SIZE_PER_GPU",
    "actor_rollout_ref.rollout.name": "set ROLLOUT_ENGINE",
    "actor_rollout_ref.rollout.n": "set ROLLOUT_N",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "set ROLLOUT_TP",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu":
        "set LOG_PROB_MICRO_BATCH_SIZE_PER_GPU",
    "actor_rollout_ref.rollout.max_num_seqs": "set ROLLOUT_MAX_NUM_SEQS",
    "actor_rollout_ref.rollout.max_num_batched_tokens": "set ROLLOUT_MAX_NUM_BATCHED_TOKENS",
    "actor_rollout_ref.rollout.enforce_eager": "set ROLLOUT_ENFORCE_EAGER",
    "trainer.nnodes": "set NODES",
    "trainer.n_gpus_per_node": "set GPUS_PER_NODE",
    "trainer.project_name": "set PROJECT_NAME",
    "trainer.experiment_name": "set EXPERIMENT_NAME (empty: the RUN_ID)",
    "trainer.total_training_steps": "set TARGET_STEPS",
    "trainer.total_epochs": "set TOTAL_EPOCHS",
    "trainer.save_freq": "set SAVE_FREQ (in the profile or the job's environment)",
    "trainer.test_freq": "set TEST_FREQ",
    "trainer.val_before_train": "set VAL_BEFORE_TRAIN",
    "trainer.logger": "set LOGGERS",
    "trainer.default_local_dir": "checkpoints go into the run folder",
    "trainer.rollout_data_dir": "rollouts go into the run folder",
    "trainer.validation_data_dir": "the run folder is the bundle's",
    "trainer.resume_mode": "use RESUME_FROM",
    "trainer.resume_from_path": "use RESUME_FROM",
    "trainer.del_local_ckpt_after_load": "a resumed run never deletes the earlier checkpoint",
    "actor_rollout_ref.actor.checkpoint.save_contents": "postflight checks every rank's model, "
                                                        "optimizer and extra state are saved",
    "actor_rollout_ref.actor.checkpoint.load_contents": "a resumed run loads every rank's model, "
                                                        "optimizer and extra state",
    # The profile's own knobs: the report and summary print the knob, so it must be what ran.
    "actor_rollout_ref.actor.optim.lr": "set LEARNING_RATE",
    "actor_rollout_ref.actor.fsdp_config.param_offload": "set PARAM_OFFLOAD",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "set OPTIMIZER_OFFLOAD",
    "actor_rollout_ref.model.use_remove_padding": "set USE_REMOVE_PADDING",
    "actor_rollout_ref.model.enable_gradient_checkpointing": "set GRADIENT_CHECKPOINTING",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "set GPU_MEMORY_UTILIZATION",
    "actor_rollout_ref.rollout.max_model_len": "set MAX_PROMPT_LENGTH and MAX_RESPONSE_LENGTH "
                                               "(it is their sum)",
    "custom_reward_function.path": "set REWARD_FILE (pinned like the data)",
    "custom_reward_function.name": "set REWARD_FUNCTION",
    # What decides the algorithm: the bundle runs GRPO (a reward model's path is GEN-E052's).
    "algorithm.adv_estimator": "the bundle runs GRPO; its checks and report say so",
}
# Whole subtrees the bundle owns: the Ray connection and its worker environment, Hydra's folders.
OWNED_PREFIXES = {"ray_kwargs": "the platform manages the Ray address and the bundle the "
                                "workers' environment",
                  "hydra": "Hydra's folders are the run folder's"}


def owner(key: str) -> str:
    """Why the bundle owns key (empty when the key is the user's)."""
    if key in OWNED:
        return OWNED[key]
    for prefix, why in OWNED_PREFIXES.items():
        if key == prefix or key.startswith(prefix + "."):
            return why
    for owned, why in OWNED.items():  # a whole subtree holding an owned key (data=..., trainer=...)
        if owned.startswith(key + "."):
            return f"it holds {owned}: {why}"
    return ""


# Keys whose value names code to import or a file to read or write: outside the pinned inputs, the
# proof would stop exactly where the result is decided (GEN-E052).
CODE_SUBTREES = {"override_config", "custom_cls", "sampler", "datagen", "custom_reward_function",
                 "custom_async_server"}
CODE_NAMES = {"_target_", "path", "external_lib", "tokenizer", "input_tokenizer", "class_path",
              "class_name"}
CODE_ENDINGS = ("_path", "_dir", "_file", "_files", "_lib")
# A value that is a path (absolute, home, relative) or a URL: a file the pins do not cover.
PATH_VALUE = re.compile(r"^(/|~|\.\.?/|[A-Za-z][A-Za-z0-9+.-]*://)")


def outside_pins(key: str, value: str) -> str:
    """Why key=value reaches code or files outside the pinned inputs (empty when it does not)."""
    segments = key.split(".")
    if CODE_SUBTREES.intersection(segments) or segments[-1] in CODE_NAMES \
            or segments[-1].endswith(CODE_ENDINGS):
        return f"{key} names code to import or a file to read or write"
    for item in value.strip("[]").split(","):
        if PATH_VALUE.match(item.strip().strip("'\"")):
            return f"{item.strip()!r} is a path or URL"
    return ""


def parse(text: str) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str, str]]]:
    """(key, word) for each override, and (finding id, word, why) for each refused one."""
    accepted: List[Tuple[str, str]] = []
    problems: List[Tuple[str, str, str]] = []
    seen = set()
    for word in text.split():
        match = WORD.match(word)
        if not match or (match.group(1) != "~" and match.group(3) is None):
            problems.append(("GEN-E051", word, "not a Hydra override of the form "
                             "[+|++|~]key=value (values may not hold spaces)"))
            continue
        key = match.group(2)
        why = owner(key)
        outside = outside_pins(key, match.group(4) or "")
        if why:
            problems.append(("GEN-E050", word, f"{key} belongs to the bundle: {why}"))
        elif outside:
            problems.append(("GEN-E052", word, f"{outside}, outside the run's pinned inputs"))
        elif key in seen:
            problems.append(("GEN-E051", word, f"{key} is overridden twice"))
        else:
            seen.add(key)
            accepted.append((key, word))
    return accepted, problems


class Refused(ValueError):
    """The first override apply() refuses: its finding id, the word and why (the checks report
    every one; the caller says it through the catalog)."""

    def __init__(self, ident: str, word: str, why: str):
        super().__init__(f"EXTRA_OVERRIDES {word!r}: {why}")
        self.ident, self.word = ident, word


def apply(command: List[str], text: str) -> List[str]:
    """command with the overrides applied: a key it sets is replaced in place, a new one appended.
    Raises Refused naming the first refused override."""
    accepted, problems = parse(text)
    if problems:
        raise Refused(*problems[0])
    result = list(command)
    index = {_key(word): at for at, word in enumerate(result) if "=" in word}
    for key, word in accepted:
        if key in index:
            result[index[key]] = word
        else:
            result.append(word)
    return result


def _key(word: str) -> str:
    return word.split("=", 1)[0].lstrip("+~")
