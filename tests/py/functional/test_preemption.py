"""Preemption as a first-class path, on the real preempted and resumed runs
(tests/fixtures/real-resume-run/, copied, never rewritten): the verdict word PREEMPTED with the
resume line, "took" to the last sign of life, lineage both ways in make runs and the report,
the parent's steps in the resumed run's charts, the saving in figures; the heartbeat's
liveness (alive, lost, ended) in verdicts, in the resume phase and in retries as attempts."""
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from twgrpo.checks.resume import attempt
from twgrpo.cli import main
from twgrpo.run.runfolder import NAME, RunFolder
from twgrpo.run import heartbeat, jobidentity, processes
from twgrpo.run.findings import UsageError
from twgrpo.run.runverdict import latest_verdict
from realruns import copy_runs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real-resume-run"
EARLIER = next(FIXTURES.glob("spot-*-a")).name
RESUMED = next(FIXTURES.glob("spot-*-b")).name
BUNDLE = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo"


JOB = {"kind": "ray-job", "id": "spot-job"}  # the platform's name for the job of both runs


@pytest.fixture
def root(tmp_path):
    return copy_runs(FIXTURES, (EARLIER, RESUMED), tmp_path)


@pytest.fixture
def job_root(root):
    """The runs as a launcher under a Ray job records them: with the job's identity (a rewritten
    run.json, so only for the attempt tests: the resumed run pins the earlier one's bytes)."""
    for name in (EARLIER, RESUMED):
        set_identity(RunFolder.at(root, name).path, JOB)
    return root


def set_identity(run, identity):
    record = json.loads((run / "run.json").read_text())
    record["job_identity"] = identity
    (run / "run.json").write_text(json.dumps(record))


def folder(root, run_id):
    return RunFolder.at(root, run_id).path


def beat(run, age, lease=120, state="alive"):
    """A heartbeat.json whose last beat is AGE seconds old."""
    now = time.time() - age
    (run / NAME.heartbeat_json).write_text(json.dumps({
        "run_id": run.name, "time": "2026-12-03T09:00:00Z", "beat_epoch": now, "pid": 1,
        "host": "elsewhere", "interval_s": 30, "lease_s": lease, "state": state}))


