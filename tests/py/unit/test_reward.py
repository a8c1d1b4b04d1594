"""Your reward, pinned: REWARD_FILE is hashed by pin-inputs, checked by the inputs phase (prep box,
launcher, every node's probe), given to verl by the command, judged by postflight and shown by
the report; edited after pinning, it is refused before GPU time with the file named."""
import re

from test_preflight_checks import context
from test_recipe import profile_file, resolved_ctx
from test_report import report
from twgrpo import cli
from twgrpo.checks.postflight import command_record
from twgrpo.checks.preflight import preflight
from twgrpo.run import command
from twgrpo.run.profile import load_profile
from prep.volume import pin

import synthrun

REWARD = "def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n"


def fixture_profile(storage, **values):
    """The storage fixture's pinned profile with some values added, as a profile file of its own."""
    text = (storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env").read_text()
    text = re.sub(r"(?m)^PROFILE_NAME=.*$", "PROFILE_NAME=mine", text)
    text += "".join(f"{key}={value}\n" for key, value in values.items())
    path = storage / "mine.env"
    path.write_text(text)
    return path


def pinned_reward(storage):
    (storage / "rewards").mkdir()
    (storage / "rewards/mine.py").write_text(REWARD)
    unpinned = fixture_profile(storage, REWARD_FILE="rewards/mine.py", REWARD_FUNCTION="score")
    sha = pin.read_pins(load_profile(str(unpinned)), storage)["REWARD_SHA256"]
    return fixture_profile(storage, REWARD_FILE="rewards/mine.py", REWARD_FUNCTION="score",
                           REWARD_SHA256=sha), sha


def inputs(storage, path):
    return cli.main(["inputs", "--profile", str(path), "--storage-root", str(storage)])


def test_the_reward_is_pinned_and_an_edit_is_refused_with_the_file_named(storage, capsys):
    path, sha = pinned_reward(storage)
    assert inputs(storage, path) == 0
    assert re.search(r"reward-file \.+ ok", capsys.readouterr().out)
    (storage / "rewards/mine.py").write_text(REWARD.replace("1.0", "2.0"))
    assert inputs(storage, path) == 1
    out = capsys.readouterr().out
    assert re.search(r"reward-file \.+ FAIL \(1\)", out)
    assert f"{storage}/rewards/mine.py: (INP-E081) sha256 of REWARD_FILE" in out and sha in out


def test_a_reward_file_that_is_missing_a_link_or_unpinned_is_refused(storage, capsys):
    path, _ = pinned_reward(storage)
    (storage / "rewards/mine.py").rename(storage / "rewards/real.py")
    (storage / "rewards/mine.py").symlink_to(storage / "rewards/real.py")
    assert inputs(storage, path) == 1
    assert "(INP-E080) REWARD_FILE is not a regular file" in capsys.readouterr().out
    (storage / "rewards/mine.py").unlink()
    assert inputs(storage, path) == 1
    assert "(INP-E080) REWARD_FILE cannot be read" in capsys.readouterr().out
    unpinned = fixture_profile(storage, REWARD_FILE="rewards/real.py")
    assert inputs(storage, unpinned) == 1
    assert "(INP-E070) the profile pins no REWARD_SHA256" in capsys.readouterr().out
    assert cli.main(["check-profile", "--profile", str(unpinned)]) == 1
    assert "REWARD_SHA256 not pinned yet" in capsys.readouterr().out


def test_the_command_gives_verl_the_pinned_reward_and_postflight_judges_it(tmp_path):
    p = load_profile(str(profile_file(tmp_path, REWARD_FILE="rewards/mine.py",
                                      REWARD_FUNCTION="score", REWARD_SHA256="a" * 64)))
    argv = command.training_command(p, tmp_path, "exp-001")
    assert f"custom_reward_function.path={tmp_path}/rewards/mine.py" in argv
    assert "custom_reward_function.name=score" in argv
    assert not any("custom_reward_function" in w
                   for w in command.training_command(load_profile(None), tmp_path, "exp-001"))
    ok = resolved_ctx(tmp_path / "ok", p, command.training_command(p, tmp_path / "ok", "exp-001"))
    assert command_record.check_resolved_command(ok) == []
    dropped = [w for w in command.training_command(p, tmp_path / "bad", "exp-001")
               if not w.startswith("custom_reward_function.path=")]
    found = command_record.check_resolved_command(resolved_ctx(tmp_path / "bad", p, dropped))
    assert [f.id for f in found] == ["POST-E006"]


def test_every_node_must_see_the_same_reward(tmp_path):
    ctx = context(tmp_path)
    ctx.reports[0]["inputs"]["evidence"]["reward_sha256"] = "a" * 64
    ctx.reports[1]["inputs"]["evidence"]["reward_sha256"] = "b" * 64
    assert [f.id for f in preflight.check_same_inputs(ctx)] == ["PRE-E028"]


def test_the_report_shows_the_reward(tmp_path, capsys):
    p = load_profile(str(profile_file(tmp_path, REWARD_FILE="rewards/mine.py",
                                      REWARD_FUNCTION="score", REWARD_SHA256="c" * 64)))
    run = tmp_path / "runs/verl/two-worker-grpo/exp-001"
    synthrun.write_run(run, p, "exp-001", "/mnt/verl-reproduction",
                       [{"hostname": "w-0", "ip": "10.0.0.10"}, {"hostname": "w-1", "ip": "10.0.0.11"}],
                       run_json=True)
    _, out, text = report(run, capsys)
    assert "  reward    rewards/mine.py: score (sha256 cccccccccccccccc)" in out
    assert "rewards/mine.py: score (sha256 cccccccccccccccc)" in text


def test_every_node_must_see_the_same_data_converter(tmp_path):
    ctx = context(tmp_path)
    ctx.reports[0]["inputs"]["evidence"]["data_converter_sha256"] = "a" * 64
    ctx.reports[1]["inputs"]["evidence"]["data_converter_sha256"] = "b" * 64
    assert [f.id for f in preflight.check_same_inputs(ctx)] == ["PRE-E028"]


def test_the_report_shows_the_datas_converter(tmp_path, capsys):
    p = load_profile(str(profile_file(tmp_path, DATA_CONVERTER="converters/mine.py",
                                      DATA_CONVERTER_SHA256="d" * 64)))
    run = tmp_path / "runs/verl/two-worker-grpo/exp-001"
    synthrun.write_run(run, p, "exp-001", "/mnt/verl-reproduction",
                       [{"hostname": "w-0", "ip": "10.0.0.10"}, {"hostname": "w-1", "ip": "10.0.0.11"}],
                       run_json=True)
    _, out, text = report(run, capsys)
    assert "  data      openai/gsm8k made by converters/mine.py (sha256 dddddddddddddddd)" in out
    assert "openai/gsm8k made by converters/mine.py (sha256 dddddddddddddddd)" in text
