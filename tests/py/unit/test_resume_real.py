"""A real preempted and resumed verl 0.6.0 run (tests/fixtures/real-resume-run/): the resumed
run passes postflight from its own files, the preempted one does not, the resume phase picks
the same checkpoint again, and faults injected into copies raise their finding ids."""
import json
from pathlib import Path

import pytest
from twgrpo.run import command
from twgrpo.formats import trainlog
from twgrpo.cli import main
from twgrpo.run.runfolder import RunFolder
from realruns import copy_runs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real-resume-run"
EARLIER = next(FIXTURES.glob("spot-*-a")).name
RESUMED = next(FIXTURES.glob("spot-*-b")).name


@pytest.fixture
def root(tmp_path):
    """Both run folders side by side under a storage root, shards unpacked, verdict records
    removed."""
    return copy_runs(FIXTURES, (EARLIER, RESUMED), tmp_path, rejudge=(RESUMED,))


def postflight(root, run_id):
    code = main(["postflight", "--storage-root", str(root), "--run-id", run_id])
    record = json.loads((RunFolder.at(root, run_id).path / "verification.json").read_text())
    return code, record


def error_ids(record):
    return {f["id"] for c in record["checks"] for f in c["findings"] if f["level"] == "error"}


def test_the_real_resumed_run_passes_postflight(root):
    code, record = postflight(root, RESUMED)
    assert code == 0, error_ids(record)
    assert (RunFolder.at(root, RESUMED).path / "SUCCESS").exists()
    evidence = record["evidence"]
    assert evidence["resume"]["from_run_id"] == EARLIER and evidence["resume"]["step"] == 1
    assert list(evidence["rollouts"]) == ["2"]
    assert evidence["tensorboard"]["metrics"]["actor/grad_norm"]["value"] == 0.0


def test_the_real_log_shows_verl_loading_the_checkpoint_on_every_shard(root):
    log = RunFolder.at(root, RESUMED).path / "training.log"
    scan = trainlog.scan_log(str(log))
    assert [p.endswith(f"/{EARLIER}/checkpoints/global_step_1") for _, p in scan.checkpoint_loads] == [True]
    assert sorted(kind for _, kind, _ in scan.shard_loads) == ["lr_scheduler", "model", "optimizer", "rng"]
    assert sorted(scan.metric_steps) == [2]


def test_the_real_preempted_run_fails_postflight_as_preempted(root, capsys):
    earlier = RunFolder.at(root, EARLIER).path
    code, record = postflight(root, EARLIER)
    assert code == 1
    assert error_ids(record) == {"POST-E170"}  # what stopping left missing, nothing else
    assert record["evidence"]["stopped"]["step"] == 1
    out = capsys.readouterr().out
    assert f"postflight: PREEMPTED (resumable from step 1)" in out
    assert f"RESUME_FROM={EARLIER}" in out and "eager attention" not in out
    assert not (earlier / "SUCCESS").exists() and (earlier / "FAILED").exists()


def test_the_resume_phase_picks_the_real_step_1_checkpoint_again(root):
    earlier = json.loads((RunFolder.at(root, EARLIER).path / "run.json").read_text())
    run = RunFolder.at(root, "again").path
    run.mkdir()
    record = {**earlier, "run_id": "again", "driver_host": "elsewhere", "driver_pid": 2}
    (run / "run.json").write_text(json.dumps(record))
    assert main(["resume", "--profile", "smoke-1x1", "--storage-root", str(root), "--run-id",
                 "again", "--resume-from", EARLIER]) == 0
    lineage = json.loads((run / "run.json").read_text())["resume"]
    recorded = json.loads((RunFolder.at(root, RESUMED).path / "run.json").read_text())["resume"]
    assert lineage["step"] == 1 and lineage["files"] == recorded["files"]
    assert lineage["earlier_ended"]["signal"] == "TERM"


def test_a_real_resumed_run_refuses_to_be_resumed(root):
    assert postflight(root, RESUMED)[0] == 0
    resumed = json.loads((RunFolder.at(root, RESUMED).path / "run.json").read_text())
    run = RunFolder.at(root, "third").path
    run.mkdir()
    (run / "run.json").write_text(json.dumps({**resumed, "run_id": "third"}))
    assert main(["resume", "--profile", "smoke-1x1", "--storage-root", str(root), "--run-id",
                 "third", "--resume-from", RESUMED]) == 1
    phase = json.loads((run / "resume.json").read_text())
    assert {"RES-E006", "RES-E010"} == error_ids(phase)


def edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def drop_load_line(run):
    log = run / "training.log"
    log.write_text("".join(l for l in log.read_text().splitlines(True)
                           if "Load from checkpoint folder" not in l))


def load_from_another_run(run):
    edit(run / "training.log", f"{EARLIER}/checkpoints/global_step_1\n", "other-run/checkpoints/global_step_1\n")


def model_from_another_run(run):
    edit(run / "training.log", f"{EARLIER}/checkpoints/global_step_1/actor/model_",
         "other-run/checkpoints/global_step_1/actor/model_")


def step_1_again(run):
    edit(run / "training.log", "step:2 - ", "step:1 - training/global_step:1 - \nstep:2 - ")


def resume_mode_disabled(run):
    edit(run / "resolved-command.txt", "trainer.resume_mode=resume_path", "trainer.resume_mode=disable")


def earlier_shard_changed(run):
    shard = run.parent / EARLIER / "checkpoints" / "global_step_1" / "actor" / "optim_world_size_1_rank_0.pt"
    shard.write_bytes(shard.read_bytes() + b"\0")


FAULTS = [(drop_load_line, "POST-E061"), (load_from_another_run, "POST-E061"),
          (model_from_another_run, "POST-E061"), (step_1_again, "POST-E062"),
          (resume_mode_disabled, "POST-E064"), (earlier_shard_changed, "POST-E065")]


@pytest.mark.parametrize("fault,fid", FAULTS, ids=[f.__name__ for f, _ in FAULTS])
def test_a_fault_in_the_real_resumed_run_fails_postflight(root, fault, fid):
    fault(RunFolder.at(root, RESUMED).path)
    code, record = postflight(root, RESUMED)
    assert code == 1
    assert fid in error_ids(record)
    assert not (RunFolder.at(root, RESUMED).path / "SUCCESS").exists()