def runs_rows(root, capsys):
    assert main(["runs", "--storage-root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: line for line in lines[1:-1]}


# --- the verdict word, took, make runs ------------------------------------------------------

def test_the_real_preempted_run_is_preempted_resumable_from_step_1(root):
    verdict = latest_verdict(folder(root, EARLIER))
    assert verdict.status == "PREEMPTED"
    assert verdict.summary.startswith("PREEMPTED (resumable from step 1): stopped by signal TERM "
                                      "in phase training at 2026-12-02T18:22:09Z")
    assert f"RESUME_FROM={EARLIER}" in verdict.summary


def test_make_runs_shows_preempted_took_to_the_last_sign_of_life_and_lineage_both_ways(root, capsys):
    # The resumed run's verification.json predates the launcher-records check: judge it again.
    assert main(["postflight", "--storage-root", str(root), "--run-id", RESUMED]) == 0
    capsys.readouterr()
    rows = runs_rows(root, capsys)
    assert rows[EARLIER].split("  smoke-1x1")[0].endswith("1 min 16 s")  # FAILED's time, not 3 s
    assert f"PREEMPTED (resumable from step 1)  -> {RESUMED}" in rows[EARLIER]
    assert rows[RESUMED].endswith(f"SUCCESS                            <- {EARLIER}@1")


def test_a_stopped_run_without_a_checkpoint_stays_failed_and_says_so(root):
    run = folder(root, EARLIER)
    shutil.rmtree(run / "checkpoints" / "global_step_1" / "actor")
    verdict = latest_verdict(run)
    assert verdict.status == "FAILED"
    assert "stopped by signal TERM" in verdict.summary and "no complete checkpoint" in verdict.summary


def test_a_failure_that_is_not_a_stop_is_not_preempted(root):
    run = folder(root, EARLIER)
    (run / "FAILED").write_text("phase=training\nexit_status=1\nsignal=none\n")
    assert latest_verdict(run).status == "FAILED"


# --- postflight of a preempted run ----------------------------------------------------------

def test_postflight_of_a_preempted_run_with_a_damaged_checkpoint_finds_it_and_is_failed(root, capsys):
    run = folder(root, EARLIER)
    shard = run / "checkpoints" / "global_step_1" / "actor" / "model_world_size_1_rank_0.pt"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    assert main(["postflight", "--storage-root", str(root), "--run-id", EARLIER]) == 1
    record = json.loads((run / "verification.json").read_text())
    ids = {f["id"] for c in record["checks"] for f in c["findings"]}
    assert {"POST-E170", "POST-E022"} <= ids
    assert latest_verdict(run).status == "FAILED"  # a damaged checkpoint is not resumable


# --- the report -------------------------------------------------------------------------------

def report(root, run_id, capsys, tmp_path):
    html = tmp_path / f"{run_id}.html"
    assert main(["report", "--storage-root", str(root), "--run-id", run_id, "--html", str(html)]) == 0
    return capsys.readouterr().out, html.read_text(encoding="utf-8")


def test_the_report_of_the_preempted_run_says_preempted_with_the_resume_line(root, capsys, tmp_path):
    out, page = report(root, EARLIER, capsys, tmp_path)
    assert '<section class="banner PREEMPTED"' in page
    assert f'<div class="resume">RESUME_FROM={EARLIER} (already resumed by {RESUMED})</div>' in page
    assert "No findings: every check passed" not in page
    assert "took 1 min 16 s" in out
    assert "training stopped (exit 143) 1 min 13 s" in out
    assert "1 step of 2 trained here (steps 1..1)" in out
    assert f"  child     {RESUMED} resumed from step 1" in out


def test_the_report_of_the_resumed_run_shows_its_parent_steps_and_saving(root, capsys, tmp_path):
    out, page = report(root, RESUMED, capsys, tmp_path)
    assert f"  resumed   from {EARLIER} at step 1; 1 step of 2 trained here (steps 2..2); " \
           f"1 step inherited from {EARLIER}" in out
    assert "  saved     training time of the parent chain 1 min 13 s; of this run 1 min 06 s" in out
    assert "phases    resume passed 0 s · inputs passed" in out
    assert 'data-phase="resume"' in page and '<h2 id="lineage">Lineage</h2>' in page
    assert "3 GRPO steps" not in page and "2 GRPO steps" not in page
    # the charts draw the parent's step 1 before this run's step 2, and mark the resume
    assert page.count('class="inherited"') >= 5 and 'class="resumed"' in page
    assert "step 1: 1 (parent run)" in page


def test_the_report_says_when_the_parent_run_is_gone(root, capsys, tmp_path):
    shutil.rmtree(folder(root, EARLIER))
    out, page = report(root, RESUMED, capsys, tmp_path)
    assert "(RPT-E050)" in out and 'class="inherited"' not in page


# --- the heartbeat ----------------------------------------------------------------------------

def test_liveness_alive_lost_ended_and_none(tmp_path):
    assert heartbeat.liveness(tmp_path) is None
    beat(tmp_path, 10)
    assert heartbeat.liveness(tmp_path) == "alive"
    beat(tmp_path, 200)
    assert heartbeat.liveness(tmp_path) == "lost"
    beat(tmp_path, 1, state="ended")
    assert heartbeat.liveness(tmp_path) == "ended"
    (tmp_path / NAME.heartbeat_json).write_text('{"beat_epoch": "soon"}')
    assert heartbeat.liveness(tmp_path) is None


def test_a_fresh_heartbeat_without_a_marker_is_running_and_with_one_a_conflict(root):
    run = folder(root, EARLIER)
    beat(run, 5)
    verdict = latest_verdict(run)
    assert verdict.status == "FAILED" and "heartbeat is fresh" in verdict.conflicts[0]
    (run / "FAILED").unlink()
    assert latest_verdict(run).status == "RUNNING"


def test_a_lost_run_without_any_marker_is_preempted(root):
    run = folder(root, EARLIER)
    (run / "FAILED").unlink()
    assert latest_verdict(run).status == "INCOMPLETE"  # no heartbeat: nothing says it is gone
    beat(run, 500)
    verdict = latest_verdict(run)
    assert verdict.status == "PREEMPTED"
    assert "lost: no heartbeat for longer than its 120 s lease" in verdict.summary


def resume_into(root, new_id, earlier):
    record = json.loads((folder(root, earlier) / "run.json").read_text())
    run = folder(root, new_id)
    run.mkdir()
    (run / "run.json").write_text(json.dumps({**record, "run_id": new_id, "driver_host": "elsewhere",
                                              "driver_pid": 2}))
    code = main(["resume", "--profile", "smoke-1x1", "--storage-root", str(root), "--run-id",
                 new_id, "--resume-from", earlier])
    return code, json.loads((run / "resume.json").read_text())


def test_the_resume_phase_never_resumes_a_run_whose_heartbeat_is_fresh(root):
    beat(folder(root, EARLIER), 5)  # FAILED exists, as a hand-written one would
    code, record = resume_into(root, "again", EARLIER)
    assert code == 1
    assert [f["id"] for c in record["checks"] for f in c["findings"]] == ["RES-E050"]


def test_the_resume_phase_resumes_a_lost_run_without_a_hand_written_failed(root):
    (folder(root, EARLIER) / "FAILED").unlink()
    beat(folder(root, EARLIER), 500)
    code, record = resume_into(root, "again", EARLIER)
    assert code == 0
    lineage = json.loads((folder(root, "again") / "run.json").read_text())["resume"]
    assert lineage["step"] == 1 and "no heartbeat for longer than its lease" in lineage["earlier_ended"]["lost"]


def test_the_beater_writes_ended_when_its_launcher_is_gone(tmp_path):
    launcher = subprocess.Popen(["sleep", "30"])
    beater = subprocess.Popen([sys.executable, "-I", "-B", str(BUNDLE / "verify-two-worker-grpo-v1.py"),
                               "heartbeat", "--storage-root", str(tmp_path), "--run-id", "r1",
                               "--launcher-pid", str(launcher.pid), "--interval", "1", "--lease", "2"])
    run = RunFolder.at(tmp_path, "r1").path
    run.mkdir(parents=True)
    try:
        for _ in range(100):
            if heartbeat.liveness(run) == "alive":
                break
            time.sleep(0.1)
        assert heartbeat.liveness(run) == "alive"
        launcher.kill()
        launcher.wait()
        assert beater.wait(timeout=10) == 0
        record = heartbeat.read(run)
        assert record["state"] == "ended" and "is gone" in record["ended_because"]
    finally:
        for proc in (launcher, beater):
            if proc.poll() is None:
                proc.kill()


def test_the_beater_refuses_a_lease_shorter_than_two_beats(tmp_path, capsys):
    assert main(["heartbeat", "--storage-root", str(tmp_path), "--run-id", "r1", "--interval", "30",
                 "--lease", "40"]) == 2
    assert "(LAUNCH-E090)" in capsys.readouterr().err


# --- retries as attempts, RESUME_FROM=auto -----------------------------------------------------

def bundle_of(root):
    return json.loads((folder(root, EARLIER) / "run.json").read_text())["bundle_sums_sha256"]


def test_a_retry_of_a_preempted_run_is_attempt_2_resuming_it(job_root):
    root = job_root
    run_id, resume_from, notes = attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)
    assert (run_id, resume_from) == (f"{EARLIER}.2", EARLIER)
    assert f"this launch is the next attempt, {EARLIER}.2" in notes[0]


def test_a_retry_is_refused_while_the_run_is_alive_or_after_a_success_or_for_another_job(job_root):
    root = job_root
    with pytest.raises(UsageError, match="LAUNCH-E092"):  # the resumed run succeeded
        attempt.plan(root, RESUMED, "", "smoke-1x1", bundle_of(root), JOB)
    with pytest.raises(UsageError, match="LAUNCH-E008"):  # another bundle: not this job's
        attempt.plan(root, EARLIER, "", "smoke-1x1", "0" * 64, JOB)
    (folder(root, EARLIER) / "FAILED").write_text("phase=preflight\nexit_status=1\nsignal=none\n")
    with pytest.raises(UsageError, match="LAUNCH-E092"):  # a check failed: not a stop
        attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)
    beat(folder(root, EARLIER), 5)
    with pytest.raises(UsageError, match="LAUNCH-E091"):
        attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)


