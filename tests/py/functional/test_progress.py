"""The progress line make logs FOLLOW=1 prints, from a run folder as the launcher fills it:
phase, step k of N, s/step (verl's own timing when the log has it, else the pace seen), ETA and
the heartbeat's age; a FIFO in a log's place never blocks it."""
import json
import os
import threading
import time

from prep import submit
from twgrpo.run.catalog import CATALOG
from prep.progress import Progress, duration

PREFIX = "(TaskRunner pid=42) "


def metrics(step, timing=None):
    extra = f" - timing_s/step:{timing}" if timing else ""
    return (f"{PREFIX}step:{step} - actor/pg_loss:0.1 - training/global_step:{step}"
            f" - critic/score/mean:0.0{extra}\n")


def folder(tmp_path, target=10):
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": {"TARGET_STEPS": str(target)}}}))
    (tmp_path / "driver.log").write_text("run-two-worker-grpo-v1: phase preflight started x\n")
    return tmp_path


def append(path, text):
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(text)


def test_phase_step_pace_eta_and_heartbeat_as_the_run_goes(tmp_path):
    run = folder(tmp_path)
    progress = Progress(run)
    assert progress.line(now=1000.0) == "phase preflight · step 0 of 10"
    append(run / "driver.log", "run-two-worker-grpo-v1: phase preflight ended with status 0 after 3 s\n"
                               "run-two-worker-grpo-v1: phase training started x\n")
    append(run / "training.log", "loading the model\n" + metrics(1))
    assert progress.line(now=1100.0) == "phase training · step 1 of 10"
    append(run / "training.log", metrics(2) + metrics(3))
    (run / "heartbeat.json").write_text(json.dumps({"beat_epoch": 1150.0, "lease_s": 120, "state": "beating"}))
    # steps 2 and 3 seen at 1160: (1160 - 1100) / 2 = 30 s/step, 7 steps left
    assert progress.line(now=1160.0) == \
        "phase training · step 3 of 10 · 30.0 s/step · ETA 3 min · heartbeat 10 s ago"
    append(run / "training.log", metrics(4, timing=12.5))  # verl's own timing wins
    assert progress.line(now=1200.0).startswith("phase training · step 4 of 10 · 12.5 s/step · ETA 75 s")


def test_a_sample_that_quotes_a_metrics_line_is_not_a_step(tmp_path):
    run = folder(tmp_path)
    append(run / "training.log", "[prompt] step:9 - training/global_step:9\n" + metrics(2))
    assert "step 2 of 10" in Progress(run).line(now=1.0)


def test_a_fifo_in_place_of_a_log_never_blocks(tmp_path):
    run = folder(tmp_path)
    os.mkfifo(run / "training.log")  # nobody writes to it
    assert Progress(run).line(now=1.0) == "phase preflight · step 0 of 10"


def test_a_missing_or_damaged_run_json_leaves_n_unknown(tmp_path):
    (tmp_path / "run.json").write_text("{not json")
    append(tmp_path / "training.log", metrics(1))
    assert Progress(tmp_path).line(now=1.0) == "phase (not started) · step 1 of ?"


def test_durations_read_naturally():
    assert [duration(s) for s in (5, 119, 120, 7199, 7200, 90000)] == \
        ["5 s", "119 s", "2 min", "119 min", "2 h 0 min", "25 h 0 min"]


def test_follow_without_ray_address_reads_the_run_folder_to_its_verdict(tmp_path, capsys):
    root = tmp_path / "volume"
    root.mkdir()  # the volume is mounted; the run's folder comes with the job
    run = root / "runs/verl/two-worker-grpo/slurm-7"

    def the_job():  # what a job started by Slurm or KubeRay leaves, as it goes
        time.sleep(0.5)
        run.mkdir(parents=True)
        folder(run, target=3)
        for step in (1, 2):
            time.sleep(0.5)
            append(run / "training.log", metrics(step, timing=20.0))
        time.sleep(0.5)
        (run / "FAILED").write_text("phase=training\nexit_status=3\nsignal=none\n")
    job = threading.Thread(target=the_job)
    job.start()
    code = submit.main(["logs", "--follow", "--run-id", "slurm-7", "--prep-root", str(root),
                        "--poll", "0.2"])
    job.join()
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"submit: slurm-7: following {run} (no RAY_ADDRESS: from the run folder alone)" in err
    assert "submit: slurm-7: phase preflight · step 1 of 3 · 20.0 s/step · ETA 40 s" in err
    assert "submit: slurm-7: phase preflight · step 2 of 3 · 20.0 s/step · ETA 20 s" in err
    assert err.splitlines()[-1].startswith("submit: slurm-7: FAILED in phase training (exit status 3")


def test_follow_without_ray_address_or_a_volume_says_what_to_set(tmp_path, capsys, monkeypatch):
    assert submit.main(["logs", "--follow", "--run-id", "x", "--prep-root", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert "(SUB-E135) RAY_ADDRESS is not set and PREP_ROOT is not mounted here\n" in err
    assert f"    HINT: {CATALOG['SUB-E135'][1]}" in err
    monkeypatch.setattr(submit, "FOLDER_WAIT_S", 1)
    assert submit.main(["logs", "--follow", "--run-id", "x", "--prep-root", str(tmp_path),
                        "--poll", "0.2"]) == 2
    err = capsys.readouterr().err
    assert "(SUB-E134)" in err and "does not exist after 1 s" in err
