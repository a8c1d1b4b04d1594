"""A batch of small shards opens the next file and asks the kernel for it while it checks one
(checks/checkpoint/shardfile.py), so a cold read overlaps the check; only regular files are opened
for good, and each file gets the verdict the one-file check gives it."""
import os

import torchlike
from twgrpo.checks.checkpoint import shardfile, shards
from twgrpo.formats import torchzip


def test_a_batch_asks_for_the_next_file_while_it_checks_one(tmp_path, monkeypatch):
    paths = []
    for rank in range(3):
        path = tmp_path / f"model_world_size_3_rank_{rank}.pt"
        torchlike.write_shard(path, [64, 32 + rank])
        paths.append(str(path))
    events = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: events.append(
        ("ask", os.readlink(f"/proc/self/fd/{fd}"), advice)))
    checked = torchzip.check_bytes

    def check_bytes(data, crc=True):
        events.append(("check", next(p for p in paths if open(p, "rb").read() == data)))
        return checked(data, crc)

    monkeypatch.setattr(torchzip, "check_bytes", check_bytes)
    assert shardfile.batch(paths) == [(None, os.path.getsize(p)) for p in paths]
    ask = os.POSIX_FADV_WILLNEED
    assert events == [("ask", paths[1], ask), ("check", paths[0]), ("ask", paths[2], ask),
                      ("check", paths[1]), ("check", paths[2])]


def test_only_a_regular_file_is_asked_for_and_the_rest_get_the_one_file_verdict(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: calls.append(os.readlink(f"/proc/self/fd/{a[0]}")))
    os.mkfifo(tmp_path / "fifo")  # opened for reading, a FIFO could wait for a writer
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to("/dev/zero")
    torchlike.write_shard(tmp_path / "file", [8])
    names = ["start", "fifo", "folder", "link", "missing", "file"]
    (tmp_path / "start").write_bytes(b"not a zip")
    paths = [str(tmp_path / name) for name in names]
    before = set(os.listdir("/proc/self/fd"))
    found = shardfile.batch(paths)
    assert set(os.listdir("/proc/self/fd")) == before  # every descriptor it opened is closed
    assert calls == [paths[-1]]  # the first file is not asked for: it is read at once
    assert [verdict for verdict, _ in found] == [shards.problem(path)[0] for path in paths]
    assert [verdict for verdict, _ in found][1:5] == [("damaged", "unreadable (not a regular file)")] * 3 + [
        ("missing", "missing")]
