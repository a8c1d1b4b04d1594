"""make sbatch against a real Slurm (Debian's slurm-wlm: slurmctld and one slurmd per host of the
multi-host test cluster, munge): `sbatch` runs the printed script, which brings Ray up on the
allocation (head on the first node, a Ray node per other node through srun), runs the Driver
command and ends with the launcher's verdict on stub GPUs; a node whose Ray never joins is named
(SLURM-E001) before any phase runs. The printed scripts pass ShellCheck. Like the other
multi-host suites, it builds the test cluster on a fixed subnet: run one such suite at a time."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dev import slurmcluster
from dev.stubgpus import gpus_csv
from prep import sbatch
from twgrpo.run.catalog import CATALOG

REPO = Path(__file__).resolve().parents[3]
REASON = slurmcluster.missing_prerequisites()
BUNDLE_REL = Path("tools/verl/two-worker-grpo")


def printed(capsys, *args):
    status = sbatch.main(["--run-id", "exp-1", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("extra", [[], ["--container", "pyxis", "--image", "nvcr.io#org/verl:0.6"],
                                   ["--container", "apptainer", "--image", "/images/verl.sif",
                                    "--partition", "gpu", "--account", "rl", "--time", "2-00:00:00"]])
def test_the_printed_script_passes_shellcheck_and_asks_for_the_profiles_nodes(capsys, tmp_path, extra):
    if not shutil.which("shellcheck"):
        pytest.skip("needs shellcheck (tests/run.sh installs it)")
    status, out, err = printed(capsys, "--profile", "tutorial-2x2-a100", *extra)
    assert status == 0, err
    (tmp_path / "job.sh").write_text(out)
    lint = subprocess.run(["shellcheck", str(tmp_path / "job.sh")], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    assert "#SBATCH --nodes=2" in out and "#SBATCH --ntasks-per-node=1" in out
    assert "#SBATCH --gpus-per-node=2" in out
    assert "export RUN_ID=exp-1" in out and "export NCCL_IB_DISABLE=1" in out
    if "pyxis" in extra:
        assert "CONTAINER_SRUN=(--container-image='nvcr.io#org/verl:0.6' --container-mounts=" \
               "/mnt/verl-reproduction:/mnt/verl-reproduction)" in out
    if "apptainer" in extra:
        assert "CONTAINER_EXEC=(apptainer exec --nv --bind /mnt/verl-reproduction:" \
               "/mnt/verl-reproduction /images/verl.sif)" in out
        assert "#SBATCH --partition=gpu" in out and "#SBATCH --time=2-00:00:00" in out


@pytest.mark.parametrize("args, words", [
    (["--container", "docker"], "SLURM_CONTAINER='docker'"),
    (["--container", "pyxis"], "SLURM_IMAGE=''"),
    (["--time", "forever"], "SLURM_TIME='forever'"),
    (["--partition", "gpu;rm"], "SLURM_PARTITION='gpu;rm'"),
    (["--gpus", "3"], "SLURM_GPUS='3'"),
    (["--join-timeout", "0"], "SLURM_JOIN_TIMEOUT='0'"),
    (["--ray-port", "80"], "SLURM_RAY_PORT='80'"),
])
def test_a_bad_setting_is_one_line_and_its_hint_and_prints_no_script(capsys, args, words):
    status, out, err = printed(capsys, "--profile", "tutorial-2x2-a100", *args)
    assert status == 2 and out == ""
    assert err.startswith("sbatch: (SLURM-E004) ") and words in err and err.count("\n") == 2
    assert err.endswith(f"\n    HINT: {CATALOG['SLURM-E004'][1]}\n")


def test_the_script_outside_a_slurm_job_says_so_and_starts_nothing(capsys, tmp_path):
    status, out, _ = printed(capsys, "--profile", "smoke-2x1")
    (tmp_path / "job.sh").write_text(out)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith("twgrpo-slurm: (SLURM-E003) not inside a Slurm job")
    assert list(tmp_path.iterdir()) == [tmp_path / "job.sh"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if REASON:
        pytest.skip(f"real Slurm on the multi-host test cluster: {REASON}")
    root = tmp_path_factory.mktemp("slurm")

    def prepare(storage):
        subprocess.run([sys.executable, str(REPO / "tests/lib/fixture.py"), str(storage),
                        "--nodes", "2", "--gpus-per-node", "2"], check=True, capture_output=True)
    cluster = slurmcluster.SlurmCluster(root).up(2, prepare)
    gpus_csv(root / "gpus.csv", 2)
    try:
        yield cluster
    finally:
        cluster.down()


def job(slurm, capsys, tmp_path, run_id, *more, path_first="", sbatch_args=()):
    storage = slurm.net.storage  # the script asks for the profile's 2 GPUs per node: Slurm's GRES
    status = sbatch.main(["--run-id", run_id, "--profile", "test-fixture", "--storage-root",
                          str(storage), "--bundle", str(storage / BUNDLE_REL),
                          "--join-timeout", "40", "--ray-port", "6390",  # not the other suites' 6379
                          "--var", "COLLECTIVE_PROBE=off", *more])
    out, err = capsys.readouterr()
    assert status == 0, err
    script = tmp_path / f"{run_id}.sh"
    script.write_text(out)
    env = slurm.env({"NVIDIA_SMI_STUB": str(slurm.root / "gpus.csv"),
                     "RAY_TEMP_DIR": str(slurm.net.ray_temp)})  # a tmpfs of its own on each host
    if path_first:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    done = slurm.sbatch(script, tmp_path, env, *sbatch_args)
    output = "".join(p.read_text(errors="replace") for p in tmp_path.glob(f"twgrpo-{run_id}-*.out"))
    return done.returncode, output, storage / "runs/verl/two-worker-grpo" / run_id


def test_sbatch_runs_the_script_to_the_launchers_verdict_across_the_hosts(slurm, capsys, tmp_path):
    code, output, run = job(slurm, capsys, tmp_path, "slurm-1", "--var", "STANDIN_MODE=artifacts",
                            "--var", f"STANDIN_LIB={REPO / 'tests' / 'lib'}")
    assert code == 0, output
    assert "twgrpo-slurm: all 2 node(s) joined; running the Driver command" in output
    hosts = sorted(line.split('"hostname": "')[1].split('"')[0] for line in output.splitlines()
                   if line.startswith("WORKER_TOPOLOGY "))
    assert hosts == ["node-0", "node-1"]  # preflight probed both Slurm nodes through Ray
    assert "twgrpo-slurm: run slurm-1 ended with exit status 0 (SUCCESS)" in output
    assert (run / "SUCCESS").is_file()
    assert "twgrpo-slurm: stopping Ray on 2 node(s)" in output
    logs = {p.name: p.read_text() for p in tmp_path.glob("twgrpo-*/ray-node-*.log")}
    assert sorted(logs) == ["ray-node-0.log", "ray-node-1.log"]


def test_the_gpus_the_script_asks_for_are_allocated_by_slurm_and_seen_by_each_step(slurm, tmp_path):
    script = tmp_path / "gpus.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=2\n"
                      "srun --overlap -N1 -n1 -w node-1 printenv SLURM_GPUS_ON_NODE\n")
    assert slurm.sbatch(script, tmp_path, slurm.env()).returncode == 0
    assert [p.read_text() for p in tmp_path.glob("slurm-*.out")] == ["2\n"]
    too_many = slurm.sbatch(script, tmp_path, slurm.env(), "--gpus-per-node=3", "--immediate=5")
    assert too_many.returncode != 0  # Slurm allocates only the GPUs the nodes have


def test_a_failed_run_ends_the_job_with_the_launchers_status(slurm, capsys, tmp_path):
    code, output, run = job(slurm, capsys, tmp_path, "slurm-2", "--var", "STANDIN_MODE=fail")
    assert code != 0 and (run / "FAILED").is_file(), output
    status = [line for line in (run / "FAILED").read_text().splitlines() if line.startswith("exit_status=")]
    assert status == [f"exit_status={code}"]
    assert f"ended with exit status {code} (FAILED)" in output


def test_a_node_that_never_joins_is_named_and_no_phase_runs(slurm, capsys, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("ray", path=slurm.env()["PATH"])
    (shim / "ray").write_text(f'#!/bin/sh\n[ "$(hostname)" = node-1 ] && exec sleep 3600\nexec {real} "$@"\n')
    (shim / "ray").chmod(0o755)
    code, output, run = job(slurm, capsys, tmp_path, "slurm-3", path_first=str(shim))
    assert code == 2, output
    assert "twgrpo-slurm: (SLURM-E001) node(s) node-1 did not join the Ray cluster within 40 s" in output
    assert not run.exists()  # the Driver command never ran
    slurm.wait(slurm.all_idle, 30, "the nodes stay busy: a step outlived the job")  # all ended


def test_an_allocation_of_another_size_is_refused_before_ray_starts(slurm, capsys, tmp_path):
    code, output, run = job(slurm, capsys, tmp_path, "slurm-4", sbatch_args=["--nodes=1"])
    assert code == 2, output
    assert "twgrpo-slurm: (SLURM-E002) the allocation has 1 node(s), the profile needs 2" in output
    assert not run.exists() and not list(tmp_path.glob("twgrpo-*/ray-*.log"))
