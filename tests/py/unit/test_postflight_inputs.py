"""Postflight re-hashes the inputs the run read against the run's recorded pins: a model weight,
a data file or the reward file changed after the inputs phase never reads SUCCESS, and inputs
that are not on this box are named in a warning, never passed in silence.

A synthesized run (synthrun) inside a generated storage root (tests/lib/fixture.py: pinned model,
data and verl tree), judged as `make postflight` judges it.
"""
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.run.profile import load_profile, with_overrides
from verification import failed_ids

HOSTS = [{"hostname": f"worker-{i}", "ip": f"10.231.0.{10 + i}"} for i in range(8)]


def profile_of(storage):
    return load_profile(str(storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env"))


def make_run(storage, profile=None):
    profile = profile or profile_of(storage)
    run = storage / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(run, profile, "exp-001", str(storage), HOSTS[:profile.NODES], run_json=True)
    return run


def postflight(run):
    return main(["postflight", "--output-dir", str(run)])


def rehashed(run):
    return json.loads((run / "verification.json").read_text())["evidence"].get("inputs_rehashed")


def warnings(run):
    record = json.loads((run / "verification.json").read_text())
    return [f for c in record["checks"] for f in c["findings"] if f["level"] == "warning"]


def flip(path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 1
    path.write_bytes(bytes(raw))


def model(storage):
    return next((storage / "models").rglob("model.safetensors")).parent


def data(storage):
    return next((storage / "datasets").rglob("train.parquet")).parent


def test_a_run_whose_inputs_are_unchanged_passes_and_says_it_re_hashed_them(storage):
    run = make_run(storage)
    assert postflight(run) == 0
    assert rehashed(run) == ["model", "data"]
    assert (run / "SUCCESS").is_file()


@pytest.mark.parametrize("change", [
    lambda s: flip(model(s) / "model.safetensors"),        # a weight's bytes
    lambda s: flip(data(s) / "train.parquet"),              # a training example
    lambda s: (model(s) / "config.json").unlink(),           # a file the loader reads, gone
])
def test_an_input_changed_after_the_inputs_phase_never_reads_success(storage, change):
    run = make_run(storage)
    change(storage)
    assert postflight(run) == 1
    assert "POST-E171" in failed_ids(run)
    assert not (run / "SUCCESS").exists()


def test_a_changed_reward_file_never_reads_success(storage):
    reward = storage / "rewards" / "score.py"
    reward.parent.mkdir()
    reward.write_text("def compute_score(*args, **kwargs):\n    return 1.0\n")
    pinned = with_overrides(profile_of(storage),
        REWARD_FILE="rewards/score.py", REWARD_FUNCTION="compute_score",
        REWARD_SHA256=hashlib.sha256(reward.read_bytes()).hexdigest())
    run = make_run(storage, pinned)
    assert postflight(run) == 0 and rehashed(run) == ["model", "data", "reward file"]
    (run / "verification.json").unlink()
    (run / "SUCCESS").unlink()
    reward.write_text("def compute_score(*args, **kwargs):\n    return 2.0\n")
    assert postflight(run) == 1
    assert "POST-E171" in failed_ids(run)


def test_inputs_not_on_this_box_are_named_in_a_warning_not_passed_in_silence(storage, capsys):
    run = make_run(storage)
    shutil.rmtree(storage / "models")  # the volume holds the run, this box lacks the model
    assert postflight(run) == 0
    assert rehashed(run) == ["data"]
    [warning] = [w for w in warnings(run) if w["id"] == "POST-W020"]
    assert "not re-hashed, not found on this box: model (" in warning["message"]
    assert "(POST-W020)" in capsys.readouterr().out


def test_a_run_folder_outside_a_volume_layout_warns_that_nothing_was_re_hashed(storage, tmp_path):
    run = make_run(storage)
    moved = Path(shutil.copytree(run, tmp_path / "elsewhere" / "exp-001"))
    assert postflight(moved) == 0
    assert rehashed(moved) is None
    assert any(w["id"] == "POST-W020" and "cannot be found" in w["message"] for w in warnings(moved))
