"""A resumed run of many ranks: every rank's shard loads are judged, not a few samples of them
(verl prints four load lines a rank; a run of more than 16 ranks once failed for want of the
later ranks' model loads, and a load from elsewhere past the samples went unseen)."""
import json
import shlex

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.formats import trainlines
from twgrpo.run import command
from twgrpo.run.profile import load_profile, with_overrides
from twgrpo.run.runfolder import RunFolder

NODES, GPUS = 3, 8  # 24 ranks, 96 load lines: past trainlines.LOAD_SAMPLES
HOSTS = [{"hostname": f"node-{i}", "ip": f"10.0.{i}.1"} for i in range(NODES)]


@pytest.fixture
def resumed(tmp_path):
    """(run folder, profile file) of B, resumed from A's step-1 checkpoint through the resume
    phase and trained to step 2."""
    assert NODES * GPUS * 4 > trainlines.LOAD_SAMPLES
    root = tmp_path / "storage"
    prof = with_overrides(load_profile("tutorial-2x2-a100"), NODES=NODES, GPUS_PER_NODE=GPUS,
                          TRAIN_BATCH_SIZE=NODES * GPUS, PPO_MINI_BATCH_SIZE=NODES * GPUS,
                          TARGET_STEPS=2, SAVE_FREQ=1, PROFILE_NAME="many-ranks")
    env = tmp_path / "many-ranks.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in prof.values.items()))

    def record(run_id):
        run = RunFolder.at(root, run_id).path
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({
            "run_id": run_id, "storage_root": str(root), "profile": prof.to_json(),
            "bundle_sums_sha256": "a" * 64, "launcher_sha256": "b" * 64, "driver_host": "node-0",
            "driver_pid": 4242, "training_command": command.training_command(prof, root, run_id)}))
        return run

    a = record("A")
    synthrun.write_run(a, prof, "A", str(root), HOSTS, first_step=1, last_step=1, save_steps=[1])
    (a / "FAILED").write_text("time=2026-12-02T13:10:00Z\nphase=training\nexit_status=143\nsignal=TERM\n")
    b = record("B")
    assert main(["resume", "--profile", str(env), "--storage-root", str(root), "--run-id", "B",
                 "--resume-from", "A"]) == 0
    snapshot = str(command.resume_snapshot_dir(root, "B", "A", 1))
    synthrun.write_run(b, prof, "B", str(root), HOSTS, first_step=2, last_step=2, resume_from=snapshot,
                       save_steps=[2])
    argv = command.training_command(prof, root, "B", ("A", 1))
    (b / "resolved-command.txt").write_text(" ".join(shlex.quote(x) for x in argv) + "\n")
    return b, env


def postflight(run, env):
    code = main(["postflight", "--output-dir", str(run), "--profile", str(env)])
    return code, json.loads((run / "verification.json").read_text())


def findings(verdict, fid):
    return [f["message"] for c in verdict["checks"] for f in c["findings"] if f["id"] == fid]


def test_a_resumed_run_of_24_ranks_passes_with_every_load_counted(resumed):
    code, verdict = postflight(*resumed)
    assert code == 0, findings(verdict, "POST-E061")
    assert verdict["evidence"]["resume_loads"]["shards"] == NODES * GPUS * 4


def test_the_last_rank_loading_from_elsewhere_is_named(resumed):
    run, env = resumed
    log = run / "training.log"
    last = f"[Rank {NODES * GPUS - 1}] Loaded model from "
    text = log.read_text()
    assert text.count(last) == 1
    log.write_text(text.replace(last + str(run / "resume-from"), last + str(run.parent / "A")))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any("a rank loaded a shard from " + str(run.parent / "A") in m for m in findings(verdict, "POST-E061"))


def test_a_rank_past_the_samples_without_its_model_load_is_named(resumed):
    run, env = resumed
    log = run / "training.log"
    rank = NODES * GPUS - 2
    log.write_text("".join(line for line in log.read_text().splitlines(True)
                           if f"[Rank {rank}] Loaded model from " not in line))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any(f"rank(s) [{rank}] of {NODES * GPUS}" in m for m in findings(verdict, "POST-E061"))
