"""A real hard-killed run and the retry that resumed it by itself
(tests/fixtures/real-kill-resume-run/, made by dev/smoke-kill-resume.sh on one H200): the KILLed
job left no FAILED, only a heartbeat that ran out, and reads PREEMPTED; the very same command
re-run became attempt <RUN_ID>.2, resumed from its own copy of the step-1 checkpoint and passes
postflight from its files; faults injected into copies raise their finding ids."""
import json
from pathlib import Path

import pytest
from twgrpo.checks.resume import attempt
from twgrpo.cli import main
from twgrpo.formats import trainlog
from twgrpo.run import heartbeat
from twgrpo.run.findings import UsageError
from twgrpo.run.runverdict import latest_verdict
from twgrpo.run.runfolder import RunFolder
from realruns import copy_runs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real-kill-resume-run"
LOST = next(p.name for p in FIXTURES.glob("kill-*") if not p.name.endswith(".2"))
RETRY = f"{LOST}.2"


@pytest.fixture
def root(tmp_path):
    """Both run folders under a storage root, shards unpacked, the retry's verdict removed."""
    return copy_runs(FIXTURES, (LOST, RETRY), tmp_path, rejudge=(RETRY,))


def folder(root, run_id):
    return RunFolder.at(root, run_id).path


def postflight(root, run_id):
    code = main(["postflight", "--storage-root", str(root), "--run-id", run_id])
    record = json.loads((folder(root, run_id) / "verification.json").read_text())
    return code, {f["id"] for c in record["checks"] for f in c["findings"] if f["level"] == "error"}, record


def test_the_killed_job_left_no_marker_and_a_heartbeat_that_ran_out():
    lost = FIXTURES / LOST
    assert not any((lost / name).exists() for name in ("FAILED", "SUCCESS", "verification.json"))
    assert heartbeat.liveness(lost) == "lost"


def test_the_killed_run_reads_preempted_resumable_from_step_1_without_a_hand_written_file(root):
    verdict = latest_verdict(folder(root, LOST))
    assert verdict.status == "PREEMPTED"
    assert verdict.summary.startswith("PREEMPTED (resumable from step 1): lost: no heartbeat for "
                                      "longer than its 6 s lease")
    assert f"RESUME_FROM={LOST}" in verdict.summary


def test_the_retry_passes_postflight_and_trained_from_its_own_copy_of_step_1(root):
    code, errors, record = postflight(root, RETRY)
    assert code == 0, errors
    assert record["evidence"]["resume"]["from_run_id"] == LOST
    assert record["evidence"]["resume"]["step"] == 1
    scan = trainlog.scan_log(str(folder(root, RETRY) / "training.log"))
    [(_, loaded)] = scan.checkpoint_loads
    assert loaded.endswith(f"/{RETRY}/resume-from/{LOST}/checkpoints/global_step_1")
    assert sorted(scan.metric_steps) == [2]


def test_make_runs_shows_the_lost_run_and_its_attempt_both_ways(root, capsys):
    assert postflight(root, RETRY)[0] == 0
    capsys.readouterr()
    assert main(["runs", "--storage-root", str(root)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert f"PREEMPTED (resumable from step 1)  -> {RETRY}" in rows[LOST]
    assert rows[RETRY].endswith(f"SUCCESS                            <- {LOST}@1")


def test_a_changed_byte_in_the_retry_s_checkpoint_copy_fails_postflight(root):
    shard = (folder(root, RETRY) / "resume-from" / LOST / "checkpoints" / "global_step_1" / "actor"
             / "model_world_size_1_rank_0.pt")
    shard.chmod(0o644)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    code, errors, _ = postflight(root, RETRY)
    assert code == 1 and "POST-E065" in errors


def test_a_third_run_of_the_same_command_is_refused_after_the_retry_succeeded(root):
    assert postflight(root, RETRY)[0] == 0
    bundle = json.loads((folder(root, LOST) / "run.json").read_text())["bundle_sums_sha256"]
    job = {"kind": "ray-job", "id": LOST}  # both runs as launched under one Ray job records them
    for name in (LOST, RETRY):
        record = json.loads((folder(root, name) / "run.json").read_text())
        (folder(root, name) / "run.json").write_text(json.dumps({**record, "job_identity": job}))
    with pytest.raises(UsageError, match="LAUNCH-E092"):
        attempt.plan(root, LOST, "auto", "smoke-1x1", bundle, job)
