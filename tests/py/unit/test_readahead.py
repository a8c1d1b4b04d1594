"""Postflight's long reads begun in worker processes (checks/postflight/readahead.py): the event
files and a long run's rollout files are read by workers while postflight scans the log, and
the checks find exactly what they find reading them themselves; a task no worker has begun is
taken back and run here, a lost worker's task too."""
import contextlib
import io
import json
import os
import types
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest
import synthrun
from twgrpo.checks.checkpoint import ahead
from twgrpo.checks.placement import placement
from twgrpo.checks.postflight import readahead, rollouts, startreads
from twgrpo.cli import main
from twgrpo.formats.trainlog import scan_range as _REAL_SCAN_RANGE
from twgrpo.run.profile import load_profile


@pytest.fixture
def workers():
    made = readahead.Workers(2)
    yield made
    made.close()


def never_begun(*args):
    return Future()  # pending: no worker ever takes it, so it can be taken back


def test_a_task_is_answered_by_its_worker_or_here(workers):
    there = readahead.Task(workers.submit, os.getpid)
    assert there.handed() and there.answer() != os.getpid() and not there.taken_back
    waiting = readahead.Task(never_begun, os.getpid)
    assert waiting.take_back() and waiting.taken_back and waiting.answer() == os.getpid()
    assert not waiting.take_back()  # answered: nothing left to take back
    lost = Future()
    lost.set_exception(BrokenProcessPool("a worker was killed"))
    assert readahead.Task(lambda *args: lost, os.getpid).answer() == os.getpid()
    assert readahead.Task(None, os.getpid).answer() == os.getpid()
    with pytest.raises(ValueError):  # the task's own error, as if it ran here
        readahead.Task(workers.submit, int, "not a number").answer()


def _die():
    os._exit(3)  # a worker killed (out of memory, say) while it holds a task


def test_a_lost_worker_leaves_every_later_task_to_run_here():
    lost = readahead.Workers(1)
    try:
        with pytest.raises(BrokenProcessPool):
            lost.submit(_die).result()
        assert lost.submit(abs, -3) is None  # not a raise: postflight goes on without them
        task = readahead.Task(lost.submit, os.getpid)
        assert not task.handed() and task.answer() == os.getpid()
    finally:
        lost.close()


def test_a_begun_task_is_not_taken_back_and_take_waits_only_when_asked():
    begun = Future()
    assert begun.set_running_or_notify_cancel()  # a worker is on it
    task = readahead.Task(lambda *args: begun, os.getpid)
    assert not task.take_back() and not task.take(wait=False)
    begun.set_result(12345)
    assert task.take(wait=False) and task.value == 12345 and not task.taken_back


@pytest.fixture
def long_run(tmp_path, monkeypatch):
    """40 steps judged 4 a task: a missing file (7), too few rows (13), a bad row (22)."""
    monkeypatch.setattr(rollouts, "CHUNK_STEPS", 4)
    monkeypatch.setattr(rollouts, "LISTED_STEPS", 3)
    folder = tmp_path / "run" / "rollouts"
    folder.mkdir(parents=True)
    profile = load_profile(None)
    rows = profile.TRAIN_BATCH_SIZE * profile.ROLLOUT_N
    for step in range(1, 41):
        row = '{"input": "q", "output": "a", "score": %s, "step": %d}\n'
        text = "".join(row % (step / 100 + i, step) for i in range(rows))
        if step == 13:
            text = row % (0.5, 13)
        if step == 22:
            text = text.replace('"score": 0.22', '"score": "high"')
        if step != 7:
            (folder / f"{step}.jsonl").write_text(text)
    return types.SimpleNamespace(profile=profile, run_dir=tmp_path / "run", steps=40, first_step=1,
                                 evidence={}, ahead=None, rollouts_ahead=None)


def judged(ctx, submit):
    ctx.evidence = {}
    ctx.rollouts_ahead = rollouts.start_ahead(ctx, submit)
    found = [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(ctx)]
    return found, ctx.evidence


