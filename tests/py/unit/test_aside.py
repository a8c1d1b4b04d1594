"""A record written by a child process (run/aside.py): the same text write_json writes, by
another process; where the child cannot write, is killed, or how it ended is unknown (SIGCHLD
ignored), or none can start, it is written here, and a failure is raised here; the child never
flushes what this process has buffered, and no temporary file is left. Postflight writes
actor-placement.json this way, and the record is the same; a postflight that ends early puts
none in place."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_postflight import make, postflight
from twgrpo.checks.checkpoint import fanout, shards
from twgrpo.run import aside
from twgrpo.run.records import RecordError, write_json

BUNDLE = Path(aside.__file__).resolve().parents[2]


class WriterPid:
    """Written by json's default=str as the pid of the process that writes the record."""

    def __str__(self):
        return str(os.getpid())


def record(rows):
    return {"status": "passed", "writer": WriterPid(), "actors": [{"rank": r} for r in range(rows)]}


def test_a_large_record_is_written_by_a_child_as_write_json_writes_it(tmp_path):
    written = aside.Aside(tmp_path / "actor-placement.json", record(aside.FORK_FROM), aside.FORK_FROM)
    assert written.child is not None
    written.wait()
    text = (tmp_path / "actor-placement.json").read_text()
    child = json.loads(text)["writer"]
    assert child != str(os.getpid())  # another process wrote it
    write_json(tmp_path / "here.json", record(aside.FORK_FROM))
    here = (tmp_path / "here.json").read_text()
    assert text == here.replace(f'"writer": "{os.getpid()}"', f'"writer": "{child}"')


def test_a_small_record_or_a_box_without_fork_is_written_here(tmp_path, monkeypatch):
    aside.Aside(tmp_path / "small.json", record(3), 3).wait()
    monkeypatch.delattr(os, "fork")
    aside.Aside(tmp_path / "nofork.json", record(aside.FORK_FROM), aside.FORK_FROM).wait()
    for name in ("small.json", "nofork.json"):
        assert json.loads((tmp_path / name).read_text())["writer"] == str(os.getpid())


def test_what_the_child_cannot_write_is_written_here_and_its_failure_raised_here(tmp_path):
    target = tmp_path / "actor-placement.json"
    target.mkdir()  # the child's write_json refuses it and the child ends with 1
    written = aside.Aside(target, record(aside.FORK_FROM), aside.FORK_FROM)
    assert written.child is not None
    with pytest.raises(RecordError, match="GEN-E020"):
        written.wait()


def test_the_child_never_flushes_this_processs_buffered_output(tmp_path):
    script = (f"import sys; sys.path.insert(0, {str(BUNDLE)!r}); from twgrpo.run import aside\n"
              "print('buffered once', end='')\n"  # a pipe: block-buffered, not flushed yet
              f"aside.Aside({str(tmp_path / 'r.json')!r}, {{'a': list(range(9))}}, aside.FORK_FROM).wait()\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout == "buffered once"
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": list(range(9))}


@pytest.mark.parametrize("options,code,status", [({}, 0, "passed"), ({"per_node": [3, 1]}, 1, "failed")])
def test_postflight_writes_the_same_placement_record_from_a_child(tmp_path, monkeypatch, options, code, status):
    texts = []
    for fork_from in (10 ** 9, 1):
        monkeypatch.setattr(aside, "FORK_FROM", fork_from)
        run = make(tmp_path / str(fork_from), **options)
        assert postflight(run) == code
        placed = json.loads((run / "actor-placement.json").read_text())
        texts.append({**placed, "checked_at": None})
    assert texts[0] == texts[1] and len(texts[0]["actors"]) == 4 and texts[0]["status"] == status


def test_postflight_forks_no_child_where_ray_runs_in_its_process(tmp_path, monkeypatch):
    monkeypatch.setattr(aside, "FORK_FROM", 1)
    monkeypatch.setattr(fanout, "check_files", lambda paths, sizes=None, **_: shards.check_files(paths, sizes=sizes))
    forks = []
    monkeypatch.setattr(aside, "_forked", lambda path, data: (forks.append(path.name), None))  # written here
    for extra in ((), ("--fan-out",)):
        run = make(tmp_path / str(len(extra)))
        assert postflight(run, *extra) == 0
        assert json.loads((run / "actor-placement.json").read_text())["status"] == "passed"
    assert forks == ["actor-placement.json"]  # the run without --fan-out alone


def test_an_audit_begins_no_write(tmp_path, monkeypatch):
    monkeypatch.setattr(aside, "FORK_FROM", 1)
    run = make(tmp_path)
    assert postflight(run, "--audit") == 0
    assert not (run / "actor-placement.json").exists() and not (run / "verification.json").exists()


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_killed_child_or_sigchld_ignored_means_the_record_is_written_here(tmp_path):
    killed = aside.Aside(tmp_path / "killed.json", record(aside.FORK_FROM), aside.FORK_FROM)
    os.kill(killed.child, signal.SIGKILL)
    killed.wait()
    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel would reap a child: none
    try:
        unknown = aside.Aside(tmp_path / "unknown.json", record(aside.FORK_FROM), aside.FORK_FROM)
        assert unknown.child is None and unknown.temporary is None
        unknown.wait()
    finally:
        signal.signal(signal.SIGCHLD, before)
    for name in ("killed.json", "unknown.json"):
        assert json.loads((tmp_path / name).read_text())["writer"] == str(os.getpid())
    assert leftovers(tmp_path) == []


def test_a_postflight_that_ends_early_puts_no_placement_record_in_place(tmp_path, monkeypatch):
    monkeypatch.setattr(aside, "FORK_FROM", 1)
    children = []
    forked = aside._forked
    monkeypatch.setattr(aside, "_forked", lambda path, data: (lambda made: (children.append(made[0]), made)[1])(
        forked(path, data)))
    from twgrpo.checks.postflight import postflight as phase

    def interrupted(ctx):
        raise KeyboardInterrupt
    checks = [dataclasses.replace(c, run=interrupted) if c.name == "checkpoint" else c for c in phase.CHECKS]
    monkeypatch.setattr(phase, "CHECKS", checks)
    run = make(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        postflight(run)
    assert len(children) == 1 and not (run / "actor-placement.json").exists() and leftovers(run) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)  # reaped: no zombie left


def test_cancel_reaps_a_child_whose_wait_was_interrupted(tmp_path, monkeypatch):
    written = aside.Aside(tmp_path / "r.json", record(aside.FORK_FROM), aside.FORK_FROM)
    child = written.child

    def interrupted(pid, options):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "waitpid", interrupted)
    with pytest.raises(KeyboardInterrupt):
        written.wait()
    monkeypatch.undo()
    written.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)  # reaped: no zombie left
    assert leftovers(tmp_path) == [] and not (tmp_path / "r.json").exists()
