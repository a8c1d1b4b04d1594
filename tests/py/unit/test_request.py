"""The run request (job variables, profile values, volume) is checked in Python before the
launcher writes anything: each bad value gets its id and a hint; numbers are numbers."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from twgrpo.checks.rules import request
from twgrpo.run import runid
from twgrpo.run.findings import UsageError
from twgrpo.run.profile import load_profile, parse_profile_text

REPO = Path(__file__).resolve().parents[3]
VERIFIER = REPO / "tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py"


def ids(problems):
    return [str(p).split(")")[0].lstrip("(") for p in problems]


def base(tmp_path, **extra):
    return {"STORAGE_ROOT": str(tmp_path), "RUN_ID": "exp-1", **extra}


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1", "0", "0.0", "1e3", "", " 5", "86401"])
def test_probe_timeout_must_be_seconds_above_zero(tmp_path, value):
    env = base(tmp_path, PROBE_TIMEOUT=value)
    problems = request.variable_problems(env)
    if value == "":  # unset or empty: the default 120
        assert problems == []
    else:
        assert ids(problems) == ["LAUNCH-E040"], problems
        assert "(default 120 s)" in problems[0].hint


@pytest.mark.parametrize("value,seconds", [("30", 30.0), ("0.5", 0.5), ("86400", 86400.0)])
def test_probe_timeout_accepts_plain_seconds(tmp_path, value, seconds):
    assert request.variable_problems(base(tmp_path, PROBE_TIMEOUT=value)) == []
    assert request.probe_timeout(value) == seconds


def test_tmpdir_must_be_a_writable_folder(tmp_path):
    for value in ("/nonexistent", "relative/tmp", str(tmp_path / "file")):
        (tmp_path / "file").write_text("x")
        assert ids(request.variable_problems(base(tmp_path, TMPDIR=value))) == ["LAUNCH-E041"]
    assert request.variable_problems(base(tmp_path, TMPDIR=str(tmp_path))) == []


@pytest.mark.parametrize("root,fid", [("relative/vol", "LAUNCH-E042"), ("-dash", "LAUNCH-E042"),
                                      ("~/vol", "LAUNCH-E042")]
                         + [(f"/mnt/a{c}b", "LAUNCH-E043") for c in ",'~#;([{= \n$`\\"])
def test_storage_root_is_a_plain_absolute_path(root, fid):
    problems = request.variable_problems({"STORAGE_ROOT": root, "RUN_ID": "exp-1"})
    assert ids(problems) == [fid], problems


def test_every_bad_variable_is_named_at_once(tmp_path):
    env = {"STORAGE_ROOT": "rel", "RUN_ID": "a b", "SAVE_FREQ": "0", "RESUME_FROM": "a b",
           "PROFILE": "../x", "KILL_GRACE": "soon", "PROBE_TIMEOUT": "nan", "TMPDIR": "/nonexistent",
           "TRACE": "yes"}
    assert ids(request.variable_problems(env)) == [
        "LAUNCH-E042", "LAUNCH-E004", "LAUNCH-E030", "LAUNCH-E031", "LAUNCH-E009", "LAUNCH-E016",
        "LAUNCH-E040", "LAUNCH-E049", "LAUNCH-E041"]
    missing = request.variable_problems({})
    assert ids(missing) == ["LAUNCH-E002", "LAUNCH-E003"]


@pytest.mark.parametrize("value", ["-e+.", "e", ".", "+", "1e", "-1e-6", "0", "1e999", "nan", "inf"])
def test_a_profile_number_must_be_a_positive_number(value):
    text = load_profile("smoke-1x1").to_text().replace("LEARNING_RATE=1e-6", f"LEARNING_RATE={value}")
    with pytest.raises(UsageError, match=r"LEARNING_RATE=.* is not a valid actor learning rate"):
        parse_profile_text(text, "x.env")


@pytest.mark.parametrize("value", ["1e-6", "0.000001", "3E-5", ".5", "2"])
def test_a_profile_number_in_decimal_or_exponent_form_is_accepted(value):
    text = load_profile("smoke-1x1").to_text().replace("LEARNING_RATE=1e-6", f"LEARNING_RATE={value}")
    assert parse_profile_text(text, "x.env").LEARNING_RATE == value


def test_the_volume_checks_come_in_order_and_a_valid_request_prints_quoted_settings(tmp_path):
    env = base(tmp_path / "absent", PROFILE="smoke-1x1")
    with pytest.raises(request.RequestError) as caught:
        request.check(env)
    assert ids(caught.value.problems) == ["LAUNCH-E005"]
    env = base(tmp_path, PROFILE="smoke-1x1")
    with pytest.raises(request.RequestError) as caught:
        request.check(env)
    assert ids(caught.value.problems) == ["LAUNCH-E007"]
    profile = load_profile("smoke-1x1")
    for folder in (profile.verl_root(tmp_path), profile.model_root(tmp_path),
                   profile.data_root(tmp_path)):
        folder.mkdir(parents=True)
    out = subprocess.run([sys.executable, "-I", "-B", str(VERIFIER), "request"], text=True,
                         capture_output=True, env={**env, "PROBE_TIMEOUT": "45"})
    assert out.returncode == 0, out.stderr
    settings = dict(shlex.split(line)[0].split("=", 1) for line in out.stdout.splitlines())
    assert settings == {"PROFILE_NAME": "smoke-1x1", "KILL_GRACE": "10", "PROBE_TIMEOUT": "45",
                        "RUN_DIR_PLANNED": str(tmp_path / "runs/verl/two-worker-grpo/exp-1"),
                        "HEARTBEAT_INTERVAL": "30", "HEARTBEAT_LEASE": "120", "ATTEMPT_NOTE": "",
                        "COLLECTIVE_PROBE": "nccl", "COLLECTIVE_TIMEOUT": "60",
                        "STALL_FIRST_STEP": "3600", "STALL_STEP_FLOOR": "900"}
    (tmp_path / "runs/verl/two-worker-grpo/exp-1").mkdir(parents=True)
    with pytest.raises(request.RequestError) as caught:
        request.check(env)
    assert ids(caught.value.problems) == ["LAUNCH-E008"]


def test_the_job_environment_record_names_dropped_hooks_and_what_can_still_shape_the_run():
    env = {"TWGRPO_SHELL_HOOKS": "BASH_ENV BASH_FUNC_sha256sum%%", "PYTHONPATH": "/site",
           "LD_PRELOAD": "/lib/x.so", "PATH": "/usr/bin", "HOME": "/root"}
    record = request.job_environment(env, sys.executable)
    assert record["shell_hooks_dropped"] == ["BASH_ENV", "BASH_FUNC_sha256sum%%"]
    assert record["variables"] == {"PATH": "/usr/bin", "PYTHONPATH": "/site",
                                   "LD_PRELOAD": "/lib/x.so"}
    assert record["python3_realpath"] == os.path.realpath(sys.executable)


@pytest.mark.parametrize("name,value,fid", [
    ("COLLECTIVE_TIMEOUT", "soon", "LAUNCH-E051"), ("COLLECTIVE_TIMEOUT", "0", "LAUNCH-E051"),
    ("COLLECTIVE_PROBE", "NCCL", "LAUNCH-E053"), ("STALL_FIRST_STEP", "never", "LAUNCH-E052"),
    ("STALL_STEP_FLOOR", "off", "LAUNCH-E052"), ("STALL_STEP_FLOOR", "-5", "LAUNCH-E052")])
def test_collective_and_watchdog_settings_must_be_what_they_say(tmp_path, name, value, fid):
    assert ids(request.variable_problems(base(tmp_path, **{name: value}))) == [fid]


def test_the_watchdog_can_be_turned_off_and_the_probe_kept_to_gloo(tmp_path):
    env = base(tmp_path, STALL_FIRST_STEP="off", COLLECTIVE_PROBE="gloo", COLLECTIVE_TIMEOUT="20")
    assert request.variable_problems(env) == []


@pytest.mark.parametrize("name, value, fid", [
    ("RUN_ID", "x\n", "LAUNCH-E004"), ("RUN_ID", "x\r", "LAUNCH-E004"),
    ("RESUME_FROM", "earlier\n", "LAUNCH-E031"), ("SAVE_FREQ", "2\n", "LAUNCH-E030"),
    ("PROFILE", "test-fixture\n", "LAUNCH-E009"), ("STORAGE_ROOT", "/mnt/x\n", "LAUNCH-E043"),
])
def test_a_trailing_newline_is_no_part_of_a_valid_value(tmp_path, name, value, fid):
    assert fid in ids(request.variable_problems(base(tmp_path, **{name: value})))


def test_one_run_id_rule_everywhere_refuses_control_characters():
    from prep import jobspec
    from twgrpo.run import profile_keys
    for text in ("x\n", "x\t", "x\x1b[2J"):
        assert not profile_keys.NAME.match(text) and not runid.is_run_id(text)
        assert "(LAUNCH-E004)" in " ".join(map(str, request.variable_problems({"STORAGE_ROOT": "/mnt", "RUN_ID": text})))
        with pytest.raises(jobspec.SpecError, match=r"^\(SUB-E012\)"):
            jobspec.check_run_id(text)