def test_a_long_runs_rollouts_judged_by_workers_are_the_checks_own(long_run, workers):
    here = judged(long_run, None)
    assert [(fid, obj.rsplit("/", 1)[1]) for fid, obj, _ in here[0]] == [
        ("POST-E018", "7.jsonl"), ("POST-E019", "13.jsonl"), ("POST-E020", "22.jsonl")]
    assert sorted(map(int, here[1]["rollouts"])) == [1, 2, 3, 13, 22, 38, 39, 40]
    assert here[1]["rollouts_summary"]["score_max"] == pytest.approx(0.4 + 7)
    assert judged(long_run, workers.submit) == here  # however the tasks fell to workers and here
    started = rollouts.start_ahead(long_run, workers.submit)
    for task in started.tasks:
        task.future.result()  # every task answered by a worker before the check comes
    long_run.rollouts_ahead, long_run.evidence = started, {}
    assert [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(long_run)] == here[0]
    assert long_run.evidence == here[1] and not any(task.taken_back for task in started.tasks)
    assert judged(long_run, never_begun) == here  # every task taken back, from the last
    assert all(task.taken_back for task in long_run.rollouts_ahead.tasks)


def test_the_check_takes_back_from_the_last_until_a_begun_task(long_run, workers):
    handed = []

    def first_half(fn, *args):  # the first five tasks to the workers, the rest never begun
        handed.append(args)
        return workers.submit(fn, *args) if len(handed) <= 5 else Future()

    here = judged(long_run, None)
    started = rollouts.start_ahead(long_run, first_half)
    for task in started.tasks[:5]:
        task.future.result()  # the workers are done with theirs
    assert [started.take_back_one() for _ in range(6)] == [True] * 5 + [False]
    assert [task.taken_back for task in started.tasks] == [False] * 5 + [True] * 5
    long_run.rollouts_ahead, long_run.evidence = started, {}
    assert [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(long_run)] == here[0]
    assert long_run.evidence == here[1]


def _postflight(run, env):
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["postflight", "--output-dir", str(run), "--profile", str(env)])
    record = json.loads((run / "verification.json").read_text())
    (run / "verification.json").unlink()
    (run / "SUCCESS").unlink(missing_ok=True)
    return code, record["evidence"], [c["status"] for c in record["checks"]]


def own_workers_for_a_short_run(monkeypatch, count):
    """Postflight starts its own workers (count of them) for a 40-step run, 7 steps a task."""
    monkeypatch.setattr(readahead, "OWN_WORKERS_STEPS", 10)
    monkeypatch.setattr(readahead, "OWN_WORKERS_BYTES", 1)
    monkeypatch.setattr(rollouts, "CHUNK_STEPS", 7)
    monkeypatch.setattr(ahead, "workers", lambda jobs: count)


def test_postflight_reads_a_long_runs_scalars_and_rollouts_in_workers_of_its_own(tmp_path, monkeypatch):
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    (run / "rollouts" / "9.jsonl").write_text("")  # a finding the workers must report too
    alone = _postflight(run, env)
    assert alone[0] == 1
    own_workers_for_a_short_run(monkeypatch, 2)
    seen = []
    start = startreads.start_reads

    def watched(ctx):
        own = start(ctx)
        seen.append((own, ctx.preflight_ahead, ctx.scalars_ahead.handed(),
                     [t.handed() for t in ctx.rollouts_ahead.tasks]))
        return own

    monkeypatch.setattr(startreads, "start_reads", watched)
    assert _postflight(run, env) == alone
    own, preflight, scalars, rollout_files = seen[0]
    assert own is not None and own.pool is None  # started, and closed when postflight ended
    assert scalars and rollout_files == [True] * 6  # 40 steps, 7 a task: all handed to workers
    assert preflight.has and not preflight.taken_back  # preflight.json too, read by a worker


def test_the_shard_checks_workers_take_what_the_checks_ask_for_first_before_the_shards(tmp_path, monkeypatch):
    """preflight.json, the log's segments, the scalars and the rollouts are asked for before
    the checkpoint: the shard check's workers are handed them first, in that order, so none
    waits behind the shards to be taken back by the one process every check waits for (at
    2,048 x 8 the rollouts were, 0.16 s of it). preflight.json goes before the log's segments,
    which this process takes back from the last: on two cores the one worker read it while
    rank placement, which needs it, waited 0.08 s."""
    from twgrpo.checks.checkpoint import checkpoint, shards
    from twgrpo.formats import tfevents
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    (run / "rollouts" / "9.jsonl").write_text("")  # a finding the workers must report too
    alone = _postflight(run, env)
    monkeypatch.setattr(shards, "SERIAL_BELOW", 0)  # the shard check starts workers: two
    monkeypatch.setattr(ahead, "workers", lambda jobs: 2)
    monkeypatch.setattr(readahead, "OWN_WORKERS_BYTES", 1)  # the event file counts as large
    monkeypatch.setattr(rollouts, "CHUNK_STEPS", 7)
    monkeypatch.setattr(startreads, "LOG_SEGMENT", 1024)  # the log in segments too
    monkeypatch.setattr(startreads.shards, "workers", lambda jobs: 3)  # three: one handed
    firsts = []
    start_ahead = checkpoint.start_ahead
    monkeypatch.setattr(checkpoint, "start_ahead", lambda *args, first=(): (
        firsts.append([task.fn for task in first]), start_ahead(*args, first=first))[1])
    assert _postflight(run, env) == alone
    assert firsts == [[placement.read_preflight, _REAL_SCAN_RANGE, tfevents.load_views] +
                      [rollouts._judge_steps] * 6]


