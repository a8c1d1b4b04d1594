"""The open recipe: first-class knobs with the tutorial's defaults, EXTRA_OVERRIDES appended and
recorded with the bundle's own keys refused, and every rule that needs no cluster in
check-profile. The tutorial's own command is test_command_golden.py's."""
import json
import re
import shlex
import types
from pathlib import Path

import pytest

from twgrpo import cli
from twgrpo.checks.postflight import command_record
from twgrpo.checks.rules import recipe
from twgrpo.run import command
from twgrpo.run.findings import UsageError
from twgrpo.run.profile import load_profile

ROOT = Path("/mnt/verl-reproduction")
RUN = ROOT / "runs/verl/two-worker-grpo/exp-001"


def profile_file(tmp_path, name="mine", drop=(), **values):
    """The tutorial's profile as <name>.env with some values set (or keys dropped)."""
    text = load_profile(None).path.read_text()
    text = re.sub(r"(?m)^PROFILE_NAME=.*$", f"PROFILE_NAME={name}", text)
    for key in drop:
        text = re.sub(rf"(?m)^{key}=.*\n", "", text)
    for key, value in values.items():
        if re.search(rf"(?m)^{key}=", text):
            text = re.sub(rf"(?m)^{key}=.*$", f"{key}={value}", text)
        else:
            text += f"{key}={value}\n"
    path = tmp_path / f"{name}.env"
    path.write_text(text)
    return path


def words(profile):
    return command.training_command(profile, ROOT, "exp-001")


def test_the_recipe_knobs_reach_the_command_in_place(tmp_path):
    p = load_profile(str(profile_file(
        tmp_path, TOTAL_EPOCHS=3, TEST_FREQ=5, VAL_BEFORE_TRAIN="true", ROLLOUT_MAX_NUM_SEQS=64,
        ROLLOUT_MAX_NUM_BATCHED_TOKENS=8192, ROLLOUT_ENFORCE_EAGER="false")))
    tutorial = words(load_profile(None))
    mine = words(p)
    assert len(mine) == len(tutorial)
    changed = {a: b for a, b in zip(tutorial, mine) if a != b}
    assert changed == {
        "trainer.total_epochs=1": "trainer.total_epochs=3",
        "trainer.test_freq=-1": "trainer.test_freq=5",
        "trainer.val_before_train=false": "trainer.val_before_train=true",
        "actor_rollout_ref.rollout.max_num_seqs=16": "actor_rollout_ref.rollout.max_num_seqs=64",
        "actor_rollout_ref.rollout.max_num_batched_tokens=2048":
            "actor_rollout_ref.rollout.max_num_batched_tokens=8192",
        "actor_rollout_ref.rollout.enforce_eager=true": "actor_rollout_ref.rollout.enforce_eager=false",
    }


def test_wandb_runs_offline_into_the_run_folder(tmp_path):
    p = load_profile(str(profile_file(tmp_path, LOGGERS="console,tensorboard,wandb")))
    argv = words(p)
    assert "trainer.logger=[console,tensorboard,wandb]" in argv
    env = "+ray_kwargs.ray_init.runtime_env.env_vars"
    assert f"{env}.WANDB_MODE='offline'" in argv
    assert f"{env}.WANDB_DIR='{RUN}/wandb'" in argv
    assert command.runtime_env(p, ROOT)["env_vars"]["WANDB_MODE"] == "offline"
    driver = command.driver_environment(p, ROOT, RUN)
    assert (driver["WANDB_MODE"], driver["WANDB_DIR"]) == ("offline", f"{RUN}/wandb")
    # Without wandb, W&B stays disabled, as in the tutorial.
    assert command.runtime_env(load_profile(None), ROOT)["env_vars"]["WANDB_MODE"] == "disabled"


def test_a_logger_other_than_wandb_is_refused(tmp_path):
    with pytest.raises(UsageError, match="LOGGERS='console,mlflow' is not a valid"):
        load_profile(str(profile_file(tmp_path, LOGGERS="console,mlflow")))


