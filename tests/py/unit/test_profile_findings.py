"""A profile's values as findings: each problem with its id, the object, a HINT and a did-you-mean;
words read in any case; GPU_MODEL as a list; TARGET_STEPS=auto, and a TARGET_STEPS that leaves
epochs unrun said as a warning."""
import re

import pytest

from test_preflight_checks import context
from test_recipe import profile_file
from twgrpo import cli
from twgrpo.checks.preflight import preflight
from twgrpo.run import command
from twgrpo.run.profile import ProfileError, load_profile, parse_profile_text, with_overrides

TUTORIAL = load_profile(None).path.read_text()


@pytest.mark.parametrize("edit,ident,obj,said", [
    (lambda t: t + "NCCL_SOCKET_IFNAM=eth0\n", "PROF-E002", "line",
     "unknown key NCCL_SOCKET_IFNAM; did you mean NCCL_SOCKET_IFNAME?"),
    (lambda t: t.replace("TRAIN_BATCH_SIZE=4", "TRAIN_BATCH_SIZE=12.5"), "PROF-E005",
     "TRAIN_BATCH_SIZE", "TRAIN_BATCH_SIZE='12.5' is not a valid prompts per step"),
    (lambda t: t + "NCCL_TRANSPORT=rdma\n", "PROF-E005", "NCCL_TRANSPORT",
     "NCCL_TRANSPORT='rdma' is not a valid"),
    (lambda t: t.replace("ROLLOUT_ENGINE=sglang", "ROLLOUT_ENGINE=sglan"), "PROF-E005",
     "ROLLOUT_ENGINE", "did you mean sglang?"),
    (lambda t: t + "not a line\n", "PROF-E001", "line", "not KEY=value"),
    (lambda t: t + "NODES=3\n", "PROF-E003", "line", "NODES set twice"),
    (lambda t: t.replace("MIN_DRIVER=525.60.13\n", ""), "PROF-E004", "MIN_DRIVER",
     "MIN_DRIVER is missing"),
    (lambda t: t.replace("TARGET_STEPS=2", "TARGET_STEPS=auto").replace("TRAIN_ROWS=7473",
                                                                        "TRAIN_ROWS=3"),
     "PROF-E005", "TARGET_STEPS", "TARGET_STEPS=auto gives no step"),
])
def test_each_profile_problem_is_a_finding_with_its_hint(edit, ident, obj, said):
    with pytest.raises(ProfileError) as caught:
        parse_profile_text(edit(TUTORIAL), "bad.env")
    (found,) = caught.value.findings
    assert (found.id, found.obj.split()[2]) == (ident, obj) and said in found.message
    text = str(caught.value)
    assert f"profile bad.env {obj}" in text and f"({ident}) " in text and "HINT: " in text


def test_every_problem_of_a_profile_is_told_at_once():
    text = TUTORIAL.replace("NODES=2", "NODES=two") + "NCCL_SOCKET_IFNAM=eth0\n"
    with pytest.raises(ProfileError) as caught:
        parse_profile_text(text, "bad.env")
    assert sorted(f.id for f in caught.value.findings) == ["PROF-E002", "PROF-E005"]


def test_a_profile_name_unlike_its_file_is_a_finding(tmp_path):
    path = tmp_path / "other.env"
    path.write_text(TUTORIAL)
    with pytest.raises(ProfileError, match=r"\(PROF-E006\) PROFILE_NAME=tutorial-2x2-a100"):
        load_profile(str(path))


def test_words_are_read_in_any_case_and_kept_in_lower_case(tmp_path):
    p = load_profile(str(profile_file(tmp_path, NCCL_TRANSPORT="IB", ROLLOUT_ENGINE="SGLang",
                                      PARAM_OFFLOAD="True", LOGGERS="Console,TensorBoard")))
    assert (p.NCCL_TRANSPORT, p.ROLLOUT_ENGINE, p.PARAM_OFFLOAD, p.LOGGERS) == \
        ("ib", "sglang", "true", "console,tensorboard")
    assert command.nccl_env(p)["NCCL_IB_DISABLE"] == "0"
    words = command.training_command(p, tmp_path, "r1")
    assert "actor_rollout_ref.actor.fsdp_config.param_offload=true" in words


def test_target_steps_auto_is_epochs_times_the_train_splits_batches(tmp_path):
    p = load_profile(str(profile_file(tmp_path, TARGET_STEPS="auto", TOTAL_EPOCHS=2)))
    assert p.TARGET_STEPS == 2 * (7473 // 4) == 3736
    assert p.to_json()["values"]["TARGET_STEPS"] == "3736"  # run.json records the number
    assert "trainer.total_training_steps=3736" in command.training_command(p, tmp_path, "r1")


def test_a_target_that_leaves_epochs_unrun_is_a_warning(tmp_path, capsys):
    path = profile_file(tmp_path, TARGET_STEPS=1, TOTAL_EPOCHS=2)
    assert cli.main(["check-profile", "--profile", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"batch-sizes \.+ ok \(1 warning\)", out)
    assert "(PRE-W005) TARGET_STEPS 1 ends in epoch 1 of TOTAL_EPOCHS 2" in out
    assert "TARGET_STEPS=auto would be 3736" in out
    # the tutorial's one epoch cut to 2 steps, and a target inside the last epoch, say nothing
    for values in ({}, {"TARGET_STEPS": 1869, "TOTAL_EPOCHS": 2}):
        assert cli.main(["check-profile", "--profile",
                         str(profile_file(tmp_path, **values))]) == 0
        assert "PRE-W005" not in capsys.readouterr().out


def test_gpu_model_takes_a_list_of_names(tmp_path):
    ctx = context(tmp_path)
    ctx.profile = with_overrides(ctx.profile, GPU_MODEL="NVIDIA H100 80GB HBM3,NVIDIA H200")
    for gpu in ctx.reports[0]["gpu_query"]["gpus"]:
        gpu["name"] = "NVIDIA H100 80GB HBM3"
    for gpu in ctx.reports[1]["gpu_query"]["gpus"]:
        gpu["name"] = "NVIDIA H200"
    assert preflight.check_gpus(ctx) == []
    ctx.reports[1]["gpu_query"]["gpus"][0]["name"] = "NVIDIA A100-SXM4-80GB"
    (found,) = preflight.check_gpus(ctx)
    assert found.id == "PRE-E021" and found.evidence["actual"] == "NVIDIA A100-SXM4-80GB"
    assert ctx.profile.gpu_models == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert with_overrides(ctx.profile, GPU_MODEL="*").gpu_models == []
    with pytest.raises(ProfileError, match="PROF-E005"):
        with_overrides(ctx.profile, GPU_MODEL="NVIDIA H200,")