def test_preflight_json_read_by_a_worker_gives_the_same_findings_when_it_cannot_be_read(tmp_path, monkeypatch):
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    for damage in (lambda p: p.write_text('{"status": "passed", "workers": [{'), lambda p: p.unlink()):
        damage(run / "preflight.json")
        monkeypatch.undo()
        alone = _postflight(run, env)
        assert alone[0] == 1 and "failed" in alone[2]
        own_workers_for_a_short_run(monkeypatch, 2)
        handed = []
        start = startreads.start_reads
        monkeypatch.setattr(startreads, "start_reads",
                            lambda ctx: (start(ctx), handed.append(ctx.preflight_ahead.handed()))[0])
        assert _postflight(run, env) == alone  # the worker's Unreadable is the check's own finding
        assert handed == [True]


def test_a_large_logs_segments_scanned_by_workers_give_the_logs_findings_line_for_line(tmp_path, monkeypatch):
    """The log is cut in one segment a process that begins one at once (this one, and each
    worker but the one preflight.json goes to): the workers scan all but the last, which
    postflight scans itself; the findings (a fatal marker's line number in the last segment,
    steps and inits from every segment) are those of one pass."""
    from twgrpo.checks.checkpoint import shards
    from twgrpo.formats import trainlog
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    with open(run / "training.log", "a") as log:
        log.write("(WorkerDict pid=4001) torch.OutOfMemoryError: CUDA out of memory.\n")
    alone = _postflight(run, env)
    assert alone[0] == 1 and "failed" in alone[2]
    own_workers_for_a_short_run(monkeypatch, 3)
    monkeypatch.setattr(startreads, "LOG_SEGMENT", (run / "training.log").stat().st_size // 3)
    monkeypatch.setattr(shards, "workers", lambda files: 4)
    seen = []
    start = startreads.start_reads
    monkeypatch.setattr(startreads, "start_reads", lambda ctx: (
        start(ctx), seen.append((ctx.log_ahead, [t.handed() for t in ctx.log_ahead])))[0])
    assert _postflight(run, env) == alone
    tasks, handed = seen[0]
    assert handed == [True, True, False]  # the last never handed: this process's own segment
    assert all(t.has for t in tasks) and tasks[-1].taken_back


@pytest.mark.parametrize("processes", [2, 5])
def test_each_handed_segment_has_a_worker_free_to_begin_it(tmp_path, monkeypatch, processes):
    """One worker reads preflight.json first; each other worker begins a segment at once, and
    none is queued behind them (it would wait for a worker to come free, and this process
    could not take it back), however many cores there are. With two processes (one worker)
    the log is scanned here whole."""
    from twgrpo.checks.checkpoint import shards
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    alone = _postflight(run, env)
    own_workers_for_a_short_run(monkeypatch, processes - 1)
    monkeypatch.setattr(startreads, "LOG_SEGMENT", 1024)
    monkeypatch.setattr(shards, "workers", lambda files: 16)  # cores: more than the workers started
    seen = []
    start = startreads.start_reads
    monkeypatch.setattr(startreads, "start_reads", lambda ctx: (
        start(ctx), seen.append(sum(t.handed() for t in ctx.log_ahead or ())))[0])
    assert _postflight(run, env) == alone
    assert seen == [processes - 2]  # the workers but preflight.json's


def _scan_the_first_segment_or_die(path, begin, end, *rest):
    """trainlog.scan_range, but a worker handed the log's first segment is killed (once,
    leaving its mark) while it holds it; postflight's own process waits for that (10 s at
    most) before it scans, so it cannot take every segment back first."""
    import time
    mark = os.environ["TEST_SEGMENT_MARK"]
    if os.getpid() == int(os.environ["TEST_PARENT_PID"]):
        waited = time.monotonic() + 10
        while not os.path.exists(mark) and time.monotonic() < waited:
            time.sleep(0.01)
    elif begin == 0 and not os.path.exists(mark):
        open(mark, "w").close()
        os._exit(9)
    return _REAL_SCAN_RANGE(path, begin, end, *rest)


def test_a_worker_killed_while_it_scans_a_log_segment_changes_nothing(tmp_path, monkeypatch):
    """Every segment the lost worker held, or that was still queued, is scanned here."""
    from twgrpo.checks.checkpoint import shards
    from twgrpo.formats import trainlog
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    with open(run / "training.log", "a") as log:
        log.write("(WorkerDict pid=4001) torch.OutOfMemoryError: CUDA out of memory.\n")
    alone = _postflight(run, env)
    own_workers_for_a_short_run(monkeypatch, 2)
    monkeypatch.setattr(startreads, "LOG_SEGMENT", (run / "training.log").stat().st_size // 3)
    monkeypatch.setattr(shards, "workers", lambda files: 4)
    monkeypatch.setattr(trainlog, "scan_range", _scan_the_first_segment_or_die)
    monkeypatch.setenv("TEST_SEGMENT_MARK", str(tmp_path / "killed"))
    monkeypatch.setenv("TEST_PARENT_PID", str(os.getpid()))
    assert _postflight(run, env) == alone
    assert (tmp_path / "killed").exists()  # a worker did die holding the first segment


def test_a_log_that_grew_after_its_segments_were_cut_is_scanned_whole_at_its_new_size(tmp_path, monkeypatch):
    """The segments cut the log as start_reads measured it; a log longer when the log check
    reads it is scanned in one pass, to its end then, as without workers."""
    from twgrpo.checks.checkpoint import shards
    from twgrpo.formats import trainlog
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    late = "(WorkerDict pid=4001) OSError: [Errno 28] No space left on device\n"
    log = run / "training.log"
    text = log.read_text()
    log.write_text(text + late)
    alone = _postflight(run, env)
    assert alone[0] == 1 and "failed" in alone[2]
    log.write_text(text)
    own_workers_for_a_short_run(monkeypatch, 3)
    monkeypatch.setattr(startreads, "LOG_SEGMENT", log.stat().st_size // 3)
    monkeypatch.setattr(shards, "workers", lambda files: 4)
    start = startreads.start_reads
    cut = []

    def then_grows(ctx):
        own = start(ctx)
        cut.append(len(ctx.log_ahead))
        with open(log, "a") as stream:
            stream.write(late)
        return own

    monkeypatch.setattr(startreads, "start_reads", then_grows)
    assert _postflight(run, env) == alone and cut == [3]


def test_a_worker_lost_while_postflight_hands_out_tasks_changes_nothing(tmp_path, monkeypatch):
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=40)
    alone = _postflight(run, env)
    own_workers_for_a_short_run(monkeypatch, 1)
    started = []
    real_start = readahead.own_workers

    def dying(*args):  # the event-file read kills its worker before the rollouts are handed out
        own = real_start(*args)
        started.append(own)
        with pytest.raises(BrokenProcessPool):
            own.submit(_die).result()
        return own

    monkeypatch.setattr(readahead, "own_workers", dying)
    assert _postflight(run, env) == alone
    assert started and started[0].pool is None  # closed


def test_a_short_small_run_or_one_core_starts_no_workers(monkeypatch):
    assert readahead.own_workers(readahead.OWN_WORKERS_STEPS - 1, readahead.OWN_WORKERS_BYTES - 1, 9) is None
    monkeypatch.setattr(ahead, "workers", lambda jobs: 0)
    assert readahead.own_workers(10 ** 6, 10 ** 9, 9) is None
    monkeypatch.setattr(ahead, "workers", lambda jobs: 1)
    started = readahead.own_workers(readahead.OWN_WORKERS_STEPS, 0, 9)
    try:
        assert started is not None and started.submit(abs, -3).result() == 3
    finally:
        started.close()
    assert started.submit(abs, -3) is None  # closed: nothing handed, the caller runs it
