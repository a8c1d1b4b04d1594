"""Postflight names the cause of a fatal line, a NaN at any step of any scalar, and rewards that
say nothing was learned: on copies of a real verl run (tests/fixtures/real-smoke-run/) with the
lines real failure reports quote appended to its training.log."""
import math
import shutil
import types
from pathlib import Path

import pytest
import tbevents
from twgrpo.checks.postflight import health
from twgrpo.cli import main
from twgrpo.formats import causes, tfnonfinite
from twgrpo.run.profile import load_profile, with_overrides
from verification import failed_ids

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))


@pytest.fixture
def run(tmp_path):
    copy = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    for name in ("SUCCESS", "verification.json", "actor-placement.json"):
        (copy / name).unlink()
    return copy


OOM = ("(raylet) ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
       "Memory on the node (IP: 10.0.0.7, ID: 6f1c2d) where the task (actor ID: 1a2b, name=WorkerDict.__init__, "
       "pid=4242) was running was 246.41GB / 251.54GB (0.979583), which exceeds the memory usage threshold of 0.95.\n")
REPORTED = [
    # (what a real report printed, the cause's id, POST-E002 too: the generic marker also matches)
    ("host OOM kill (verl #2950)", OOM, "POST-E120", True),
    ("disk full (miles PR #1225)", "OSError: [Errno 28] No space left on device: '/mnt/ckpt/global_step_2'\n", "POST-E121", False),
    ("EADDRINUSE (verl #6677)", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
     "network address. port: 18071, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n", "POST-E122", False),
    ("/dev/shm (EasyR1 #228)", "vm:4242:4300 [0] misc/shmutils.cc:72 NCCL WARN Error while creating shared memory "
     "segment /dev/shm/nccl-UmqSM9 (size 7340384)\n", "POST-E123", True),
    ("Duplicate GPU (verl #161)", "vm:4242:4242 [1] init.cc:871 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 "
     "both on CUDA device 34000\n", "POST-E124", True),
    ("Too many open files (verl #2047)", "OSError: [Errno 24] Too many open files\n", "POST-E125", False),
    ("first collective (verl #597)", "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600051 "
     "milliseconds before timing out.\n", "POST-E126", True),
    ("Gloo mesh (verl #967)", "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/"
     "tcp/pair.cc:144] no error\n", "POST-E127", False),
]


@pytest.mark.parametrize("name,lines,fid,generic", REPORTED, ids=[r[0] for r in REPORTED])
def test_each_reported_fatal_line_gets_its_cause(run, capsys, name, lines, fid, generic):
    with open(run / "training.log", "a") as stream:
        stream.write(lines)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == ({fid, "POST-E002"} if generic else {fid})


def test_the_oom_finding_names_node_usage_and_threshold(run, capsys):
    with open(run / "training.log", "a") as stream:
        stream.write(OOM)
    main(["postflight", "--output-dir", str(run)])
    out = capsys.readouterr().out
    assert "ip 10.0.0.7, ratio 0.979583, threshold 0.95, total 251.54GB, used 246.41GB" in out


def test_a_healthy_log_names_no_cause():
    assert causes.classify("(WorkerDict pid=1) step:2 - actor/pg_loss:0.0 - Error-free") is None
    assert causes.classify("INFO: memory is fine") is None


def test_each_cause_pattern_is_searched_only_past_needles_every_match_holds():
    """The needles let a 2 KB metrics line pass in a few substring searches; each alternative
    of a pattern must hold one of them as plain text, or the needles would hide a match."""
    import re
    for cause, needles, pattern in causes.CAUSES:
        for alternative in pattern.pattern.split("|"):  # plain alternations (causes.py)
            literal = re.sub(r"\\(.)", r"\1", alternative)
            assert any(needle in literal for needle in needles), (cause, alternative)
    for _, lines, _, _ in REPORTED:  # and the reported lines name their cause with and without them
        for line in lines.splitlines():
            alone = next((c for c, _, p in causes.CAUSES if p.search(line)), None)
            named = causes.classify(line)
            if named is not None:
                assert named[0] == alone, line


@pytest.mark.parametrize("line,cause", [
    ("Killed worker 1234: OOM killer, node memory at 97%", "host-oom"),
    ("Traceback: oom-kill event in memory cgroup /kubepods", "host-oom"),
    ("Segmentation fault while reading /dev/shm/torch_1 (shared memory)", "shm"),
])
def test_memory_causes_named_without_an_error_word_keep_their_cause(line, cause):
    """The memory causes' own phrases gate them (the bare word "memory" no longer does)."""
    assert causes.classify(line)[0] == cause


