"""What make submit sends, before any cluster: the job server's address, the RuntimeEnv valid
for job submission (no client-side paths; verl and, for ROLLOUT_ENGINE=hf, the rollout adapter
on PYTHONPATH; the job's variables as env vars) and the Driver command as entrypoint."""
import json
import subprocess
import sys

import pytest

from prep import bundle, jobspec
from prep.jobs_api import JobsError, one_line, parse_address
from twgrpo.run.catalog import CATALOG

ROOT = "/mnt/verl-reproduction"


@pytest.mark.parametrize("address, base", [
    ("http://10.0.0.5:8265", "http://10.0.0.5:8265"),
    ("http://head:8265/", "http://head:8265"),
    ("https://ray.example.org", "https://ray.example.org"),
])
def test_a_job_server_address_is_its_base_url(address, base):
    assert parse_address(address) == base


@pytest.mark.parametrize("address, fid", [
    ("", "SUB-E001"), ("10.0.0.5:6379", "SUB-E002"), ("ray://head:10001", "SUB-E002"),
    ("http://head:8265/api/jobs", "SUB-E002"), ("http://head:port", "SUB-E002"), ("http://", "SUB-E002"),
])
def test_a_wrong_address_is_one_line_with_its_id(address, fid):
    with pytest.raises(JobsError) as caught:
        parse_address(address)
    assert caught.value.fid == fid and "\n" not in str(caught.value) and " — " not in str(caught.value)
    assert "http://<head>:8265" in caught.value.hint == CATALOG[fid][1]  # the fix, once


def test_make_runtime_env_puts_the_rollout_adapter_on_pythonpath_for_hf_profiles_only():
    def pythonpath(profile):
        return jobspec.bundle_runtime_env(ROOT, profile, bundle.BUNDLE)["env_vars"]["PYTHONPATH"]
    assert pythonpath("smoke-1x1").split(":") == [
        f"{ROOT}/code/verl/999af4135fcd9518fa40f62bbea21b5cf568a3e3",
        f"{ROOT}/tools/verl/two-worker-grpo/rollout"]
    assert ":" not in pythonpath("tutorial-2x2-a100")  # SGLang: verl only


def test_the_job_runtime_env_has_no_client_side_path_and_carries_the_job_variables():
    env = jobspec.job_runtime_env(ROOT, "tutorial-2x2-a100", bundle.BUNDLE,
                                  {"RUN_ID": "exp-1", "SAVE_FREQ": "", "KILL_GRACE": "30"})
    hosted = json.loads((bundle.REPO / "runtime-env.json").read_text(encoding="utf-8"))
    assert "working_dir" in hosted  # the hosted form's RuntimeEnv keeps it
    assert set(env) == {"env_vars"}
    expected = {**hosted["env_vars"], "RUN_ID": "exp-1", "KILL_GRACE": "30",
                "RAY_JOB_STOP_WAIT_TIME_S": "60"}
    assert env["env_vars"] == expected  # SAVE_FREQ empty: left unset


def test_the_entrypoint_is_the_driver_command_run_by_bash_through_one_sh():
    spec = jobspec.job_spec(ROOT, "smoke-1x1", None, {"RUN_ID": "exp-1"})
    command = subprocess.run([sys.executable, str(bundle.REPO / "prep" / "bundle.py"),
                              "driver-command", ROOT, "--profile", "smoke-1x1"],
                             capture_output=True, text=True, check=True).stdout.rstrip("\n")
    # Ray runs the entrypoint with /bin/sh -c: the script bash gets must be the command itself.
    seen = subprocess.run(["sh", "-c", spec["entrypoint"].replace("bash -c ", "printf %s ", 1)],
                          capture_output=True, text=True, check=True).stdout
    assert seen == command
    assert spec["submission_id"] == "exp-1" and "export RUN_ID" not in command


def test_a_server_traceback_becomes_its_error_line():
    text = "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: Job with submission_id a already exists.\n.\n"
    assert one_line(text) == "ValueError: Job with submission_id a already exists."
    assert one_line("") == "no message"
    assert len(one_line("x" * 1000)) == 301


@pytest.mark.parametrize("name", [*jobspec.SHELL_VARIABLES, "BASH_FUNC_exec"])
def test_a_job_variable_that_configures_the_shell_is_refused(name):
    with pytest.raises(jobspec.SpecError, match=rf"^\(SUB-E015\) job variable '{name}' configures the shell"):
        jobspec.job_spec(ROOT, "", None, {"RUN_ID": "exp-001", name: "/mnt/verl-reproduction/hooks.sh"})


@pytest.mark.parametrize("tool", ["rayjob", "sbatch"])
@pytest.mark.parametrize("variable", ["BASH_ENV=/mnt/verl-reproduction/hooks.sh", "SHELLOPTS=xtrace"])
def test_rayjob_and_sbatch_print_nothing_for_a_shell_variable(capsys, tool, variable):
    from prep import rayjob, sbatch
    main = {"rayjob": rayjob.main, "sbatch": sbatch.main}[tool]
    extra = ["--image", "registry.example/verl:0.6", "--claim", "verl-volume"] if tool == "rayjob" else []
    assert main(["--run-id", "exp-001", *extra, "--var", variable]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{tool}: (SUB-E015) job variable '{variable.split('=')[0]}'" in err
