"""Batch sizes against the world size, as verl 0.6.0 would reject them after GPUs are allocated.

Each rule names the verl code it mirrors (FSDP strategy, no dynamic batch size, no sequence
parallelism: the bundle's settings).
"""
from __future__ import annotations

from typing import List

from ...run.findings import Finding, finding
from ...run.profile import Profile


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
    if not p.pinned("TRAIN_ROWS"):  # a new profile: pin-inputs measures the rows (INP-E070)
        return found + check_rollout_layout(p)
    # Ours: verl's train dataloader drops the last partial batch, so a split with fewer full
    # batches (times TOTAL_EPOCHS) than TARGET_STEPS ends the run early.
    if p.TRAIN_ROWS // p.TRAIN_BATCH_SIZE * p.TOTAL_EPOCHS < p.TARGET_STEPS:
        found.append(finding("PRE-E005", obj,
                             f"TRAIN_ROWS {p.TRAIN_ROWS} hold {p.TRAIN_ROWS // p.TRAIN_BATCH_SIZE} "
                             f"full batches of {p.TRAIN_BATCH_SIZE} x TOTAL_EPOCHS "
                             f"{p.TOTAL_EPOCHS}, fewer than TARGET_STEPS {p.TARGET_STEPS}"))
    # A TARGET_STEPS within the first epochs leaves the later ones unrun: TOTAL_EPOCHS then
    # says more than the run does (one epoch cut short is the tutorial's own 2-step run).
    batches = p.TRAIN_ROWS // p.TRAIN_BATCH_SIZE
    if p.TOTAL_EPOCHS > 1 and p.TARGET_STEPS <= (p.TOTAL_EPOCHS - 1) * batches:
        reached = -(-p.TARGET_STEPS // batches)
        found.append(finding("PRE-W005", obj,
                             f"TARGET_STEPS {p.TARGET_STEPS} ends in epoch {reached} of TOTAL_EPOCHS "
                             f"{p.TOTAL_EPOCHS} ({batches} batches an epoch); TARGET_STEPS=auto "
                             f"would be {p.TOTAL_EPOCHS * batches}", epochs_reached=reached))
    return found + check_rollout_layout(p)


def check_rollout_layout(p: Profile) -> List[Finding]:
    """Rollout replicas against one node (verl PR #652, verl #6856) and the rollout DP chunk."""
    obj, found = f"profile {p.PROFILE_NAME}", []
    # verl/workers/rollout/replica.py: a replica of TP GPUs must tile the node, never span nodes
    if p.ROLLOUT_TP > p.GPUS_PER_NODE:
        found.append(finding("PRE-E060", obj, f"ROLLOUT_TP {p.ROLLOUT_TP} is more than the "
                             f"{p.GPUS_PER_NODE} GPUs of one node: a rollout replica would span nodes",
                             mirrors="verl/workers/rollout/replica.py RolloutReplica.__init__"))
    elif p.GPUS_PER_NODE % p.ROLLOUT_TP:
        found.append(finding("PRE-E061", obj, f"ROLLOUT_TP {p.ROLLOUT_TP} does not divide "
                             f"GPUS_PER_NODE {p.GPUS_PER_NODE}",
                             mirrors="verl/workers/rollout/replica.py RolloutReplica.__init__"))
    # verl/protocol.py DataProto.chunk: the repeated batch is split equally over the rollout
    # mesh's data-parallel ranks (world / TP) before generation: "only support equal chunk".
    if p.ROLLOUT_TP > 1 and p.world_size % p.ROLLOUT_TP == 0:  # TP 1: PRE-E001 says it
        dp = p.world_size // p.ROLLOUT_TP
        real = p.TRAIN_BATCH_SIZE * p.ROLLOUT_N
        if real % dp:
            found.append(finding("PRE-E062", obj, f"TRAIN_BATCH_SIZE x ROLLOUT_N = {real} does not "
                                 f"divide by the rollout data-parallel size {dp} (world {p.world_size}"
                                 f" / ROLLOUT_TP {p.ROLLOUT_TP})", mirrors="verl/protocol.py DataProto.chunk"))
    return found