def test_verls_metrics_line_naming_memory_is_no_cause():
    """perf/max_memory_allocated_gb is on every step's line: no memory cause, and not classified
    (the bare word "memory" once sent every step through every cause's pattern)."""
    line = ("(TaskRunner pid=1) step:2 - perf/max_memory_allocated_gb:np.float64(0.09) - "
            "perf/cpu_memory_used_gb:12.5 - training/global_step:2")
    assert causes.classify(line) is None
    assert not [word for word in causes.CAUSE_WORDS if word in line]


def test_many_lines_of_one_cause_are_counted_not_all_shown(run, capsys):
    with open(run / "training.log", "a") as stream:
        stream.write("OSError: [Errno 24] Too many open files\n" * 12)
    main(["postflight", "--output-dir", str(run)])
    assert "7 more lines of the same cause not shown" in capsys.readouterr().out


def append_scalar(run, step, tag, value):
    tbevents.append_event(next((run / "tensorboard").iterdir()), step, 2.0e9, [(tag, value)])


def test_a_nan_at_an_earlier_step_in_any_scalar_fails(run, capsys):
    append_scalar(run, 1, "actor/entropy", float("nan"))
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == {"POST-E128"}
    assert "actor/entropy: (POST-E128) nan at step 1" in capsys.readouterr().out


def test_a_nan_written_again_finite_at_its_step_is_said_not_failed(run, capsys):
    """verl resumed in one TensorBoard folder writes its steps again: the last write of a step is the
    run's, so a NaN it replaced by a finite value is a warning; one it did not replace fails."""
    append_scalar(run, 1, "actor/entropy", float("nan"))
    append_scalar(run, 1, "actor/entropy", 0.25)  # the step written again, finite
    assert main(["postflight", "--output-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "actor/entropy: (POST-W128) nan at step 1 was written again, finite" in out and "(POST-E128)" not in out
    append_scalar(run, 2, "actor/entropy", float("inf"))
    append_scalar(run, 1, "actor/entropy", 0.5)  # another step written again: step 2's inf stands
    (run / "SUCCESS").unlink()
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == {"POST-E128"}
    assert "actor/entropy: (POST-E128) inf at step 2" in capsys.readouterr().out


def test_past_the_steps_held_a_nan_standing_in_at_the_target_step_is_not_left_to_post_e017(run, capsys, monkeypatch):
    """With one step held, the NaN at step 2 (the target) stands in for the one at step 3 it
    hides; the target's last value is finite, so POST-E017 is silent: POST-E128 must say it."""
    monkeypatch.setattr(tfnonfinite, "HELD_WRITES", 1)
    for step, value in ((1, math.nan), (2, math.nan), (3, math.nan), (1, 0.5), (2, 0.5)):
        append_scalar(run, step, "actor/pg_loss", value)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == {"POST-E128"}
    assert "actor/pg_loss: (POST-E128) nan at step 2" in capsys.readouterr().out


def reward_ctx(run, hub="modelscope"):
    return types.SimpleNamespace(profile=with_overrides(load_profile(None), MODEL_HUB=hub), run_dir=run,
                                 evidence={})


def test_all_zero_scores_warn_where_the_model_should_learn(run):
    found = health.check_reward_sanity(reward_ctx(run))
    assert [f.id for f in found] == ["POST-W010"]  # the real run's random model scored 0 twice
    assert "steps 1..2" in found[0].message


def test_all_empty_or_all_cut_responses_warn(run):
    append_scalar(run, 1, health.LENGTH, 0.0)
    append_scalar(run, 2, health.LENGTH, 0.0)
    append_scalar(run, 1, health.CLIPPED, 1.0)
    append_scalar(run, 2, health.CLIPPED, 1.0)
    assert sorted(f.id for f in health.check_reward_sanity(reward_ctx(run))) == [
        "POST-W010", "POST-W011", "POST-W012"]


def test_a_generated_random_model_is_not_expected_to_score(run):
    ctx = reward_ctx(run, hub="generated")
    assert health.check_reward_sanity(ctx) == []
    assert "generated random model" in ctx.evidence["reward_sanity"]["why"]
