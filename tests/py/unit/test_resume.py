"""Resuming a preempted run under a new RUN_ID: the resume phase's checks and refusals, the
lineage it records, the training command it leads to, and postflight on resumed runs (a chain
of them too). Runs are synthesized in real formats (tests/lib/synthrun.py); the artifacts of a
real preempted and resumed GPU run are in test_resume_real.py."""
import hashlib
import json
import os
import shlex
import socket
import subprocess
from pathlib import Path

import pytest
import synthrun
from twgrpo.run import command, processes
from twgrpo.cli import main
from twgrpo.run.profile import load_profile, with_overrides
from twgrpo.run.runfolder import RunFolder

HOSTS = [{"hostname": "worker-0", "ip": "10.231.0.10"}]
PROFILE = "smoke-1x1"


def profile_of(steps):
    return with_overrides(load_profile(PROFILE), TARGET_STEPS=steps, SAVE_FREQ=1)


def record(root, run_id, profile, **extra):
    """run.json as the launcher's record-run writes it (a driver on another host by default)."""
    data = {"run_id": run_id, "storage_root": str(root), "profile": profile.to_json(),
            "bundle_sums_sha256": "a" * 64, "launcher_sha256": "b" * 64,
            "driver_host": "another-host", "driver_pid": 4242,
            "training_command": command.training_command(profile, root, run_id)}
    data.update(extra)
    run = RunFolder.at(root, run_id).path
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps(data, indent=2))
    return run


def preempted(root, run_id, profile, stop, first=1, resume_from=None, failed=True):
    """A run that saved checkpoints 1..stop (or first..stop) and was stopped by TERM."""
    run = record(root, run_id, profile)
    synthrun.write_run(run, profile, run_id, str(root), HOSTS, first_step=first, last_step=stop,
                       resume_from=resume_from, save_steps=list(range(first, stop + 1)))
    if failed:
        (run / "FAILED").write_text(f"time=2026-12-02T13:10:00Z\nphase=training\nexit_status=143\n"
                                    f"signal=TERM\nrun_id={run_id}\n")
    return run


def resume(root, run_id, earlier, profile):
    """The launcher's resume phase for a new run: its exit code and its resume.json."""
    record(root, run_id, profile)
    code = main(["resume", "--profile", PROFILE, "--storage-root", str(root), "--run-id", run_id,
                 "--resume-from", earlier])
    return code, json.loads((RunFolder.at(root, run_id).path / "resume.json").read_text())


def error_ids(phase_record):
    return {f["id"] for c in phase_record["checks"] for f in c["findings"] if f["level"] == "error"}