def test_extra_overrides_replace_a_tutorial_value_in_place_and_append_new_keys(tmp_path):
    extra = "data.shuffle=true actor_rollout_ref.actor.use_kl_loss=true +trainer.max_actor_ckpt_to_keep=1"
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES=extra)))
    tutorial, mine = words(load_profile(None)), words(p)
    assert mine[tutorial.index("data.shuffle=false")] == "data.shuffle=true"
    assert mine[tutorial.index("actor_rollout_ref.actor.use_kl_loss=false")] == \
        "actor_rollout_ref.actor.use_kl_loss=true"
    assert mine[len(tutorial):] == ["+trainer.max_actor_ckpt_to_keep=1"]
    assert "data.shuffle=false" not in mine


def test_extra_overrides_are_recorded_in_run_json(tmp_path):
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES="data.shuffle=true")))
    (tmp_path / "runs/verl/two-worker-grpo/r1").mkdir(parents=True)
    args = types.SimpleNamespace(storage_root=tmp_path, run_id="r1", save_freq=None, launcher=None,
                                 bundle_sums_sha256="a" * 64, launcher_sha256="b" * 64,
                                 profile=str(p.path))
    from twgrpo.cli import launcher
    assert launcher.record_run(args) == 0
    record = json.loads((tmp_path / "runs/verl/two-worker-grpo/r1/run.json").read_text())
    assert record["profile"]["values"]["EXTRA_OVERRIDES"] == "data.shuffle=true"
    assert "data.shuffle=true" in record["training_command"]


@pytest.mark.parametrize("word,ident", [
    ("data.train_files=/tmp/other.parquet", "GEN-E050"),
    ("actor_rollout_ref.model.path=/elsewhere", "GEN-E050"),
    ("trainer.nnodes=4", "GEN-E050"),
    ("trainer.n_gpus_per_node=8", "GEN-E050"),
    ("trainer.experiment_name=other", "GEN-E050"),
    ("trainer.default_local_dir=/tmp/ckpt", "GEN-E050"),
    ("+ray_kwargs.ray_init.address=10.0.0.1:6379", "GEN-E050"),
    ("hydra.run.dir=/tmp", "GEN-E050"),
    ("trainer.total_training_steps=100", "GEN-E050"),
    ("trainer=null", "GEN-E050"),
    ("actor_rollout_ref.actor.checkpoint.load_contents=[model]", "GEN-E050"),  # a partial resume
    ("actor_rollout_ref.actor.checkpoint.save_contents=[model]", "GEN-E050"),
    ("data.shuffle", "GEN-E051"),
    ("=true", "GEN-E051"),
])
def test_an_override_of_what_the_bundle_owns_is_refused_with_a_finding(tmp_path, word, ident,
                                                                       capsys):
    path = profile_file(tmp_path, EXTRA_OVERRIDES=f"data.shuffle=true {word}")
    p = load_profile(str(path))
    found = [f for f in recipe.check_extra_overrides(p) if f.level == "error"]
    assert [f.id for f in found] == [ident] and word in found[0].message
    with pytest.raises(UsageError, match=re.escape(ident)):
        words(p)
    assert cli.main(["check-profile", "--profile", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"({ident})" in out and re.search(r"extra-overrides \.+ FAIL \(1\)", out)


def test_a_key_overridden_twice_is_refused(tmp_path):
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES="data.shuffle=true data.shuffle=false")))
    assert [f.id for f in recipe.check_extra_overrides(p) if f.level == "error"] == ["GEN-E051"]


def resolved_ctx(tmp_path, profile, argv):
    run = tmp_path / "runs/verl/two-worker-grpo/exp-001"
    run.mkdir(parents=True)
    (run / "resolved-command.txt").write_text(" ".join(shlex.quote(w) for w in argv) + "\n")
    (run / "run.json").write_text(json.dumps({"storage_root": str(tmp_path)}))
    return types.SimpleNamespace(run_dir=run, run_id="exp-001", profile=profile, evidence={})


