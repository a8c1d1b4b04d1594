"""What the launcher runs: the environment it exports and the verl training command.

Built here rather than in shell so that it is tested, and so that the RuntimeEnv JSON, the
driver's exports and the training overrides come from one profile.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import recipe
from .findings import usage
from .profile import Profile
from .profile_keys import HF_ROLLOUT_MODULE
from .runfolder import RunFolder

# Set on every node through the pasted RuntimeEnv, and exported by the launcher for the driver.
# Offline: nothing is fetched at run time. NCCL: Socket only (RDMA off), with INFO logs that
# postflight reads; GLOO_LOG_LEVEL=INFO makes torch >= 2.5 log the Gloo full mesh.
FIXED_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "TOKENIZERS_PARALLELISM": "true",
    "NCCL_IB_DISABLE": "1",
    "NCCL_DEBUG": "INFO",
    "NCCL_CUMEM_ENABLE": "0",
    "GLOO_LOG_LEVEL": "INFO",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "RAY_DEDUP_LOGS": "0",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "HYDRA_FULL_ERROR": "1",
}

# Reach the TaskRunner and every WorkerDict on every node: verl 0.6.0 drops keys that the
# driver already has from its own runtime_env, and a shell export never leaves the driver.
WORKER_ENV = ("NCCL_DEBUG", "NCCL_IB_DISABLE", "GLOO_LOG_LEVEL")
# NCCL_TRANSPORT=ib: IB stays on, and these profile values (when set) reach every node.
IB_ENV = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX")


def nccl_env(profile: Profile) -> Dict[str, str]:
    """The NCCL variables of the profile's transport: socket forces IB off (the tutorial's),
    ib leaves it on and passes the profile's IB interface choices through."""
    if profile.NCCL_TRANSPORT == "socket":
        env = {"NCCL_IB_DISABLE": "1"}
        if profile.NCCL_SOCKET_IFNAME:
            env["NCCL_SOCKET_IFNAME"] = profile.NCCL_SOCKET_IFNAME
        return env
    env = {"NCCL_IB_DISABLE": "0"}
    env.update({key: getattr(profile, key) for key in IB_ENV if getattr(profile, key)})
    return env


def fixed_env(profile: Profile) -> Dict[str, str]:
    """FIXED_ENV with the profile's NCCL transport and W&B settings (when LOGGERS has wandb)."""
    env = {k: v for k, v in FIXED_ENV.items() if k != "NCCL_IB_DISABLE"}
    env.update(nccl_env(profile))
    env.update(wandb_env(profile))
    return _ordered(env)


def wandb_env(profile: Profile) -> Dict[str, str]:
    """The profile's W&B mode and entity (the project is PROJECT_NAME, on the command). Never the
    API key: online runs take it from the platform's secret, so no file the bundle writes holds it."""
    if not wandb(profile):
        return {}
    env = {"WANDB_MODE": profile.WANDB_MODE}
    if profile.WANDB_ENTITY:
        env["WANDB_ENTITY"] = profile.WANDB_ENTITY
    return env


def _ordered(env: Dict[str, str]) -> Dict[str, str]:
    """FIXED_ENV's order (the tutorial's RuntimeEnv stays byte-identical), new keys after."""
    order = list(FIXED_ENV)
    return dict(sorted(env.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order
                                                    else len(order), kv[0])))


def wandb(profile: Profile) -> bool:
    return "wandb" in profile.LOGGERS.split(",")


FLIGHT_RECORDER = "nccl-flight"


def flight_pipe_prefix(run_id: str) -> str:
    """Where each rank's dump-request pipe lives: node-local /tmp (a pipe only reaches a reader
    on its own node, and a FIFO has no place among the run folder's files)."""
    return f"/tmp/twgrpo-nccl-{run_id}-rank_"


