"""Profiles parse strictly; batch sizes are judged as verl 0.6.0 would judge them."""
import pytest
from twgrpo.checks.rules import sizes
from twgrpo.run.findings import UsageError
from twgrpo.run.profile import load_profile, parse_profile_text, with_overrides


def test_the_default_profile_is_the_tutorials():
    p = load_profile(None)
    assert (p.PROFILE_NAME, p.NODES, p.GPUS_PER_NODE, p.world_size) == ("tutorial-2x2-a100", 2, 2, 4)
    assert p.VERL_COMMIT == "ddd86f527a4af75095e4677b02b5aa272913a088"
    assert (p.TRAIN_ROWS, p.TEST_ROWS, p.ROLLOUT_ENGINE) == (7473, 1319, "sglang")


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("NODES=2", "NODES=two"), "NODES='two' is not a valid"),
    (lambda t: t.replace("MIN_DRIVER=525.60.13\n", ""), "MIN_DRIVER is missing"),
    (lambda t: t + "NODES=3\n", "NODES set twice"),
    (lambda t: t + "EXTRA=1\n", "unknown key EXTRA"),
    (lambda t: t + "not a line\n", "not KEY=value"),
    (lambda t: t.replace("ROLLOUT_ENGINE=sglang", "ROLLOUT_ENGINE=trt"), "ROLLOUT_ENGINE='trt'"),
])
def test_a_bad_profile_is_refused_with_every_problem(edit, message):
    text = load_profile(None).path.read_text()
    with pytest.raises(UsageError, match=message):
        parse_profile_text(edit(text), "bad.env")


def test_a_profile_name_must_match_its_file(tmp_path):
    path = tmp_path / "other.env"
    path.write_text(load_profile(None).path.read_text())
    with pytest.raises(UsageError, match="differs from its file name other"):
        load_profile(str(path))


def ids(**values):
    return sorted(f.id for f in sizes.check_batch_sizes(with_overrides(load_profile(None), **values)))


@pytest.mark.parametrize("values,expected", [
    ({}, []),
    ({"TRAIN_BATCH_SIZE": 5}, ["PRE-E001"]),                          # 10 % 4
    ({"TRAIN_BATCH_SIZE": 2}, ["PRE-E002"]),                          # 2 < mini 4
    ({"PPO_MICRO_BATCH_SIZE_PER_GPU": 3}, ["PRE-E003"]),              # 4*2//4 = 2, 2 % 3
    ({"PPO_MINI_BATCH_SIZE": 1, "ROLLOUT_N": 1, "TRAIN_BATCH_SIZE": 4}, ["PRE-E003"]),  # 1//4 = 0
    ({"ROLLOUT_TP": 3}, ["PRE-E004", "PRE-E060"]),                  # 4 % 3, and 3 > 2 per node
    ({"ROLLOUT_TP": 4}, ["PRE-E060"]),                                # a replica over 2 nodes
    ({"GPUS_PER_NODE": 3, "ROLLOUT_TP": 2, "TRAIN_BATCH_SIZE": 6, "PPO_MINI_BATCH_SIZE": 6},
     ["PRE-E061"]),                                                   # 3 % 2: replicas cannot tile
    ({"TRAIN_BATCH_SIZE": 5, "ROLLOUT_N": 1, "ROLLOUT_TP": 2, "PPO_MICRO_BATCH_SIZE_PER_GPU": 1},
     ["PRE-E001", "PRE-E062"]),                                       # 5 % (4 / 2): unequal chunks
    ({"TRAIN_ROWS": 7, "TRAIN_BATCH_SIZE": 4}, ["PRE-E005"]),
    ({"NODES": 4, "TRAIN_BATCH_SIZE": 8, "PPO_MINI_BATCH_SIZE": 8}, []),  # 4x2, any topology
])
def test_batch_sizes_against_the_world_size(values, expected):
    assert ids(**values) == expected


def test_a_recorded_profile_value_cannot_smuggle_in_another_key(tmp_path, capsys):
    import json
    from twgrpo.cli import main
    values = dict(load_profile("smoke-1x1").values)
    del values["NODES"]  # the smuggled line would supply it
    values["GPU_MODEL"] = "NVIDIA H200\nNODES=9"
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"name": "x", "values": values}}))
    assert main(["report", "--output-dir", str(tmp_path)]) == 2
    assert "cannot read the run's profile" in capsys.readouterr().err


def test_a_profile_without_row_counts_waits_for_pin_inputs_to_measure_them():
    """A new profile carries no tutorial counts: it parses, its row rules wait, and the pins check
    names the counts with the hashes (check-profile: INP-E070)."""
    from twgrpo.checks.rules.recipe import check_input_pins
    text = load_profile(None).path.read_text()
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("TRAIN_ROWS=", "TEST_ROWS=")))
    p = parse_profile_text(text.replace("TARGET_STEPS=2", "TARGET_STEPS=auto"), "new.env")
    assert (p.TRAIN_ROWS, p.TEST_ROWS, p.TARGET_STEPS) == (0, 0, 0)
    assert sizes.check_batch_sizes(p) == []
    (pins,) = check_input_pins(p)
    assert pins.id == "INP-E070" and pins.evidence["missing"] == ["TRAIN_ROWS", "TEST_ROWS"]
