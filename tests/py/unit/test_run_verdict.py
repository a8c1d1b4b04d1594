"""SUCCESS never lies: a failing re-run supersedes it (nothing deleted), report shows the latest
verdict and every conflict, records are whole or absent on a full or read-only disk, symlinked
run folders are refused, and the verifier cannot be shadowed by files beside or around it."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synthrun
from twgrpo.run import runfolder
from twgrpo.cli import main
from twgrpo.run.profile import load_profile
from twgrpo.run.records import RecordError, write_json, write_new_text

REPO = Path(__file__).resolve().parents[3]
BUNDLE = REPO / "tools/verl/two-worker-grpo"
VERIFY = BUNDLE / "verify-two-worker-grpo-v1.py"
HOSTS = [{"hostname": "worker-a", "ip": "10.0.0.1"}, {"hostname": "worker-b", "ip": "10.0.0.2"}]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs or a "
                                "read-only bind mount")


def make(parent):
    run = parent / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(run, load_profile("tutorial-2x2-a100"), "exp-001", "/mnt/verl-reproduction",
                       HOSTS)
    return run


def verify(*args, cwd=None, env=None):
    """The verifier as the launcher runs it: isolated, no bytecode."""
    return subprocess.run([sys.executable, "-I", "-B", str(VERIFY), *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def damage_tracker(run):
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")


def report(run, capsys):
    capsys.readouterr()
    assert main(["report", "--output-dir", str(run), "--profile", "tutorial-2x2-a100"]) == 0
    return capsys.readouterr().out


def test_report_shows_the_latest_verdict_after_a_failing_rerun(tmp_path, capsys):
    run = make(tmp_path)
    assert main(["postflight", "--output-dir", str(run)]) == 0
    assert report(run, capsys).startswith("run exp-001: SUCCESS"), "before the damage"
    damage_tracker(run)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    out = report(run, capsys)
    assert out.startswith("run exp-001: FAILED: the latest postflight found problems"), out
    assert not (run / "SUCCESS").exists() and len(list(run.glob("SUCCESS.superseded-*"))) == 1
    # repaired and judged again: SUCCESS is back, the superseded one stays
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    assert main(["postflight", "--output-dir", str(run)]) == 0
    out = report(run, capsys)
    assert out.startswith("run exp-001: SUCCESS"), out
    assert len(list(run.glob("SUCCESS.superseded-*"))) == 1


def test_a_stale_success_beside_a_failed_record_is_a_conflict_not_a_verdict(tmp_path, capsys):
    run = make(tmp_path)
    damage_tracker(run)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    (run / "SUCCESS").write_text("2026-01-01T00:00:00+00:00\n")  # left by an older version
    out = report(run, capsys)
    assert out.startswith("run exp-001: FAILED"), out
    assert "  conflict: SUCCESS (written 2026-01-01T00:00:00+00:00) is superseded" in out


def test_any_failed_phase_record_supersedes_success_and_names_stay_unique(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for number in range(3):
        (run / "SUCCESS").write_text(f"success {number}\n")
        runfolder.record_phase(run / "inputs.json", {"phase": "inputs", "status": "failed"})
        assert not (run / "SUCCESS").exists()
    moved = sorted(run.glob("SUCCESS.superseded-*"))
    assert sorted(p.read_text() for p in moved) == [f"success {n}\n" for n in range(3)]
    assert json.loads((run / "inputs.json").read_text())["superseded_success"] in {p.name for p in moved}
    runfolder.record_phase(run / "inputs.json", {"phase": "inputs", "status": "passed"})
    assert len(list(run.glob("SUCCESS*"))) == 3


def test_postflight_without_a_passed_inputs_record_writes_no_success(tmp_path):
    run = make(tmp_path)
    (run / "inputs.json").write_text(json.dumps({"phase": "inputs", "status": "failed"}))
    assert main(["postflight", "--output-dir", str(run)]) == 1
    record = json.loads((run / "verification.json").read_text())
    # POST-W020: this synthetic volume holds no model or data to re-hash, and says so
    assert {f["id"] for c in record["checks"] for f in c["findings"]} == {"POST-E041", "POST-W020"}
    assert not (run / "SUCCESS").exists()


def test_a_symlinked_run_folder_is_refused_and_the_other_run_is_untouched(tmp_path, capsys):
    other = make(tmp_path / "a")
    damage_tracker(other)
    before = {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()}
    runs = tmp_path / "b" / "runs" / "verl" / "two-worker-grpo"
    runs.mkdir(parents=True)
    (runs / "exp-002").symlink_to(other)
    code = main(["postflight", "--storage-root", str(tmp_path / "b"), "--run-id", "exp-002",
                 "--profile", "tutorial-2x2-a100"])
    assert code == 2
    assert "(POST-E040) run folder" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()} == before


def test_a_symlinked_record_is_not_written_through(tmp_path):
    run = make(tmp_path)
    victim = tmp_path / "victim.json"
    victim.write_text("keep")
    (run / "verification.json").symlink_to(victim)
    out = verify("postflight", "--output-dir", str(run))
    assert out.returncode == 1
    assert "(GEN-E004)" in out.stderr and "Traceback" not in out.stderr
    assert victim.read_text() == "keep"


def test_a_300_character_run_id_gets_its_own_message(tmp_path):
    out = verify("postflight", "--storage-root", str(tmp_path), "--run-id", "r" * 300)
    assert out.returncode == 2
    assert "RUN_ID is 300 characters long; at most 128" in out.stderr


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_records_and_markers_are_readable_as_the_umask_allows(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_json(tmp_path / "run.json", {"a": 1})
        assert write_new_text(tmp_path / "SUCCESS", "t\n")
    finally:
        os.umask(old)
    assert (tmp_path / "run.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "SUCCESS").stat().st_mode & 0o777 == mode


def test_a_marker_is_never_replaced(tmp_path):
    assert write_new_text(tmp_path / "SUCCESS", "first\n")
    assert not write_new_text(tmp_path / "SUCCESS", "second\n")
    assert (tmp_path / "SUCCESS").read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["SUCCESS"]  # no temporary left


@pytest.fixture
def mounts():
    made = []
    yield made
    for path in reversed(made):
        subprocess.run(["umount", str(path)], check=False)


def fill(path):
    for name, block in ((".filler", 64 << 10), (".filler-small", 512)):
        with open(path / name, "wb", buffering=0) as stream:
            try:
                while True:
                    stream.write(b"\0" * block)
            except OSError:
                pass


@needs_root
def test_postflight_on_a_full_disk_names_the_cause_and_leaves_no_empty_marker(tmp_path, mounts):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    mounts.append(disk)
    run = make(disk)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    fill(disk)
    out = verify("postflight", "--output-dir", str(run))
    assert out.returncode == 1
    assert "(GEN-E002) cannot write" in out.stderr and "No space left on device" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert not (run / "SUCCESS").exists()
    assert not list(run.glob(".*.tmp"))
    assert {p: p.read_bytes() for p in before} == before  # nothing lost
    for name in (".filler", ".filler-small"):
        (disk / name).unlink()
    out = verify("postflight", "--output-dir", str(run))
    assert out.returncode == 0, out.stdout + out.stderr
    assert (run / "SUCCESS").stat().st_size > 0


@needs_root
def test_success_on_a_full_disk_is_whole_or_absent(tmp_path, mounts):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    mounts.append(disk)
    fill(disk)
    with pytest.raises(RecordError, match=r"\(GEN-E002\) cannot write .*SUCCESS: No space left"):
        write_new_text(disk / "SUCCESS", "2026-12-02T00:00:00+00:00\n")
    assert not (disk / "SUCCESS").exists()
    assert sorted(p.name for p in disk.iterdir()) == [".filler", ".filler-small"]


@needs_root
def test_postflight_on_a_read_only_run_folder_names_the_cause(tmp_path, mounts):
    run = make(tmp_path)
    subprocess.run(["mount", "--bind", str(run), str(run)], check=True)
    mounts.append(run)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(run)], check=True)
    out = verify("postflight", "--output-dir", str(run))
    assert out.returncode == 1
    assert "(GEN-E002)" in out.stderr and "Read-only file system" in out.stderr
    assert "Traceback" not in out.stderr


def copy_bundle(dest):
    from prep import bundle
    bundle.install_files(dest, force=True)
    return dest


def test_nothing_beside_or_around_the_verifier_can_shadow_a_module(tmp_path):
    installed = copy_bundle(tmp_path / "bundle")
    shadow = tmp_path / "shadow"
    (shadow / "twgrpo").mkdir(parents=True)
    for path in (installed / "argparse.py", installed / "twgrpo" / "json.py",
                 shadow / "argparse.py", shadow / "json.py", shadow / "twgrpo" / "__init__.py"):
        path.write_text('raise SystemExit("shadowed")\n')
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    out = subprocess.run([sys.executable, "-I", "-B", str(installed / VERIFY.name), "catalog"],
                         capture_output=True, text=True, cwd=shadow, env=env)
    assert out.returncode == 0 and "shadowed" not in out.stdout + out.stderr, out.stderr
    assert "| `POST-E040` |" in out.stdout
    # even without -I, the bundle's own folder never reaches sys.path
    out = subprocess.run([sys.executable, "-B", str(installed / VERIFY.name), "catalog"],
                         capture_output=True, text=True, cwd=shadow)
    assert out.returncode == 0 and "shadowed" not in out.stdout + out.stderr, out.stderr
    assert not list(installed.rglob("__pycache__"))


def test_an_installed_bundle_accepts_only_listed_profiles(tmp_path):
    installed = copy_bundle(tmp_path / "bundle")
    listed = installed / "profiles" / "smoke-1x1.env"
    args = ["runtime-env", "--storage-root", "/mnt/x"]
    assert verify_in(installed, *args, "--profile", "smoke-1x1").returncode == 0
    shutil.copy(listed, installed / "profiles" / "unlisted.env")
    text = listed.read_text().replace("PROFILE_NAME=smoke-1x1", "PROFILE_NAME=unlisted")
    (installed / "profiles" / "unlisted.env").write_text(text)
    out = verify_in(installed, *args, "--profile", "unlisted")
    assert out.returncode == 2 and "is not listed in the bundle's SHA256SUMS" in out.stderr
    listed.write_text(listed.read_text() + "# changed\n")
    out = verify_in(installed, *args, "--profile", "smoke-1x1")
    assert out.returncode == 2 and "differs from SHA256SUMS" in out.stderr


def verify_in(installed, *args):
    return subprocess.run([sys.executable, "-I", "-B", str(installed / VERIFY.name), *args],
                          capture_output=True, text=True)