def flight_recorder_env(run: Path) -> Dict[str, str]:
    """torch's NCCL flight recorder on every rank: the last collectives kept in memory, dumped to
    <run>/nccl-flight/rank_<N> when a collective times out or when the training watchdog writes
    to the rank's pipe (flight_pipe_prefix, checks/watch/stall.py). Both spellings torch has used are
    set."""
    dumps = str(run / FLIGHT_RECORDER / "rank_")
    return {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_FR_BUFFER_SIZE": "2000",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": dumps,
            "TORCH_FR_DUMP_TEMP_FILE": dumps,
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": flight_pipe_prefix(run.name)}


def worker_env(profile: Profile, run: Path) -> Dict[str, str]:
    """What every TaskRunner and WorkerDict gets as ray_kwargs env_vars (quoted strings)."""
    nccl = nccl_env(profile)
    env = {"TENSORBOARD_DIR": str(RunFolder(run).tensorboard), "NCCL_DEBUG": FIXED_ENV["NCCL_DEBUG"],
           "NCCL_IB_DISABLE": nccl["NCCL_IB_DISABLE"], "GLOO_LOG_LEVEL": FIXED_ENV["GLOO_LOG_LEVEL"]}
    env.update({k: v for k, v in nccl.items() if k not in env})
    env.update(flight_recorder_env(run))
    if wandb(profile):
        env.update({**wandb_env(profile), "WANDB_DIR": str(RunFolder(run).wandb)})
    return env

def resume_overrides(storage_root: Path, run_id: str,
                     resume_step: Optional[Tuple[str, int]]) -> List[str]:
    """verl 0.6.0 loads global_step_N from this run's own copy of the earlier run's checkpoint
    (resume_snapshot_dir: copied and hashed by the resume phase, so nothing in the earlier
    run's folder can change what is loaded) and saves into this run's own checkpoints/."""
    if resume_step is None:
        return ["trainer.resume_mode=disable"]
    earlier, step = resume_step
    return ["trainer.resume_mode=resume_path",
            f"trainer.resume_from_path={resume_snapshot_dir(storage_root, run_id, earlier, step)}",
            "trainer.del_local_ckpt_after_load=false"]




def resume_snapshot_dir(storage_root: Path, run_id: str, earlier: str, step: int) -> Path:
    """<run>/resume-from/<earlier>/checkpoints/global_step_N: the copy a resumed run loads."""
    return RunFolder(RunFolder.at(storage_root, run_id).resume_from / earlier).checkpoints / f"global_step_{step}"


def checkpoint_dir(storage_root: Path, run_id: str, step: int) -> Path:
    return RunFolder.at(storage_root, run_id).checkpoints / f"global_step_{step}"


def rollout_dir(storage_root: Path, bundle_version: str = "") -> Path:
    """The installed bundle's HF-generate rollout adapter (rollout/), for ROLLOUT_ENGINE=hf: in
    the version folder `bundle_version` (bundle-<12 hex>) when given, else in a flat install."""
    bundles = Path(storage_root) / "tools" / "verl" / "two-worker-grpo"
    return (bundles / bundle_version if bundle_version else bundles) / "rollout"


def runtime_env(profile: Profile, storage_root: Path, bundle_version: str = "") -> Dict[str, object]:
    """The RuntimeEnv JSON to paste into the job form (Ray's runtime_env): the pinned verl
    checkout on PYTHONPATH, and for ROLLOUT_ENGINE=hf the rollout adapter too, on every node."""
    verl = str(profile.verl_root(storage_root))
    rollout = rollout_dir(storage_root, bundle_version)
    path = f"{verl}:{rollout}" if profile.ROLLOUT_ENGINE == "hf" else verl
    env = {"PYTHONPATH": path, **fixed_env(profile)}
    return {"working_dir": verl, "excludes": ["/.git/", "/docs/", "/tests/"], "env_vars": env}


def search_path(*parts: str) -> str:
    """PATH-like text with each folder once, in first-seen order, and no empty entries."""
    seen: List[str] = []
    for part in parts:
        for folder in part.split(":"):
            if folder and folder not in seen:
                seen.append(folder)
    return ":".join(seen)


def driver_environment(profile: Profile, storage_root: Path, run: Path,
                       pythonpath: str = "") -> Dict[str, str]:
    env = fixed_env(profile)
    # The pinned verl first; the RuntimeEnv's PYTHONPATH already names it (and the rollout folder).
    env["PYTHONPATH"] = search_path(str(profile.verl_root(storage_root)), pythonpath)
    env["TENSORBOARD_DIR"] = str(RunFolder(run).tensorboard)
    if wandb(profile):
        env["WANDB_DIR"] = str(RunFolder(run).wandb)
    return env


def training_command(profile: Profile, storage_root: Path, run_id: str,
                     resume_step: Optional[Tuple[str, int]] = None) -> List[str]:
    """verl's command line; resume_step (earlier RUN_ID, step) starts from that checkpoint."""
    p = profile
    run = RunFolder.at(storage_root, run_id).path
    data = p.data_root(storage_root)
    rollout = "actor_rollout_ref.rollout"
    actor = "actor_rollout_ref.actor"
    overrides = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'test.parquet'}",
        f"data.train_batch_size={p.TRAIN_BATCH_SIZE}",
        f"data.max_prompt_length={p.MAX_PROMPT_LENGTH}",
        f"data.max_response_length={p.MAX_RESPONSE_LENGTH}",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        "data.shuffle=false",
        f"actor_rollout_ref.model.path={p.model_root(storage_root)}",
        "actor_rollout_ref.model.use_shm=false",
        f"actor_rollout_ref.model.use_remove_padding={p.USE_REMOVE_PADDING}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={p.GRADIENT_CHECKPOINTING}",
        f"{actor}.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "critic.strategy=fsdp2",
        "reward_model.strategy=fsdp2",
        f"{actor}.optim.lr={p.LEARNING_RATE}",
        f"{actor}.ppo_mini_batch_size={p.PPO_MINI_BATCH_SIZE}",
        f"{actor}.ppo_micro_batch_size_per_gpu={p.PPO_MICRO_BATCH_SIZE_PER_GPU}",
        f"{actor}.use_kl_loss=false",
        f"{actor}.entropy_coeff=0",
        f"{actor}.fsdp_config.param_offload={p.PARAM_OFFLOAD}",
        f"{actor}.fsdp_config.optimizer_offload={p.OPTIMIZER_OFFLOAD}",
        f"{rollout}.name={p.ROLLOUT_ENGINE}",
        f"{rollout}.tensor_model_parallel_size={p.ROLLOUT_TP}",
        f"{rollout}.gpu_memory_utilization={p.GPU_MEMORY_UTILIZATION}",
        f"{rollout}.n={p.ROLLOUT_N}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={p.LOG_PROB_MICRO_BATCH_SIZE_PER_GPU}",
        f"{rollout}.max_num_seqs={p.ROLLOUT_MAX_NUM_SEQS}",
        f"{rollout}.max_model_len={p.MAX_PROMPT_LENGTH + p.MAX_RESPONSE_LENGTH}",
        f"{rollout}.max_num_batched_tokens={p.ROLLOUT_MAX_NUM_BATCHED_TOKENS}",
        f"{rollout}.enable_chunked_prefill=false",
        f"{rollout}.enforce_eager={p.ROLLOUT_ENFORCE_EAGER}",
    ]
    if p.ROLLOUT_ENGINE == "hf":
        # verl imports model.external_lib in every worker before it looks the rollout up.
        overrides.append(f"actor_rollout_ref.model.external_lib={HF_ROLLOUT_MODULE}")
    if p.ATTN_IMPLEMENTATION:
        overrides.append("+actor_rollout_ref.model.override_config._attn_implementation="
                         f"{p.ATTN_IMPLEMENTATION}")
    if p.REWARD_FILE:  # the pinned reward (the inputs phase checked its hash on every node)
        overrides += [f"custom_reward_function.path={p.reward_path(storage_root)}",
                      f"custom_reward_function.name={p.REWARD_FUNCTION}"]
    overrides += [
        f"trainer.logger=[{p.LOGGERS}]",
        f"trainer.project_name={p.PROJECT_NAME}",
        f"trainer.experiment_name={p.EXPERIMENT_NAME or run_id}",
        f"trainer.n_gpus_per_node={p.GPUS_PER_NODE}",
        f"trainer.nnodes={p.NODES}",
        f"trainer.val_before_train={p.VAL_BEFORE_TRAIN}",
        f"trainer.test_freq={p.TEST_FREQ}",
        f"trainer.save_freq={p.SAVE_FREQ}",
        f"trainer.total_epochs={p.TOTAL_EPOCHS}",
        f"trainer.total_training_steps={p.TARGET_STEPS}",
        *resume_overrides(storage_root, run_id, resume_step),
        f"trainer.default_local_dir={RunFolder(run).checkpoints}",
        f"trainer.rollout_data_dir={RunFolder(run).rollouts}",
        "+ray_kwargs.ray_init.address=auto",
    ]
    # Quoted: Hydra would read NCCL_IB_DISABLE=1 as an int, and Ray wants env_vars as strings.
    overrides += [f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}='{v}'"
                  for k, v in worker_env(p, run).items()]
    overrides += ["hydra.job.chdir=false", "hydra.output_subdir=null", f"hydra.run.dir={RunFolder(run).hydra}"]
    try:  # the profile's own overrides, last: refused keys are findings of check-profile/preflight
        return recipe.apply(["python3", "-m", "verl.trainer.main_ppo", *overrides],
                            p.EXTRA_OVERRIDES)
    except recipe.Refused as exc:  # make check-profile lists every refused override
        raise usage(exc.ident, f"profile {p.PROFILE_NAME}", str(exc)) from None
