"""Batch sizes against the world size, as verl 0.6.0 would reject them after GPUs are allocated.

Each rule names the verl code it mirrors (FSDP strategy, no dynamic batch size, no sequence
parallelism: the bundle's settings).
"""
from __future__ import annotations

from typing import List

from ..run.findings import Finding, finding
from ..run.profile import Profile


def check_batch_sizes(profile: Profile) -> List[Finding]:
    p = profile
    world = p.world_size
    obj = f"profile {p.PROFILE_NAME}"
    found = []
    real = p.TRAIN_BATCH_SIZE * p.ROLLOUT_N
    # verl/utils/config.py validate_config: real_train_batch_size % minimal_bsz (= n_gpus) == 0
    if real % world:
        found.append(finding("PRE-E001", obj,
                             f"TRAIN_BATCH_SIZE x ROLLOUT_N = {p.TRAIN_BATCH_SIZE} x {p.ROLLOUT_N} = "
                             f"{real} does not divide by the world size {world} "
                             f"({p.NODES} nodes x {p.GPUS_PER_NODE} GPUs)",
                             real_train_batch_size=real, world_size=world,
                             mirrors="verl/utils/config.py validate_config"))
    # verl/workers/config/actor.py ActorConfig.validate: train_batch_size >= ppo_mini_batch_size
    if p.TRAIN_BATCH_SIZE < p.PPO_MINI_BATCH_SIZE:
        found.append(finding("PRE-E002", obj,
                             f"TRAIN_BATCH_SIZE {p.TRAIN_BATCH_SIZE} is smaller than "
                             f"PPO_MINI_BATCH_SIZE {p.PPO_MINI_BATCH_SIZE}",
                             mirrors="verl/workers/config/actor.py ActorConfig.validate"))
    # verl/workers/fsdp_workers.py ActorRolloutRefWorker.__init__: the mini batch is normalized
    # per GPU (x n // world) and must be > 0 and divide by the per-GPU micro batch.
    normalized = p.PPO_MINI_BATCH_SIZE * p.ROLLOUT_N // world
    micro = p.PPO_MICRO_BATCH_SIZE_PER_GPU
    if normalized == 0 or normalized % micro:
        found.append(finding("PRE-E003", obj,
                             f"PPO_MINI_BATCH_SIZE x ROLLOUT_N // world = {p.PPO_MINI_BATCH_SIZE} x "
                             f"{p.ROLLOUT_N} // {world} = {normalized} per GPU, which "
                             f"{'is 0' if not normalized else f'does not divide by PPO_MICRO_BATCH_SIZE_PER_GPU {micro}'}",
                             normalized_mini_batch=normalized,
                             mirrors="verl/workers/fsdp_workers.py ActorRolloutRefWorker.__init__"))
    # verl/workers/fsdp_workers.py _build_rollout: world_size % rollout TP == 0
    if world % p.ROLLOUT_TP:
        found.append(finding("PRE-E004", obj,
                             f"ROLLOUT_TP {p.ROLLOUT_TP} does not divide the world size {world}",
                             mirrors="verl/workers/fsdp_workers.py _build_rollout"))
    # Ours: verl's train dataloader drops the last partial batch, so a split with fewer full
    # batches (times TOTAL_EPOCHS) than TARGET_STEPS ends the run early.
    if p.TRAIN_ROWS // p.TRAIN_BATCH_SIZE * p.TOTAL_EPOCHS < p.TARGET_STEPS:
        found.append(finding("PRE-E005", obj,
                             f"TRAIN_ROWS {p.TRAIN_ROWS} hold {p.TRAIN_ROWS // p.TRAIN_BATCH_SIZE} "
                             f"full batches of {p.TRAIN_BATCH_SIZE} x TOTAL_EPOCHS "
                             f"{p.TOTAL_EPOCHS}, fewer than TARGET_STEPS {p.TARGET_STEPS}"))
    return found