def test_a_retry_after_99_attempts_is_refused(job_root):
    root = job_root
    runs = folder(root, EARLIER).parent
    for n in range(2, 100):
        copy = runs / f"{EARLIER}.{n}"
        copy.mkdir()
        for name in ("run.json", "FAILED"):
            shutil.copy(runs / EARLIER / name, copy / name)
    with pytest.raises(UsageError, match="LAUNCH-E093"):
        attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)


def test_resume_from_auto_picks_the_newest_resumable_run_of_the_lineage_or_starts_fresh(job_root):
    root = job_root
    run_id, resume_from, notes = attempt.plan(root, f"{EARLIER}.2", "auto", "smoke-1x1", bundle_of(root), JOB)
    assert (run_id, resume_from) == (f"{EARLIER}.2", EARLIER)
    run_id, resume_from, notes = attempt.plan(root, "fresh-one", "auto", "smoke-1x1", bundle_of(root), JOB)
    assert (run_id, resume_from) == ("fresh-one", "")
    assert notes == ["RESUME_FROM=auto: no resumable run of fresh-one with profile smoke-1x1: "
                     "starting fresh"]
    assert attempt.plan(root, f"{EARLIER}.2", "auto", "other-profile", bundle_of(root), JOB)[1] == ""


@pytest.mark.parametrize("theirs,ours", [(None, JOB), ({"kind": "ray-job", "id": "other"}, JOB),
                                         ({"kind": "slurm", "id": "spot-job"}, JOB), (JOB, None)])
