"""Resumed runs of many ranks and files: every rank's shard loads are judged, not a few samples
of them (verl prints four load lines a rank; a run of more than 16 ranks once failed for want of
the later ranks' model loads, and a load from elsewhere past the samples went unseen), and a
checkpoint of more than 10,000 files, whose hashes make run.json larger than 1 MiB, is resumed
and verified within the run's own budget (both were flat caps once)."""
import json
import shlex

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.formats import trainlines
from twgrpo.checks.checkpoint import snapshot
from twgrpo.run import command, runrecord
from twgrpo.run.profile import load_profile, with_overrides
from twgrpo.run.runfolder import RunFolder

NODES, GPUS = 3, 8  # 24 ranks, 96 load lines: past trainlines.LOAD_SAMPLES


@pytest.fixture
def resumed(tmp_path):
    assert NODES * GPUS * 4 > trainlines.LOAD_SAMPLES
    return resumed_run(tmp_path, NODES, GPUS)


def resumed_run(tmp_path, nodes, gpus, extra_files=0, root=None):
    """(run folder, profile file) of B, resumed from A's step-1 checkpoint (with extra_files
    more small files in it) through the resume phase and trained to step 2; root: the storage
    root as the job spells it (tmp_path/storage)."""
    root = root or tmp_path / "storage"
    hosts = [{"hostname": f"node-{i}", "ip": f"10.{i >> 8}.{i & 255}.1"} for i in range(nodes)]
    prof = with_overrides(load_profile("tutorial-2x2-a100"), NODES=nodes, GPUS_PER_NODE=gpus,
                          TRAIN_BATCH_SIZE=nodes * gpus, PPO_MINI_BATCH_SIZE=nodes * gpus,
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
    synthrun.write_run(a, prof, "A", str(root), hosts, first_step=1, last_step=1, save_steps=[1])
    extra = a / "checkpoints" / "global_step_1" / "huggingface" / "extra"
    extra.mkdir(parents=True, exist_ok=True)
    for number in range(extra_files):
        (extra / f"part-{number:05d}.json").write_text("{}")
    (a / "FAILED").write_text("time=2026-12-02T13:10:00Z\nphase=training\nexit_status=143\nsignal=TERM\n")
    b = record("B")
    assert main(["resume", "--profile", str(env), "--storage-root", str(root), "--run-id", "B",
                 "--resume-from", "A"]) == 0
    snapshot = str(command.resume_snapshot_dir(root, "B", "A", 1))
    synthrun.write_run(b, prof, "B", str(root), hosts, first_step=2, last_step=2, resume_from=snapshot,
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


def test_a_checkpoint_of_more_than_10000_files_resumes_and_its_large_run_json_is_read(tmp_path):
    run, env = resumed_run(tmp_path, 1300, 1, extra_files=6500)  # 3,900 shards and 6,500 more
    lineage = json.loads((run / "run.json").read_text())["resume"]
    assert len(lineage["files"]) > snapshot.MAX_FILES
    assert (run / "run.json").stat().st_size > runrecord.MOST_BYTES
    code, verdict = postflight(run, env)
    assert code == 0, [f["message"] for c in verdict["checks"] for f in c["findings"] if f["level"] == "error"]
    assert runrecord.size(run).ranks == 1300  # the budget from the profile in the record's head


def rewrite(path, old, new, count=-1):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def test_a_load_line_whose_path_holds_no_step_is_read_and_named(resumed):
    """A load line is found by its own words, not by a global_step_ in its path."""
    run, env = resumed
    with open(run / "training.log", "a") as log:
        log.write("(WorkerDict pid=4001, ip=10.0.1.1) INFO:2026-12-02 13:10:32,375:[Rank 3] Loaded optimizer "
                  "from /elsewhere/ckpt/actor/optim_world_size_24_rank_3.pt\n")
    code, verdict = postflight(run, env)
    assert code == 1
    assert any("a rank loaded a shard from /elsewhere/ckpt/actor/" in m for m in findings(verdict, "POST-E061"))


@pytest.mark.parametrize("where", ["/mnt/elsewhere{}", "{}/actor/../../../../other"])
def test_a_folder_that_only_ends_like_the_snapshot_is_not_it(resumed, where):
    """The folder verl loads is the snapshot's exact path under the job's storage root."""
    run, env = resumed
    snapshot = str(run / "resume-from" / "A" / "checkpoints" / "global_step_1")
    lookalike = where.format(snapshot)
    rewrite(run / "training.log", snapshot, lookalike)
    rewrite(run / "resolved-command.txt", snapshot, lookalike)
    code, verdict = postflight(run, env)
    assert code == 1 and findings(verdict, "POST-E061") and findings(verdict, "POST-E064")


def test_a_rank_that_names_another_ranks_model_shard_has_not_loaded_its_own(resumed):
    run, env = resumed
    log = run / "training.log"
    lines = [line for line in log.read_text().splitlines(True) if "[Rank 5] Loaded model from " not in line]
    ranks_zero = next(line for line in lines if "[Rank 0] Loaded model from " in line)
    log.write_text("".join(lines) + ranks_zero.replace("_rank_0.pt", "_rank_5.pt"))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any(f"rank(s) [5] of {NODES * GPUS}" in m for m in findings(verdict, "POST-E061"))


@pytest.mark.parametrize("kind", ["optimizer", "rng"])
def test_a_rank_that_loaded_its_model_but_not_its_optimizer_or_state_has_not_resumed(resumed, kind):
    """load_contents=[model] resumes the weights alone: Adam's moments and the RNG start afresh."""
    run, env = resumed
    log = run / "training.log"
    log.write_text("".join(line for line in log.read_text().splitlines(True)
                           if f"[Rank 7] Loaded {kind} from " not in line))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any(f"no 'Loaded {kind} from' line for rank(s) [7] of {NODES * GPUS}" in m
               for m in findings(verdict, "POST-E061"))


@pytest.mark.parametrize("spelling", ["mnt/../storage", "s" * 200 + "/" + "t" * 200 + "/" + "u" * 200 +
                                      "/" + "v" * 200 + "/" + "w" * 200 + "/storage"])
def test_a_storage_root_through_dots_or_over_a_thousand_characters_resumes(tmp_path, spelling):
    """The job's storage root as it spells it: '..' in it (the launcher takes it), or long
    enough that every load path passes 1,024 characters (paths reach 4,096)."""
    (tmp_path / "mnt").mkdir()
    run, env = resumed_run(tmp_path, 1, 2, root=tmp_path / spelling)
    if len(spelling) > 1000:
        assert min(len(line) for line in (run / "training.log").read_text().splitlines()
                   if "Loaded model from" in line) > 1024
    code, verdict = postflight(run, env)
    assert code == 0, [f["message"] for c in verdict["checks"] for f in c["findings"] if f["level"] == "error"]


def test_a_snapshot_lineage_without_a_storage_root_is_refused_not_matched_by_its_ending(resumed):
    """A copy's exact path comes from the job's storage root; by its ending alone, a look-alike
    (/mnt/elsewhere/<the same path>) would pass."""
    run, env = resumed
    record = json.loads((run / "run.json").read_text())
    del record["storage_root"]
    (run / "run.json").write_text(json.dumps(record))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any("names no storage root" in m for m in findings(verdict, "POST-E060"))


def test_a_storage_root_longer_than_any_path_is_refused_in_bounded_words(resumed):
    """A megabyte storage_root (in run.json and inputs.json alike) names no folder a job used:
    the copy's lineage is refused as one without a root, and no message carries the megabyte."""
    run, env = resumed
    for name in ("run.json", "inputs.json"):
        record = json.loads((run / name).read_text())
        record["storage_root"] = "/" + "x" * (1 << 20)
        (run / name).write_text(json.dumps(record))
    code, verdict = postflight(run, env)
    assert code == 1
    assert any(f"at most {runrecord.PATH_MAX:,} bytes" in m for m in findings(verdict, "POST-E060"))
    assert not findings(verdict, "POST-E073")  # the two records agree: the length is the fault
    messages = [f["message"] for c in verdict["checks"] for f in c["findings"]]
    assert messages and max(map(len, messages)) < 2000
