"""The shard check started ahead (checks/checkpoint/ahead.py): worker processes read the shards
(and a short run's rollouts) while postflight runs its other checks, and the checks get the
verdicts, sizes and findings they would have read themselves; anything else (other paths, no
workers, a worker lost) is checked then."""
import io
import threading
import types
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest
import synthrun
import torchlike
from twgrpo.checks.checkpoint import ahead, checkpoint, shards
from twgrpo.checks.postflight import rollouts
from twgrpo.run.profile import load_profile


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.setattr(shards, "SERIAL_BELOW", 0)
    monkeypatch.setattr(shards, "BATCH_FILES", 2)
    made = []
    for name in ("a", "b", "crc", "layout", "c"):
        path = tmp_path / f"{name}.pt"
        torchlike.write_shard(path, torchlike.numels_for(64 << 10, 8))
        made.append(str(path))
    data = bytearray(open(made[2], "rb").read())
    data[len(data) // 2] ^= 0x01
    open(made[2], "wb").write(bytes(data))
    synthrun.torch_zip(tmp_path / "layout.pt", payload=b"\x80\x02(X\x01\x00\x00\x00aQ.")
    return made + [str(tmp_path / "missing.pt")]


def alone(paths):
    sizes = {}
    return shards.check_files(paths, jobs=1, sizes=sizes), sizes


def test_the_workers_verdicts_and_sizes_are_the_checks_own(paths):
    started = ahead.Ahead(paths, 2)
    assert started.thread is not None  # begun in worker processes, not when asked
    sizes = {}
    assert (started.check_files(paths, sizes=sizes, progress=io.StringIO()), sizes) == alone(paths)
    assert {v[0] for v in alone(paths)[0].values() if v} == {"damaged", "layout", "missing"}


def test_tasks_handed_first_go_to_the_workers_before_every_shard(paths, monkeypatch):
    from twgrpo.checks.postflight import readahead
    handed = []

    class Recording(shards.ProcessPoolExecutor):
        def submit(self, fn, *args):
            handed.append(fn.__name__)
            return super().submit(fn, *args)

    monkeypatch.setattr(shards, "ProcessPoolExecutor", Recording)
    first = readahead.Task(None, sorted, "cba")
    started = ahead.Ahead(paths, 2, first=[first])
    assert (started.check_files(paths, sizes={}), first.answer()) == (alone(paths)[0], ["a", "b", "c"])
    assert handed[0] == "sorted" and set(handed[1:]) == {"batch"} and not first.taken_back


def test_many_files_are_handed_to_the_workers_unstated_with_the_same_verdicts_and_sizes(paths, monkeypatch):
    """More than STAT_ALL files: the workers fork and take the first tasks at once, and no file
    is stated here but SAMPLES of them (49,152 shards' stat was a tenth of a second of the
    process every check waits for). Fails where every file is stated first."""
    from twgrpo.checks.postflight import readahead
    events = []

    class Recording(shards.ProcessPoolExecutor):
        def submit(self, fn, *args):
            events.append(("submit", fn.__name__))
            return super().submit(fn, *args)

    file_size = shards.file_size
    monkeypatch.setattr(shards, "ProcessPoolExecutor", Recording)
    monkeypatch.setattr(shards, "file_size", lambda p: (events.append(("stat", p)), file_size(p))[1])
    monkeypatch.setattr(shards, "STAT_ALL", 3)
    monkeypatch.setattr(shards, "SAMPLES", 2)
    first = readahead.Task(None, sorted, "cba")
    started = ahead.Ahead(paths, 2, first=[first])
    assert events[0] == ("submit", "sorted")
    assert [p for kind, p in events if kind == "stat"] == [paths[0], paths[3]]  # the samples alone
    sizes = {}
    assert (started.check_files(paths, sizes=sizes, progress=io.StringIO()), sizes, first.answer()) == \
        alone(paths) + (["a", "b", "c"],)


def test_sampled_files_that_are_a_fifo_a_device_or_a_folder_change_no_verdict(paths, tmp_path, monkeypatch):
    """Unstated files planned from samples that are not regular files: nothing waits on the
    FIFO, and every verdict and size is the one a check alone gives."""
    import os
    os.mkfifo(tmp_path / "fifo.pt")
    (tmp_path / "zero.pt").symlink_to("/dev/zero")
    (tmp_path / "folder.pt").mkdir()
    odd = [str(tmp_path / name) for name in ("fifo.pt", "zero.pt", "folder.pt")]
    mixed = [odd[0]] + paths[:2] + [odd[1]] + paths[2:4] + [odd[2]] + paths[4:]
    monkeypatch.setattr(shards, "STAT_ALL", 3)
    monkeypatch.setattr(shards, "SAMPLES", 3)  # samples at 0, 3 and 6: the three odd ones
    sizes = {}
    assert (ahead.Ahead(mixed, 2).check_files(mixed, sizes=sizes, progress=io.StringIO()), sizes) == alone(mixed)
    assert {alone(mixed)[0][p] for p in odd} == {("damaged", "unreadable (not a regular file)")}


def test_a_sizes_estimate_is_the_nearest_sample_before_each_file(tmp_path, monkeypatch):
    made = []
    for index, size in enumerate([10, 11, 12, 500, 501, 502, 0]):
        path = tmp_path / f"{index}"
        path.write_bytes(b"x" * size)
        made.append(str(path))
    monkeypatch.setattr(shards, "SAMPLES", 3)  # a sample every third file: 0, 3, 6
    assert shards.estimates(made) == [10, 10, 10, 500, 500, 500, 0]
    monkeypatch.setattr(shards, "SAMPLES", 100)  # more samples than files: each file its own
    assert shards.estimates(made) == [10, 11, 12, 500, 501, 502, 0]
    assert shards.estimates([]) == []


def test_the_progress_of_files_not_stated_first_says_what_it_knows():
    from twgrpo.checks.checkpoint.progress import Progress
    clock = iter([0.0, 10.0, 10.0]).__next__
    stream = io.StringIO()
    meter = Progress(stream, 4, None, clock=clock)
    meter.on = True
    meter.advance(1, 1 << 30)
    assert stream.getvalue() == "\rcheckpoint: 1/4 files, 1.00 GiB, 102 MiB/s, 30 s left"


def test_batches_no_worker_has_begun_are_checked_by_the_process_that_waits(paths, monkeypatch):
    import time
    from twgrpo.checks.postflight import readahead
    here = []
    check_here = shards.Parallel.check_here
    monkeypatch.setattr(shards.Parallel, "check_here", staticmethod(lambda ps: (here.extend(ps), check_here(ps))[1]))
    monkeypatch.setattr(shards, "BATCH_FILES", 1)  # a batch a file
    busy = readahead.Task(None, time.sleep, 1.0)  # the one worker is busy: batches wait for it
    started = ahead.Ahead(paths, 1, first=[busy])
    sizes = {}
    assert (started.check_files(paths, sizes=sizes, progress=io.StringIO()), sizes) == alone(paths)
    # 6 batches of a file: the worker runs the sleep, its queue holds at most two more tasks
    # (ProcessPoolExecutor queues one more than its workers), the rest is checked here
    assert len(here) >= len(paths) - 2 and len(set(here)) == len(here)


def test_a_file_no_one_answered_for_is_checked_here_never_passed(paths, monkeypatch):
    collect = shards.Parallel.collect_workers
    monkeypatch.setattr(shards.Parallel, "collect_workers",
                        lambda self: {p: v for p, v in collect(self).items() if not p.endswith("crc.pt")})
    sizes = {}
    assert (ahead.Ahead(paths, 2).check_files(paths, sizes=sizes), sizes) == alone(paths)
    sizes = {}  # and the check begun when asked, in workers too
    assert (shards.check_files(paths, jobs=2, sizes=sizes), sizes) == alone(paths)


def test_other_paths_a_lost_worker_or_no_cores_are_checked_when_asked(paths, monkeypatch):
    started = ahead.Ahead(paths, 2)
    assert started.check_files(paths[:3], sizes={}) == alone(paths[:3])[0]
    def killed(self):
        raise BrokenProcessPool("a worker was killed")

    monkeypatch.setattr(shards.Parallel, "collect", killed)
    lost = ahead.Ahead(paths, 2)
    sizes = {}
    assert (lost.check_files(paths, sizes=sizes), sizes) == alone(paths)
    none = ahead.Ahead(paths, 0)
    assert none.thread is None and none.check_files(paths) == alone(paths)[0]


def test_postflight_starts_the_check_of_the_target_steps_shards(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "checkpoints" / "global_step_2" / "actor").mkdir(parents=True)
    monkeypatch.setattr(ahead, "workers", lambda files: 1)
    started = checkpoint.start_ahead(run, 2, 4)
    assert started.paths == checkpoint.shard_paths(run, 2, 4)
    assert len(started.paths) == 3 * 4 + 1 and started.paths[-1].endswith("global_step_2/data.pt")
    assert checkpoint.start_ahead(run, 3, 4) is None  # no such step folder: nothing to start


def test_a_short_runs_rollouts_are_read_by_the_workers_with_the_same_findings(paths, tmp_path, monkeypatch):
    # The shard check is held open until the rollouts are handed over: three small shards may be
    # checked (and the pool closed, so that submit answers None) before the test hands them.
    handed = threading.Event()
    collect = ahead.Ahead._collect
    monkeypatch.setattr(ahead.Ahead, "_collect", lambda self: (handed.wait(30), collect(self)))
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    row = '{"input": "q", "output": "a", "score": 0.5, "step": %d}\n'
    (run / "rollouts" / "1.jsonl").write_text(row % 1 * 3)
    (run / "rollouts" / "2.jsonl").write_text(row % 2 + row % 7)  # a wrong step, too few rows
    profile = load_profile(None)

    def ctx(started):
        made = types.SimpleNamespace(profile=profile, run_dir=run, steps=3, first_step=1,
                                     evidence={}, ahead=started, rollouts_ahead=None)
        made.rollouts_ahead = rollouts.start_ahead(made, started.submit if started else None)
        return made

    here, there = ctx(None), ctx(ahead.Ahead(paths, 2))
    handed.set()
    assert here.rollouts_ahead is None and all(task.handed() for task in there.rollouts_ahead.tasks)
    for task in there.rollouts_ahead.tasks:
        task.future.result()  # answered by the workers (after the shards) before the check comes
    found = [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(here)]
    assert [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(there)] == found
    assert not any(task.taken_back for task in there.rollouts_ahead.tasks)  # the workers' answers
    assert here.evidence == there.evidence
    assert {fid for fid, _, _ in found} == {"POST-E018", "POST-E019", "POST-E020"}  # 3.jsonl: missing
    lost = Future()  # the worker that read them was killed: read here instead
    lost.set_exception(BrokenProcessPool("a worker was killed"))
    there.rollouts_ahead = rollouts.start_ahead(there, lambda *args: lost)
    assert [(f.id, f.obj, f.message) for f in rollouts.check_rollouts(there)] == found
    there.ahead.check_files(paths)
    assert rollouts.start_ahead(there, there.ahead.submit) is None  # the workers are done