def tree_state(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


@pytest.fixture
def root(tmp_path):
    return tmp_path / "storage"


def test_resume_records_lineage_and_reads_the_earlier_run_only(root):
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    before = tree_state(earlier)
    code, phase = resume(root, "B", "A", prof)
    assert code == 0, phase
    assert tree_state(earlier) == before
    run = json.loads((RunFolder.at(root, "B").path / "run.json").read_text())
    lineage = run["resume"]
    assert lineage["from_run_id"] == "A" and lineage["step"] == 1 and lineage["chain"] == ["A"]
    assert lineage["checkpoint"] == "checkpoints/global_step_1"
    assert lineage["earlier_ended"]["signal"] == "TERM"
    step_dir = earlier / "checkpoints" / "global_step_1"
    assert lineage["files"] == {str(p.relative_to(step_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
                                for p in sorted(step_dir.rglob("*")) if p.is_file()}
    assert lineage["snapshot"] == "resume-from/A/checkpoints/global_step_1"
    copy = RunFolder.at(root, "B").path / lineage["snapshot"]
    assert tree_state(copy) == lineage["files"]
    assert "trainer.resume_mode=resume_path" in run["training_command"]
    assert f"trainer.resume_from_path={copy}" in run["training_command"]
    assert "trainer.del_local_ckpt_after_load=false" in run["training_command"]
    assert "trainer.resume_mode=disable" not in run["training_command"]


def test_the_training_command_follows_the_run_record(root, capsysbinary):
    prof = profile_of(2)
    preempted(root, "A", prof, stop=1)
    assert resume(root, "B", "A", prof)[0] == 0
    capsysbinary.readouterr()
    assert main(["command", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "B"]) == 0
    argv = capsysbinary.readouterr().out.decode().split("\0")[:-1]
    assert (f"trainer.resume_from_path={root}/runs/verl/two-worker-grpo/B/resume-from/A/checkpoints/"
            "global_step_1") in argv
    assert "trainer.save_freq=1" in argv  # the run's recorded SAVE_FREQ, not the profile file's 2


def test_record_run_applies_save_freq_and_names_its_driver(root, monkeypatch):  # the launcher is its parent
    monkeypatch.delenv("TWGRPO_IMAGE", raising=False)
    root.mkdir()
    RunFolder.at(root, "A").path.mkdir(parents=True)
    assert main(["record-run", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "A",
                 "--bundle-sums-sha256", "a" * 64, "--launcher-sha256", "b" * 64,
                 "--save-freq", "1"]) == 0
    run = json.loads((RunFolder.at(root, "A").path / "run.json").read_text())
    assert run["profile"]["values"]["SAVE_FREQ"] == "1"
    assert "trainer.save_freq=1" in run["training_command"]
    assert run["driver_pid"] == os.getppid() and run["driver_host"] == socket.gethostname()
    assert "image" not in run  # no image named: nothing recorded, nothing guessed


def test_record_run_records_the_image_the_manifest_named(root, monkeypatch):
    image = "registry.example/verl@sha256:" + "cd" * 32
    monkeypatch.setenv("TWGRPO_IMAGE", image)
    RunFolder.at(root, "A").path.mkdir(parents=True)
    assert main(["record-run", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "A",
                 "--bundle-sums-sha256", "a" * 64, "--launcher-sha256", "b" * 64]) == 0
    assert json.loads((RunFolder.at(root, "A").path / "run.json").read_text())["image"] == image


def test_record_run_refuses_a_bad_save_freq(root):
    RunFolder.at(root, "A").path.mkdir(parents=True)
    assert main(["record-run", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "A",
                 "--bundle-sums-sha256", "a" * 64, "--launcher-sha256", "b" * 64,
                 "--save-freq", "0"]) == 2


def set_value(run, key, value):
    data = json.loads((run / "run.json").read_text())
    data["profile"]["values"][key] = value
    (run / "run.json").write_text(json.dumps(data))


def set_field(run, key, value):
    data = json.loads((run / "run.json").read_text())
    data[key] = value
    (run / "run.json").write_text(json.dumps(data))


def relink(path, target):
    path.unlink()
    path.symlink_to(target)


def link_instead(root):
    real = RunFolder.at(root, "A").path
    real.rename(real.with_name("A-real"))
    real.symlink_to("A-real")


def running_here(root):
    run = RunFolder.at(root, "A").path
    (run / "FAILED").unlink()
    set_field(run, "driver_host", socket.gethostname())
    set_field(run, "driver_pid", os.getpid())
    for key, value in processes.identity(os.getpid()).items():  # this very process, not a reused pid
        set_field(run, key, value)


def gone_here(root):
    run = RunFolder.at(root, "A").path
    (run / "FAILED").unlink()
    child = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    set_field(run, "driver_host", socket.gethostname())
    set_field(run, "driver_pid", int(child.stdout))  # a pid that just ended


def damage_shard(root, step=1):
    path = RunFolder.at(root, "A").path / "checkpoints" / f"global_step_{step}" / "actor" / \
        "model_world_size_1_rank_0.pt"
    path.write_bytes(path.read_bytes()[:100])


def link_checkpoints_out(root):
    run = RunFolder.at(root, "A").path
    other = root / "elsewhere"
    (run / "checkpoints").rename(other)
    (run / "checkpoints").symlink_to(other)


REFUSALS = [  # (name, how the earlier run is made wrong, the refusal's id)
    ("unknown earlier run", lambda r: None, "RES-E001"),
    ("earlier run folder is a link", link_instead, "RES-E001"),
    ("run.json not JSON", lambda r: (RunFolder.at(r, "A").path / "run.json").write_text("{"), "RES-E002"),
    ("run.json a link to /dev/zero", lambda r: relink(RunFolder.at(r, "A").path / "run.json", "/dev/zero"), "RES-E002"),
    ("run.json huge", lambda r: (RunFolder.at(r, "A").path / "run.json").write_text(" " * (2 << 20)), "RES-E002"),
    ("run.json of another run", lambda r: set_field(RunFolder.at(r, "A").path, "run_id", "Z"), "RES-E002"),
    ("another profile value", lambda r: set_value(RunFolder.at(r, "A").path, "LEARNING_RATE", "1e-5"), "RES-E003"),
    ("another model pin", lambda r: set_value(RunFolder.at(r, "A").path, "MODEL_SUMS_SHA256", "c" * 64), "RES-E004"),
    ("another verl commit", lambda r: set_value(RunFolder.at(r, "A").path, "VERL_COMMIT", "d" * 40), "RES-E004"),
    ("another reward pin", lambda r: set_value(RunFolder.at(r, "A").path, "REWARD_SHA256", "f" * 64), "RES-E004"),
    ("another bundle", lambda r: set_field(RunFolder.at(r, "A").path, "bundle_sums_sha256", "e" * 64), "RES-E005"),
    ("earlier run succeeded", lambda r: (RunFolder.at(r, "A").path / "SUCCESS").write_text("x\n"), "RES-E006"),
    ("earlier run still running", running_here, "RES-E007"),
    ("no FAILED and its driver gone", gone_here, "RES-E008"),
    ("no FAILED, driver on another host", lambda r: (RunFolder.at(r, "A").path / "FAILED").unlink(), "RES-E008"),
    ("no checkpoint tracker", lambda r: (RunFolder.at(r, "A").path / "checkpoints" /
                                         "latest_checkpointed_iteration.txt").unlink(), "RES-E009"),
    ("tracker not a number", lambda r: (RunFolder.at(r, "A").path / "checkpoints" /
                                        "latest_checkpointed_iteration.txt").write_text("x"), "RES-E009"),
    ("the only checkpoint damaged", damage_shard, "RES-E009"),
    ("checkpoints lead outside the run", link_checkpoints_out, "RES-E011"),
]


@pytest.mark.parametrize("name,fault,fid", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_resume_refuses(root, name, fault, fid):
    prof = profile_of(2)
    if name != "unknown earlier run":
        preempted(root, "A", prof, stop=1)
    fault(root)
    code, phase = resume(root, "B", "A", prof)
    assert code == 1
    assert fid in error_ids(phase)
    run = json.loads((RunFolder.at(root, "B").path / "run.json").read_text())
    assert "resume" not in run and "trainer.resume_mode=disable" in run["training_command"]


def test_resume_refuses_its_own_run_id(root):
    code, phase = resume(root, "B", "B", profile_of(2))
    assert code == 1 and error_ids(phase) == {"RES-E001"}


def test_resume_refuses_a_checkpoint_at_the_target_step(root):
    prof = profile_of(2)
    preempted(root, "A", prof, stop=2)  # failed in postflight, say: nothing is left to train
    code, phase = resume(root, "B", "A", prof)
    assert code == 1 and error_ids(phase) == {"RES-E010"}


def test_save_freq_may_differ_between_the_runs(root):
    preempted(root, "A", profile_of(3), stop=1)
    code, phase = resume(root, "B", "A", with_overrides(profile_of(3), SAVE_FREQ=3))
    assert code == 0, phase


def test_the_latest_complete_checkpoint_at_or_before_the_tracker_is_picked(root):
    prof = profile_of(4)
    run = preempted(root, "A", prof, stop=3)
    damage_shard(root, step=3)  # torn by the preemption: step 2 is the latest complete one
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("3")
    code, phase = resume(root, "B", "A", prof)
    assert code == 0, phase
    assert phase["lineage"]["step"] == 2
    assert [r["step"] for r in phase["evidence"]["checkpoint"]["rejected"]] == [3]


def test_a_checkpoint_after_the_tracker_is_not_trusted(root):
    prof = profile_of(4)
    run = preempted(root, "A", prof, stop=3)
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")  # step 3 mid-save
    code, phase = resume(root, "B", "A", prof)
    assert code == 0 and phase["lineage"]["step"] == 2


# --- postflight on resumed runs -------------------------------------------------------------

def resumed(root, run_id, earlier, prof, stop=None):
    """A run resumed from `earlier` through the resume phase, then trained to `stop`."""
    code, phase = resume(root, run_id, earlier, prof)
    assert code == 0, phase
    step = phase["lineage"]["step"]
    run = RunFolder.at(root, run_id).path
    ckpt = str(command.resume_snapshot_dir(root, run_id, earlier, step))  # the copy verl loads
    stop = stop or prof.TARGET_STEPS
    synthrun.write_run(run, prof, run_id, str(root), HOSTS, first_step=step + 1, last_step=stop,
                       resume_from=ckpt, save_steps=list(range(step + 1, stop + 1)))
    argv = command.training_command(prof, root, run_id, (earlier, step))
    (run / "resolved-command.txt").write_text(" ".join(shlex.quote(a) for a in argv) + "\n")
    return run


def postflight(run):
    code = main(["postflight", "--output-dir", str(run)])
    return code, json.loads((run / "verification.json").read_text())


def test_postflight_passes_a_resumed_run(root):
    prof = profile_of(2)
    preempted(root, "A", prof, stop=1)
    run = resumed(root, "B", "A", prof)
    code, verdict = postflight(run)
    assert code == 0, error_ids(verdict)
    assert verdict["evidence"]["resume"]["step"] == 1
    assert sorted(verdict["evidence"]["rollouts"]) == ["2"]
    assert (run / "SUCCESS").exists()


def test_a_chain_of_resumes_reaches_success(root):
    prof = profile_of(3)
    preempted(root, "A", prof, stop=1)
    b = resumed(root, "B", "A", prof, stop=2)
    (b / "FAILED").write_text("phase=training\nsignal=TERM\n")
    c = resumed(root, "C", "B", prof)
    code, verdict = postflight(c)
    assert code == 0, error_ids(verdict)
    lineage = json.loads((c / "run.json").read_text())["resume"]
    assert lineage["chain"] == ["A", "B"] and lineage["step"] == 2
    assert verdict["evidence"]["resume"]["chain"] == ["A", "B"]


def no_load_line(run):
    log = run / "training.log"
    log.write_text("".join(l for l in log.read_text().splitlines(True) if "Load from" not in l))


def load_of_another_step(run):
    log = run / "training.log"
    log.write_text(log.read_text().replace("Load from checkpoint folder: " + str(run / "resume-from"),
                                           "Load from checkpoint folder: " + str(run.parent / "A")))


def shard_from_elsewhere(run):
    log = run / "training.log"
    log.write_text(log.read_text().replace("Loaded model from " + str(run / "resume-from"),
                                           "Loaded model from " + str(run.parent / "A")))


def step_one_trained_again(run):
    log = run / "training.log"
    log.write_text(log.read_text() + "(TaskRunner pid=3773) step:1 - training/global_step:1\n")


def tensorboard_from_step_one(run):
    synthrun.write_events(run / "tensorboard" / "events.out.tfevents.1764676801.host0.3773.0",
                          [(1, {t: 0.0 for t in synthrun.TAGS})])


def command_without_resume(run):
    path = run / "resolved-command.txt"
    path.write_text(path.read_text().replace("trainer.resume_mode=resume_path", "trainer.resume_mode=auto"))


def loaded_copy_changed(run):
    path = run / "resume-from" / "A" / "checkpoints" / "global_step_1" / "data.pt"
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b"\0")


def loaded_copy_gone(run):
    path = run / "resume-from" / "A" / "checkpoints" / "global_step_1"
    path.rename(path.with_name("moved"))


def loaded_copy_holds_a_link(run):
    shard = run / "resume-from" / "A" / "checkpoints" / "global_step_1" / "data.pt"
    elsewhere = run / "data-elsewhere.pt"
    elsewhere.write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(elsewhere)  # same bytes, but a link: what it names can change at any time


def lineage_damaged(run):
    data = json.loads((run / "run.json").read_text())
    data["resume"]["step"] = "one"
    (run / "run.json").write_text(json.dumps(data))


FAULTS = [
    (no_load_line, "POST-E061"),
    (load_of_another_step, "POST-E061"),
    (shard_from_elsewhere, "POST-E061"),
    (step_one_trained_again, "POST-E062"),
    (tensorboard_from_step_one, "POST-E063"),
    (command_without_resume, "POST-E064"),
    (loaded_copy_changed, "POST-E065"),
    (loaded_copy_gone, "POST-E065"),
    (loaded_copy_holds_a_link, "POST-E065"),
    (lineage_damaged, "POST-E060"),
]


@pytest.mark.parametrize("fault,fid", FAULTS, ids=[f.__name__ for f, _ in FAULTS])
def test_postflight_fails_a_resumed_run(root, fault, fid):
    prof = profile_of(2)
    preempted(root, "A", prof, stop=1)
    run = resumed(root, "B", "A", prof)
    fault(run)
    code, verdict = postflight(run)
    assert code == 1
    assert fid in error_ids(verdict)
    assert not (run / "SUCCESS").exists()


def test_postflight_of_a_fresh_run_ignores_resume(root):
    prof = profile_of(2)
    run = record(root, "F", prof)
    synthrun.write_run(run, prof, "F", str(root), HOSTS)
    code, verdict = postflight(run)
    assert code == 0, error_ids(verdict)
    assert verdict["evidence"]["resume"] is None


# --- the rows an attacker with write access to the volume tried -----------------------------

def test_a_checkpoint_folder_linked_out_of_the_earlier_run_is_refused(root, tmp_path):
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    actor = earlier / "checkpoints" / "global_step_1" / "actor"
    outside = tmp_path / "outside-actor"
    actor.rename(outside)
    actor.symlink_to(outside)
    code, phase = resume(root, "B", "A", prof)
    assert code == 1 and error_ids(phase) == {"RES-E020"}
    assert "resume" not in json.loads((RunFolder.at(root, "B").path / "run.json").read_text())


def test_a_shard_file_linked_out_of_the_earlier_run_is_refused(root, tmp_path):
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    shard = next((earlier / "checkpoints" / "global_step_1" / "actor").glob("optim_*.pt"))
    outside = tmp_path / "outside.pt"
    outside.write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(outside)
    code, phase = resume(root, "B", "A", prof)
    assert code == 1 and error_ids(phase) == {"RES-E020"}


def test_a_fifo_in_the_checkpoint_is_refused(root):
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    os.mkfifo(earlier / "checkpoints" / "global_step_1" / "actor" / "extra.pipe")
    code, phase = resume(root, "B", "A", prof)
    assert code == 1 and error_ids(phase) == {"RES-E021"}


def test_a_snapshot_that_cannot_be_written_is_named(root):
    prof = profile_of(2)
    preempted(root, "A", prof, stop=1)
    run = record(root, "B", prof)
    (run / "resume-from").write_text("in the way")  # the copy cannot be made there
    code = main(["resume", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "B",
                 "--resume-from", "A"])
    phase = json.loads((run / "resume.json").read_text())
    assert code == 1 and error_ids(phase) == {"RES-E022"}


def test_verl_loads_the_hashed_copy_whatever_happens_to_the_earlier_checkpoint(root, capsysbinary):
    """Swapping the earlier run's shard after the resume phase (and restoring it before
    postflight) cannot change what verl loads: it loads this run's own copy."""
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    assert resume(root, "B", "A", prof)[0] == 0
    lineage = json.loads((RunFolder.at(root, "B").path / "run.json").read_text())["resume"]
    shard = earlier / "checkpoints" / "global_step_1" / "data.pt"
    original = shard.read_bytes()
    shard.write_bytes(b"swapped")  # the window between the resume phase and verl's load
    capsysbinary.readouterr()
    assert main(["command", "--profile", PROFILE, "--storage-root", str(root), "--run-id", "B"]) == 0
    argv = capsysbinary.readouterr().out.decode().split("\0")[:-1]
    loaded = Path(next(a for a in argv if a.startswith("trainer.resume_from_path=")).split("=", 1)[1])
    assert RunFolder.at(root, "B").path in loaded.parents
    assert tree_state(loaded) == lineage["files"]
    assert all(not os.access(p, os.W_OK) or os.geteuid() == 0 for p in loaded.rglob("*.pt"))
    shard.write_bytes(original)


def test_a_parent_whose_driver_is_alive_is_never_resumed_even_with_failed(root):
    """FAILED is written before the launcher kills its training (KILL_GRACE), and can be written
    by hand: a live driver on this host still refuses the resume."""
    prof = profile_of(2)
    earlier = preempted(root, "A", prof, stop=1)
    data = json.loads((earlier / "run.json").read_text())
    data.update(driver_host=socket.gethostname(), driver_pid=os.getpid(),  # alive: this process
                **processes.identity(os.getpid()))
    (earlier / "run.json").write_text(json.dumps(data))
    assert (earlier / "FAILED").exists()
    code, phase = resume(root, "B", "A", prof)
    assert code == 1 and error_ids(phase) == {"RES-E007"}
    assert not (RunFolder.at(root, "B").path / "resume-from").exists()