def test_a_fresh_launch_never_adopts_a_preempted_folder_of_another_or_no_job_identity(job_root, theirs, ours):
    """A resumable folder planted at the RUN_ID (a copy, a stale run, a name collision) would
    make a fresh launch its attempt 2, resuming its checkpoint: refused, nothing claimed."""
    root = job_root
    set_identity(folder(root, EARLIER), theirs)
    with pytest.raises(UsageError, match=r"LAUNCH-E094.*not made by this job.*RESUME_FROM="):
        attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), ours)
    assert not folder(root, f"{EARLIER}.2").exists()


def test_resume_from_auto_refuses_a_planted_attempt_of_another_or_no_job_identity(job_root):
    root = job_root
    runs = folder(root, EARLIER).parent
    shutil.copytree(runs / EARLIER, runs / "fresh.7")  # a preempted run planted in a new lineage
    set_identity(runs / "fresh.7", None)
    with pytest.raises(UsageError, match=r"LAUNCH-E094.*fresh\.7.*identity is none"):
        attempt.plan(root, "fresh", "auto", "smoke-1x1", bundle_of(root), JOB)
    set_identity(runs / "fresh.7", {"kind": "slurm", "id": "4242"})
    with pytest.raises(UsageError, match="LAUNCH-E094"):  # another job's: refused as well
        attempt.plan(root, "fresh", "auto", "smoke-1x1", bundle_of(root), JOB)
    set_identity(runs / "fresh.7", JOB)  # of this job: resumed
    assert attempt.plan(root, "fresh", "auto", "smoke-1x1", bundle_of(root), JOB)[1] == "fresh.7"


def test_a_retry_refuses_a_planted_later_attempt_of_another_job(job_root):
    root = job_root
    runs = folder(root, EARLIER).parent
    shutil.copytree(runs / EARLIER, runs / f"{EARLIER}.7")
    set_identity(runs / f"{EARLIER}.7", None)
    with pytest.raises(UsageError, match=rf"LAUNCH-E094.*{EARLIER}\.7"):
        attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)


@pytest.mark.parametrize("env,expected", [
    ({"RAY_JOB_SUBMISSION_ID": "exp-1", "SLURM_JOB_ID": "9"}, {"kind": "ray-job", "id": "exp-1"}),
    ({"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": "raysubmit_A"}})},
     {"kind": "ray-job", "id": "raysubmit_A"}),
    ({"SLURM_JOB_ID": "4242"}, {"kind": "slurm", "id": "4242"}),
    ({"RAY_JOB_CONFIG_JSON_ENV_VAR": "not json", "SLURM_JOB_ID": "bad id"}, None),
    ({}, None)])
def test_the_job_identity_is_the_platforms_name_for_the_job(env, expected):
    assert jobidentity.of(env) == expected


def test_a_run_failed_by_its_records_is_not_running_whatever_its_heartbeat(root):
    run = folder(root, EARLIER)
    (run / "FAILED").unlink()
    (run / "verification.json").write_text('{"status": "failed", "checks": []}')
    beat(run, 5)  # a launcher that could not write its last beat (a full disk)
    assert latest_verdict(run).status == "FAILED"