def test_postflight_judges_the_extra_overrides_on_the_command_verl_ran(tmp_path):
    extra = "data.shuffle=true +trainer.max_actor_ckpt_to_keep=1 ~reward_model"
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES=extra)))
    ok = resolved_ctx(tmp_path / "ok", p, command.training_command(p, tmp_path / "ok", "exp-001"))
    assert command_record.check_resolved_command(ok) == []
    dropped = [w for w in command.training_command(p, tmp_path / "bad", "exp-001")
               if w not in ("+trainer.max_actor_ckpt_to_keep=1", "~reward_model")]
    bad = resolved_ctx(tmp_path / "bad", p, dropped)
    found = command_record.check_resolved_command(bad)
    assert [f.id for f in found] == ["POST-E006", "POST-E006"]
    assert {f.evidence["expected"] for f in found} == {"present", "1"}


def test_postflight_judges_the_recipe_values(tmp_path):
    p = load_profile(str(profile_file(tmp_path, TEST_FREQ=5)))
    argv = [w.replace("trainer.test_freq=5", "trainer.test_freq=-1")
            for w in command.training_command(p, tmp_path, "exp-001")]
    found = command_record.check_resolved_command(resolved_ctx(tmp_path, p, argv))
    assert [(f.id, f.evidence["expected"], f.evidence["actual"]) for f in found] == \
        [("POST-E006", "5", "-1")]


@pytest.mark.parametrize("values,drop,ident,check", [
    ({"ROLLOUT_TP": 4, "TRAIN_BATCH_SIZE": 8, "PPO_MINI_BATCH_SIZE": 8}, (), "PRE-E060",
     "batch-sizes"),
    ({"MAX_PROMPT_LENGTH": 2048}, (), "PRE-E101", "rollout-lengths"),
    ({"NCCL_IB_HCA": "mlx5_0"}, (), "PRE-E102", "nccl-values"),
    ({}, ("MODEL_SUMS_SHA256",), "INP-E070", "input-pins"),
    ({"DATA_CONVERTER": "converters/mine.py"}, (), "INP-E070", "input-pins"),  # no sha256 yet
    ({"TARGET_STEPS": 2000}, (), "PRE-E005", "batch-sizes"),
])
def test_check_profile_runs_every_rule_that_needs_no_cluster(tmp_path, capsys, values, drop,
                                                             ident, check):
    path = profile_file(tmp_path, drop=drop, **values)
    assert cli.main(["check-profile", "--profile", str(path)]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"{check} \.+ FAIL \(1\)", out) and f"({ident})" in out
    assert out.count("FAIL (") == 1


def test_more_epochs_make_room_for_more_steps(tmp_path, capsys):
    path = profile_file(tmp_path, TARGET_STEPS=2000, TOTAL_EPOCHS=2)
    assert cli.main(["check-profile", "--profile", str(path)]) == 0
    assert "check-profile: PASSED (5 checks)" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["tutorial-2x2-a100", "smoke-1x1", "smoke-2x1"])
def test_every_bundle_profile_passes_check_profile(name, capsys):
    assert cli.main(["check-profile", "--profile", name]) == 0


def synth_validated(tmp_path, val_steps, **values):
    import synthrun
    path = profile_file(tmp_path, **values)
    run = tmp_path / "runs/verl/two-worker-grpo/exp-001"
    synthrun.write_run(run, load_profile(str(path)), "exp-001", str(ROOT),
                       [{"hostname": f"w-{i}", "ip": f"10.0.0.{10 + i}"} for i in range(2)],
                       val_steps=val_steps)
    return run, path


def postflight_ids(run, path):
    from verification import failed_ids
    code = cli.main(["postflight", "--output-dir", str(run), "--profile", str(path)])
    return code, failed_ids(run)


def test_validation_the_profile_asks_for_is_checked_in_tensorboard(tmp_path):
    from twgrpo.checks.postflight.validation import expected_steps
    assert expected_steps(5, True, 1, 12) == {0, 5, 10, 12}
    assert expected_steps(-1, True, 4, 12) == {3}
    run, path = synth_validated(tmp_path, [0, 1, 2], TEST_FREQ=1, VAL_BEFORE_TRAIN="true")
    assert postflight_ids(run, path) == (0, set())
    record = json.loads((run / "verification.json").read_text())
    assert record["evidence"]["validation"]["expected_steps"] == [0, 1, 2]


