"""The tutorial profile's whole training command, word for word: the tutorial's main_ppo line
(trainer.project_name=verl_aistudio included) plus the documented additions, so any change to
what the job runs shows up here and in review."""
import pytest
from pathlib import Path

from twgrpo.run.command import training_command
from twgrpo.run.profile import load_profile

ROOT = "/mnt/verl-reproduction"
DATA = f"{ROOT}/datasets/huggingface/openai/gsm8k/740312add88f781978c0658806c59bc2815b9866/processed/verl-v0.6.0-v1"
MODEL = f"{ROOT}/models/modelscope/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03"
RUN = f"{ROOT}/runs/verl/two-worker-grpo/exp-001"

TUTORIAL = [
    "python3", "-m", "verl.trainer.main_ppo",
    "algorithm.adv_estimator=grpo",
    "algorithm.use_kl_in_reward=false",
    f"data.train_files={DATA}/train.parquet",
    f"data.val_files={DATA}/test.parquet",
    "data.train_batch_size=4",
    "data.max_prompt_length=512",
    "data.max_response_length=256",
    "data.filter_overlong_prompts=true",
    "data.truncation=error",
    "data.shuffle=false",
    f"actor_rollout_ref.model.path={MODEL}",
    "actor_rollout_ref.model.use_shm=false",
    "actor_rollout_ref.model.use_remove_padding=true",
    "actor_rollout_ref.model.enable_gradient_checkpointing=true",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.ref.strategy=fsdp2",
    "critic.strategy=fsdp2",
    "reward_model.strategy=fsdp2",
    "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.actor.fsdp_config.param_offload=true",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    "actor_rollout_ref.rollout.name=sglang",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.max_num_seqs=16",
    "actor_rollout_ref.rollout.max_model_len=768",
    "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
    "actor_rollout_ref.rollout.enable_chunked_prefill=false",
    "actor_rollout_ref.rollout.enforce_eager=true",
    "trainer.logger=[console,tensorboard]",
    "trainer.project_name=verl_aistudio",
    "trainer.experiment_name=exp-001",
    "trainer.n_gpus_per_node=2",
    "trainer.nnodes=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=2",
    "trainer.total_epochs=1",
    "trainer.total_training_steps=2",
    "trainer.resume_mode=disable",
    f"trainer.default_local_dir={RUN}/checkpoints",
    f"trainer.rollout_data_dir={RUN}/rollouts",
    "+ray_kwargs.ray_init.address=auto",
    f"+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={RUN}/tensorboard",
    "hydra.job.chdir=false",
    "hydra.output_subdir=null",
    f"hydra.run.dir={RUN}/hydra",
]
# What the bundle adds or changes, each documented in README: worker env vars as quoted strings.
TENSORBOARD = "+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR"
ADDITIONS = [
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG='INFO'",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE='1'",
    "+ray_kwargs.ray_init.runtime_env.env_vars.GLOO_LOG_LEVEL='INFO'",
    # NCCL's flight recorder on every rank (docs/phases.md: the training watchdog)
    "+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_TRACE_BUFFER_SIZE='2000'",
    "+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_FR_BUFFER_SIZE='2000'",
    "+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_DUMP_ON_TIMEOUT='1'",
    f"+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_DEBUG_INFO_TEMP_FILE='{RUN}/nccl-flight/rank_'",
    f"+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_FR_DUMP_TEMP_FILE='{RUN}/nccl-flight/rank_'",
    "+ray_kwargs.ray_init.runtime_env.env_vars.TORCH_NCCL_DEBUG_INFO_PIPE_FILE='/tmp/twgrpo-nccl-exp-001-rank_'",
]


def golden():
    words = [f"{TENSORBOARD}='{RUN}/tensorboard'" if w.startswith(TENSORBOARD) else w
             for w in TUTORIAL]
    at = words.index("hydra.job.chdir=false")
    return words[:at] + ADDITIONS + words[at:]


def test_the_tutorial_profile_runs_the_tutorials_command_with_the_documented_additions():
    assert training_command(load_profile("tutorial-2x2-a100"), Path(ROOT), "exp-001") == golden()


def test_the_readme_names_every_addition():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert "trainer.project_name=verl_aistudio" in readme
    for word in ADDITIONS:
        assert word.split(".")[-1].split("=")[0] in readme


def test_a_refused_override_stops_the_command_with_the_catalogs_id_and_hint():
    from twgrpo.run.catalog import CATALOG
    from twgrpo.run.findings import UsageError
    from twgrpo.run.profile import with_overrides
    profile = with_overrides(load_profile("tutorial-2x2-a100"),
                             EXTRA_OVERRIDES="trainer.n_gpus_per_node=4 data.seed=1 data.seed=2")
    with pytest.raises(UsageError) as refused:
        training_command(profile, Path(ROOT), "exp-001")
    assert str(refused.value).startswith("profile tutorial-2x2-a100: (GEN-E050) EXTRA_OVERRIDES "
                                         "'trainer.n_gpus_per_node=4'")
    assert refused.value.hint == CATALOG["GEN-E050"][1] and " — " not in str(refused.value)