def test_a_link_or_a_file_where_the_run_folder_would_be_is_never_retried(root, tmp_path):
    runs = folder(root, EARLIER).parent
    (runs / "linked").symlink_to(tmp_path / "elsewhere")
    (runs / "plain").write_text("not a folder")
    for name in ("linked", "plain"):
        with pytest.raises(UsageError, match="LAUNCH-E008"):
            attempt.plan(root, name, "", "smoke-1x1", bundle_of(root), JOB)
    assert not (tmp_path / "elsewhere").exists()


def test_a_run_whose_launcher_was_killed_alone_is_preempted_by_the_watchdogs_failed(root):
    run = folder(root, EARLIER)
    (run / "FAILED").write_text("time=2026-12-02T18:22:09Z\nphase=training\nexit_status=unknown\n"
                                "signal=unknown\ncause=the launcher ended without stopping phase\n")
    verdict = latest_verdict(run)
    assert verdict.status == "PREEMPTED"
    assert "stopped when its launcher was killed" in verdict.summary


@pytest.mark.parametrize("epoch", ["1e400", "NaN", "-Infinity", "4102444800"])  # ..., 2100-01-01
def test_a_heartbeat_that_is_not_a_finite_past_time_is_no_heartbeat_and_crashes_no_view(root, capsys, epoch):
    run = folder(root, RESUMED)
    (run / NAME.heartbeat_json).write_text('{"beat_epoch": %s, "lease_s": 120, "state": "alive"}' % epoch)
    assert heartbeat.read(run) is None and heartbeat.liveness(run) is None
    assert heartbeat.describe(run) == "" and heartbeat.last_beat(run) is None
    assert "not a finite time" in heartbeat.problem(run) or "in the future" in heartbeat.problem(run)
    assert "RES-W051" in runs_rows(root, capsys)[RESUMED]  # make runs lists the volume, says so


def test_one_term_to_the_beater_does_not_end_a_live_run(tmp_path):
    launcher = subprocess.Popen(["sleep", "30"])
    beater = subprocess.Popen([sys.executable, "-I", "-B", str(BUNDLE / "verify-two-worker-grpo-v1.py"),
                               "heartbeat", "--storage-root", str(tmp_path), "--run-id", "r1",
                               "--launcher-pid", str(launcher.pid), "--interval", "1", "--lease", "2"])
    run = RunFolder.at(tmp_path, "r1").path
    run.mkdir(parents=True)
    try:
        for _ in range(100):
            if heartbeat.liveness(run) == "alive":
                break
            time.sleep(0.1)
        beater.terminate()  # anyone's TERM: the launcher still lives
        time.sleep(2.5)
        assert beater.poll() is None and heartbeat.liveness(run) == "alive"
        beater.send_signal(heartbeat.END_SIGNAL)  # the launcher's own word that it ends
        assert beater.wait(timeout=10) == 0
        assert heartbeat.read(run)["state"] == "ended"
    finally:
        for proc in (launcher, beater):
            if proc.poll() is None:
                proc.kill()


# --- lost only when the launcher is gone, not when its heartbeat process alone died -------------

def test_a_live_launcher_whose_heartbeat_process_died_is_never_lost_nor_resumed(job_root):
    """The beater KILLed alone (out of memory, a stray kill) leaves a stale beat while the launcher
    trains on: on its host that launcher is seen running, so the run stays alive to make runs, to
    a retry of its job and to RESUME_FROM; once the launcher is gone too, it is lost."""
    root, run = job_root, folder(job_root, EARLIER)
    (run / "FAILED").unlink()  # the launcher lives: no verdict yet
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({
            **record, "driver_host": socket.gethostname(), "driver_pid": launcher.pid,
            **processes.identity(launcher.pid)}))
        beat(run, 500, lease=120)  # the beater's last beat, long past its lease
        assert heartbeat.liveness(run) == "alive"
        assert "its heartbeat process is gone but its launcher still runs" in heartbeat.describe(run)
        assert latest_verdict(run).status != "PREEMPTED"
        with pytest.raises(UsageError, match="LAUNCH-E091"):
            attempt.plan(root, EARLIER, "", "smoke-1x1", bundle_of(root), JOB)
        code, record = resume_into(root, "second", EARLIER)
        assert code == 1 and "RES-E050" in {f["id"] for c in record["checks"] for f in c["findings"]}
    finally:
        launcher.kill()
        launcher.wait()
    assert heartbeat.liveness(run) == "lost"  # the launcher is gone as well: now it is lost
    assert latest_verdict(run).status == "PREEMPTED"