def test_validation_missing_at_a_step_is_named(tmp_path):
    run, path = synth_validated(tmp_path, [0, 2], TEST_FREQ=1, VAL_BEFORE_TRAIN="true")
    code, found = postflight_ids(run, path)
    assert (code, found) == (1, {"POST-E153"})
    assert "no finite val-core/* value at steps 1 (expected at 0, 1, 2)" in \
        (run / "verification.json").read_text()


def test_validation_absent_altogether_is_a_finding(tmp_path):
    run, path = synth_validated(tmp_path, [], TEST_FREQ=2)
    assert postflight_ids(run, path) == (1, {"POST-E152"})


def test_a_profile_without_validation_passes_the_check_and_says_why(tmp_path, capsys):
    run, path = synth_validated(tmp_path, [])
    assert postflight_ids(run, path) == (0, set())
    assert re.search(r"validation \.+ ok", capsys.readouterr().out)
    record = json.loads((run / "verification.json").read_text())
    assert "runs no validation" in record["evidence"]["validation"]["why"]


def test_the_driver_pythonpath_names_each_folder_once():
    # The RuntimeEnv's PYTHONPATH (verl, then the rollout adapter) reaches the launcher as the
    # caller's path: the driver puts verl first without naming it, or anything, twice.
    p = load_profile("smoke-1x1")
    runtime = command.runtime_env(p, ROOT)["env_vars"]["PYTHONPATH"]
    verl, rollout = runtime.split(":")
    driver = command.driver_environment(p, ROOT, RUN, f"{runtime}:{rollout}::/opt/site")
    assert driver["PYTHONPATH"] == f"{verl}:{rollout}:/opt/site"
    assert command.driver_environment(p, ROOT, RUN)["PYTHONPATH"] == verl


def test_project_and_experiment_names_are_profile_labels_and_recorded(tmp_path):
    p = load_profile(str(profile_file(tmp_path, PROJECT_NAME="gsm8k-h100", EXPERIMENT_NAME="lr-sweep")))
    argv = words(p)
    assert "trainer.project_name=gsm8k-h100" in argv and "trainer.experiment_name=lr-sweep" in argv
    assert "trainer.project_name=verl_aistudio" in words(load_profile(None))  # the tutorial's
    assert "trainer.experiment_name=exp-001" in words(load_profile(None))     # RUN_ID by default
    assert p.to_json()["values"]["PROJECT_NAME"] == "gsm8k-h100"  # what run.json records
    found = recipe.check_extra_overrides(load_profile(str(profile_file(
        tmp_path, name="other", EXTRA_OVERRIDES="trainer.project_name=x"))))
    assert [(f.id, "set PROJECT_NAME" in f.message) for f in found if f.level == "error"] == \
        [("GEN-E050", True)]


def test_wandb_online_takes_mode_entity_and_project_from_the_profile_never_the_key(
        tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "secret-key-0123456789")
    p = load_profile(str(profile_file(tmp_path, LOGGERS="console,tensorboard,wandb",
                                      WANDB_MODE="Online", WANDB_ENTITY="my-team",
                                      PROJECT_NAME="gsm8k-h100")))
    argv = words(p)
    env = "+ray_kwargs.ray_init.runtime_env.env_vars"
    assert f"{env}.WANDB_MODE='online'" in argv and f"{env}.WANDB_ENTITY='my-team'" in argv
    assert "trainer.project_name=gsm8k-h100" in argv
    runtime = command.runtime_env(p, ROOT)
    assert (runtime["env_vars"]["WANDB_MODE"], runtime["env_vars"]["WANDB_ENTITY"]) == \
        ("online", "my-team")
    driver = command.driver_environment(p, ROOT, RUN)
    written = json.dumps([argv, runtime, driver, p.to_json()])
    assert "secret-key" not in written and "WANDB_API_KEY" not in written
    # the key is never a profile value
    with pytest.raises(UsageError, match=r"\(PROF-E002\) unknown key WANDB_API_KEY"):
        load_profile(str(profile_file(tmp_path, name="keyed", WANDB_API_KEY="x")))
