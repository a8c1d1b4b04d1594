"""A batch of small shards asks the kernel for the next file while it checks one
(checks/checkpoint/shards.py), so a cold read overlaps the check; only regular files are asked for."""
import os

import torchlike
from twgrpo.checks.checkpoint import shards


def test_a_batch_asks_for_the_next_file_while_it_checks_one(tmp_path, monkeypatch):
    paths = []
    for rank in range(3):
        path = tmp_path / f"model_world_size_3_rank_{rank}.pt"
        torchlike.write_shard(path, [64, 32])
        paths.append(str(path))
    events = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: events.append(
        ("ask", os.readlink(f"/proc/self/fd/{fd}"), advice)))
    checked = shards.problem

    def problem(path, crc=True):
        events.append(("check", str(path)))
        return checked(path, crc)

    monkeypatch.setattr(shards, "problem", problem)
    assert shards._batch(paths) == [None, None, None]
    ask = os.POSIX_FADV_WILLNEED
    assert events == [("ask", paths[1], ask), ("check", paths[0]), ("ask", paths[2], ask),
                      ("check", paths[1]), ("check", paths[2])]


def test_only_a_regular_file_is_asked_for(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: calls.append(a))
    os.mkfifo(tmp_path / "fifo")  # opened for reading, a FIFO could wait for a writer
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to("/dev/zero")
    for name in ("fifo", "folder", "link", "missing"):
        shards._prefetch(str(tmp_path / name))
    assert calls == []
    (tmp_path / "file").write_bytes(b"x")
    shards._prefetch(str(tmp_path / "file"))
    assert len(calls) == 1
