"""Checkpoint shards checked in parallel (checks/checkpoint/shards.py): the same verdict for every file as
the one-file check, big files split across workers, a progress line on a terminal only."""
import io
import os
import re

import pytest
import synthrun
import torchlike
from twgrpo.checks.checkpoint import progress, shardfile, shards


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Whole and broken shards, big ones among them; the thresholds shrunk to their size."""
    monkeypatch.setattr(shards, "SERIAL_BELOW", 0)
    monkeypatch.setattr(shards, "SLICE", 64 << 10)
    monkeypatch.setattr(shards, "BATCH_FILES", 3)
    made = {}
    for name in ("big", "big-crc", "big-cut", "small", "small-crc", "layout"):
        path = tmp_path / f"{name}.pt"
        big = name.startswith("big")
        torchlike.write_shard(path, torchlike.numels_for((2 << 20) if big else (64 << 10), 40))
        made[name] = path
    data = bytearray(made["big-crc"].read_bytes())
    data[len(data) * 3 // 4] ^= 0xFF  # an entry late in the file: in a later slice than the first
    made["big-crc"].write_bytes(bytes(data))
    data = bytearray(made["small-crc"].read_bytes())
    data[len(data) // 2] ^= 0x01
    made["small-crc"].write_bytes(bytes(data))
    made["big-cut"].write_bytes(made["big-cut"].read_bytes()[:-1000])
    synthrun.torch_zip(made["layout"], payload=b"\x80\x02(X\x01\x00\x00\x00aQ.")
    made["missing"] = tmp_path / "missing.pt"
    return made


def test_parallel_and_split_checks_give_each_file_its_own_verdict(files, monkeypatch):
    serial = {p: shards.problem(p)[0] for p in files.values()}
    parallel = shards._parallel
    calls = []
    monkeypatch.setattr(shards, "_parallel", lambda *a: calls.append(a[1]) or parallel(*a))
    assert {n: (serial[p] or ("ok",))[0] for n, p in files.items()} == {
        "big": "ok", "big-crc": "damaged", "big-cut": "damaged", "small": "ok",
        "small-crc": "damaged", "layout": "layout", "missing": "missing"}
    assert shards.check_files(list(files.values()), jobs=2) == serial
    assert calls == [2]  # two worker processes, not the serial loop


def test_a_big_file_is_split_into_crc_slices(files):
    _, spans = shards.problem(files["big"], crc=False)
    slices = shards._slices(spans)
    assert len(slices) > 4 and [s for part in slices for s in part] == spans
    assert shardfile.spans(str(files["big"]), slices[-1]) is None
    assert shardfile.spans(str(files["big-crc"]), slices[-1])[0] == "damaged"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_a_line_on_a_terminal_and_nothing_when_piped_and_quick(files):
    paths = [files["big"], files["small"]]
    shown, piped = Terminal(), io.StringIO()
    assert shards.check_files(paths, jobs=2, progress=shown) == {p: None for p in paths}
    assert shards.check_files(paths, jobs=2, progress=piped) == {p: None for p in paths}
    assert piped.getvalue() == ""
    text = shown.getvalue()
    assert "checkpoint: 2/2 files" in text and "MiB/s" in text and "s left" in text
    assert "\n" not in text and text.endswith("\r")  # the line is cleared, not left behind


def test_a_long_check_prints_whole_progress_lines_into_a_log(files, monkeypatch):
    """In a job's log (not a terminal): a line every LOG_EVERY seconds, and one at the end."""
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)  # every file takes "long enough"
    paths = [files["big"], files["small"], files["small-crc"]]
    logged = io.StringIO()
    shards.check_files(paths, jobs=1, progress=logged)
    lines = logged.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in logged.getvalue()
    assert lines[0].startswith("checkpoint: 1/3 files") and lines[-1].startswith("checkpoint: 3/3 files")
    assert all("GiB" in line and "MiB/s" in line and "s left" in line and "s so far" in line
               for line in lines)


def logged_lines(seconds, every=10):
    """The log lines of a check that finishes a file of 1 GiB every `every` seconds for
    `seconds` seconds, on a simulated clock (the check itself takes no time)."""
    now = [0.0]
    files = int(seconds // every)
    logged = io.StringIO()
    meter = shards.Progress(logged, files, files << 30, clock=lambda: now[0])
    for _ in range(files):
        now[0] += every
        meter.advance(1, 1 << 30)
    meter.close()
    return files, logged.getvalue().splitlines()


def test_a_long_check_logs_less_often_as_it_goes_and_a_bounded_number_of_lines():
    files, lines = logged_lines(24 * 3600)  # a day
    so_far = [int(re.search(r"\((\d+) s so far\)", line).group(1)) for line in lines]
    gaps = [b - a for a, b in zip([0] + so_far, so_far)]
    assert gaps[:progress.LOG_DOUBLING] == [progress.LOG_EVERY] * progress.LOG_DOUBLING
    assert all(b >= a for a, b in zip(gaps, gaps[1:-1]))  # the spacing only grows
    assert len(lines) < progress.LOG_LINES and lines[-1].startswith(f"checkpoint: {files}/{files} files")
    files, lines = logged_lines(7 * 24 * 3600, every=60)  # a week: the bound holds
    assert len(lines) == progress.LOG_LINES and lines[-1].startswith(f"checkpoint: {files}/{files} files")


def test_workers_are_bounded_by_cores_memory_and_jobs(monkeypatch):
    monkeypatch.setattr(shards, "_available_memory", lambda: 3 * shards.WORKER_MEMORY)
    assert shards.workers(1) == 1
    assert shards.workers(100) <= 3
    monkeypatch.setattr(shards, "_available_memory", lambda: 0)
    assert shards.workers(100) == 1


def test_without_worker_processes_the_files_are_checked_alone(files, monkeypatch):
    def no_pool(*args, **kwargs):
        raise OSError(38, "Function not implemented")  # sem_open without /dev/shm
    monkeypatch.setattr(shards, "ProcessPoolExecutor", no_pool)
    serial = {p: shards.problem(p)[0] for p in files.values()}
    assert shards.check_files(list(files.values()), jobs=2) == serial


def test_alone_each_file_gets_the_one_file_verdict_and_a_whole_file_its_size(files):
    paths = [str(p) for p in files.values()]
    sizes = {}
    found = shards.check_files(paths, jobs=1, sizes=sizes)
    assert found == {p: shards.problem(p)[0] for p in paths}
    assert sizes == {p: os.path.getsize(p) for p in paths if found[p] is None}
    assert sizes and len(sizes) < len(paths)


def test_in_parallel_a_whole_file_gets_its_size_too(files):
    sizes = {}
    found = shards.check_files(list(files.values()), jobs=2, sizes=sizes)
    assert sizes == {p: p.stat().st_size for p in files.values() if found[p] is None}
