"""Postflight's check of resolved-command.txt: the command verl ran holds the overrides that fix
the run's topology, size, engine and artifact folders, as the launcher's own command builder
(run/command.py) makes them. ctx is postflight's context.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Dict, List, Optional

from ...formats import lines
from ...run import recipe, runrecord
from ...run.command import training_command
from ...run.findings import Finding, finding, mismatch
from ...run.profile import Profile
from ...run.runfolder import RunFolder


# The overrides that fix the run's topology, size, engine and where its artifacts go.
JUDGED_OVERRIDES = (
    "trainer.nnodes", "trainer.n_gpus_per_node", "trainer.total_training_steps",
    "data.train_batch_size", "actor_rollout_ref.rollout.n", "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.actor.strategy", "+ray_kwargs.ray_init.address",
    "+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG",
    "trainer.default_local_dir", "trainer.rollout_data_dir",
    # The open recipe's first-class values (their defaults are the tutorial's).
    "trainer.logger", "trainer.total_epochs", "trainer.test_freq", "trainer.val_before_train",
    "actor_rollout_ref.rollout.max_num_seqs", "actor_rollout_ref.rollout.max_num_batched_tokens",
    "actor_rollout_ref.rollout.enforce_eager",
    "custom_reward_function.path", "custom_reward_function.name",
    "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_MODE",
    "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_DIR",
    # NCCL_TRANSPORT=ib: the interface choices every worker got (absent from a socket command).
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_HCA",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_SOCKET_IFNAME",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_GID_INDEX",
)
# Stands for the storage root in the expected command when run.json does not name it.
ANY_ROOT = "/\0storage-root"


def overrides(argv: List[str]) -> Dict[str, str]:
    return dict(arg.split("=", 1) for arg in argv if "=" in arg)


def expected_overrides(profile: Profile, run_id: str, storage_root: Optional[str]) -> Dict[str, str]:
    """key -> value, from the very command the launcher runs (command.training_command)."""
    argv = training_command(profile, Path(storage_root or ANY_ROOT), run_id)
    # The profile's EXTRA_OVERRIDES are judged too: each must be on the command verl ran.
    extra = {key for key, _ in recipe.parse(profile.EXTRA_OVERRIDES)[0]}
    return {key: value for key, value in overrides(argv).items()
            if key in JUDGED_OVERRIDES or key.lstrip("+") in extra}


def override_matches(want: str, have: Optional[str]) -> bool:
    if have is None:
        return False
    if ANY_ROOT not in want:
        return have == want
    # The job's mount path is unknown here: any absolute path may stand for the storage root.
    pattern = re.escape(want).replace(re.escape(ANY_ROOT), "/.*")
    return re.fullmatch(pattern, have, re.S) is not None


def recorded_storage_root(run_dir: Path) -> Optional[str]:
    return runrecord.storage_root(run_dir)


def check_resolved_command(ctx) -> List[Finding]:
    path = RunFolder(ctx.run_dir).resolved_command_txt
    try:
        argv = shlex.split(lines.read_small(path))
    except OSError as exc:
        return [finding("POST-E006", str(path), f"cannot read: {exc.strerror}")]
    except ValueError as exc:
        return [finding("POST-E006", str(path), f"not a shell-quoted command: {exc}")]
    given = overrides(argv)
    found = []
    if argv[:3] != ["python3", "-m", "verl.trainer.main_ppo"]:
        found.append(mismatch("POST-E006", str(path), "command", "python3 -m verl.trainer.main_ppo",
                              " ".join(argv[:3])))
    root = recorded_storage_root(ctx.run_dir)
    deleted = [w for _, w in recipe.parse(ctx.profile.EXTRA_OVERRIDES)[0] if w.startswith("~")]
    found += [mismatch("POST-E006", str(path), word, "present", "absent")
              for word in deleted if word not in argv]
    for key, want in expected_overrides(ctx.profile, ctx.run_id, root).items():
        have = given.get(key)
        if not override_matches(want, have):
            found.append(mismatch("POST-E006", str(path), key,
                                  want.replace(ANY_ROOT, "<storage root>"), have or "absent"))
    ctx.evidence["resolved_command_overrides"] = len(argv) - 3
    return found
