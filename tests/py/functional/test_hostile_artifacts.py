"""Postflight on hostile and broken artifacts planted into copies of the real smoke run: each
gets the finding of the check it belongs to (never GEN-E001, never a pass), in bounded memory.
Big inputs are generated here; limits are lowered through their module constants so that the
files stay small, except in the one test that proves the 100 MiB bound on large inputs."""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import hostile
import pytest
from twgrpo.checks.postflight import postflight, rollouts
from twgrpo.formats import tfevents, torchzip, trainlog
from twgrpo.run import budget
from twgrpo.cli import main

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))
VERIFY = Path(__file__).resolve().parents[3] / "tools" / "verl" / "two-worker-grpo" / "verify-two-worker-grpo-v1.py"


@pytest.fixture
def run(tmp_path):
    copy = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    for name in ("SUCCESS", "verification.json", "actor-placement.json"):
        (copy / name).unlink()
    return copy


def findings(run):
    data = json.loads((run / "verification.json").read_text())
    return [f for c in data["checks"] for f in c["findings"] if f["level"] == "error"]


def postflight_fails_with(run, expected):
    assert main(["postflight", "--output-dir", str(run)]) == 1
    found = findings(run)
    assert {f["id"] for f in found} == {expected}, found
    assert not (run / "SUCCESS").exists()
    return found


def test_a_log_line_without_end_is_a_finding_and_the_scan_goes_on(run, monkeypatch):
    monkeypatch.setattr(trainlog, "MAX_LINE", 1 << 16)
    hostile.log_without_newline(run, 1 << 20)
    [long] = postflight_fails_with(run, "POST-E030")
    lines = (FIXTURE / "training.log").read_bytes().count(b"\n")
    assert long["obj"] == f"training.log:{lines + 1}" and long["evidence"]["length"] > 1 << 20
    assert long["evidence"]["offset"] == len((FIXTURE / "training.log").read_bytes())


def test_an_over_long_line_inside_the_log_keeps_later_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(trainlog, "MAX_LINE", 1000)
    monkeypatch.setattr(trainlog, "BLOCK", 4096)
    path = tmp_path / "training.log"
    path.write_bytes(b"ok\n" + b"Traceback " * 500 + b"\nok\n" + b"x" * 9000 + b"\nTraceback (most recent call last):\n")
    scan = trainlog.scan_log(str(path))
    assert scan.long_lines == [(2, 3, 5000), (4, 5007, 9000)]
    assert [(n, name) for n, name, _ in scan.fatal] == [(5, "python-traceback")]
    assert scan.lines == 5


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_over_long_line_across_segments_is_counted_once(tmp_path, monkeypatch, jobs):
    monkeypatch.setattr(trainlog, "MAX_LINE", 1000)
    monkeypatch.setattr(trainlog, "SEGMENT", 3000)
    monkeypatch.setattr(trainlog, "BLOCK", 700)
    path = tmp_path / "training.log"
    path.write_bytes(b"a\n" * 10 + b"y" * 20_000 + b"\n" + b"Killed \n" + b"z" * 5000)
    scan = trainlog.scan_log(str(path), jobs=jobs)
    assert scan.long_lines == [(11, 20, 20_000), (13, 20_029, 5000)]
    assert [(n, name) for n, name, _ in scan.fatal] == [(12, "killed")]
    assert scan.lines == 13


PATHOLOGICAL = [  # each line is quadratic for a backtracking pattern; together a few MB
    b"commId " + b"x" * 400_000,
    b"host:1:2 [0] NCCL INFO NET/Socket : Using " + b"[0]" + b"a" * 400_000,
    b"h:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 commId 0x1 " * 4000,
    b"ProcessGroupNCCL " * 30_000,
    b"Total training steps: " + b"9" * 300_000,
    b"global_step_" + b"7" * 300_000,
]


def test_pathological_lines_are_read_in_linear_time(run):
    """A hang guard, not a timing: a quadratic pattern needs hours on these lines."""
    with open(run / "training.log", "ab") as stream:
        stream.write(b"\n".join(PATHOLOGICAL) + b"\n")
    done = subprocess.run([sys.executable, str(VERIFY), "postflight", "--output-dir", str(run)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "GEN-E001" not in done.stdout


def test_the_comm_id_line_of_the_issue_passes(run):
    hostile.comm_id_line(run)
    assert main(["postflight", "--output-dir", str(run)]) == 0


@pytest.mark.parametrize("length", [1 << 60, (1 << 64) - 1])
def test_an_impossible_tensorboard_length_is_a_damaged_record(run, length):
    hostile.tensorboard_length(run, length)
    [found] = postflight_fails_with(run, "POST-E015")
    assert "impossible" in found["message"]


def test_invalid_utf8_in_a_rollout_row_names_file_and_offset(run):
    hostile.rollout_bad_utf8(run)
    [found] = postflight_fails_with(run, "POST-E020")
    offset = (run / "rollouts" / "1.jsonl").read_bytes().index(b"\xff")
    assert found["obj"].endswith("1.jsonl") and f"line 4: not UTF-8 at byte {offset}" in found["message"]


def test_an_over_long_rollout_row_is_a_finding(run, monkeypatch):
    monkeypatch.setattr(rollouts, "MAX_ROLLOUT_ROW", 1 << 20)
    hostile.huge_rollout_row(run, 4 << 20)
    [found] = postflight_fails_with(run, "POST-E031")
    assert found["obj"].endswith("1.jsonl line 8")


def test_a_zip_of_only_data_pkl_is_not_a_shard(run):
    hostile.pickle_only_zip(run)
    assert (run / hostile.MODEL).stat().st_size < 400
    postflight_fails_with(run, "POST-E032")


def test_entries_sharing_one_deflate_stream_are_refused_unread(run):
    hostile.overlapping_zip(run, 16 << 20)
    [found] = postflight_fails_with(run, "POST-E032")
    assert "compressed" in found["message"]


@pytest.mark.parametrize("entries,limit", [(70_000, 65_536), (1000, torchzip.MAX_ENTRIES)])
def test_a_zip_of_many_entries_at_one_offset_is_refused(run, monkeypatch, entries, limit):
    monkeypatch.setattr(torchzip, "MAX_ENTRIES", limit)
    hostile.many_entries_zip(run, entries)
    postflight_fails_with(run, "POST-E032")


def test_the_evidence_kept_from_a_log_is_bounded_by_the_runs_budget(run, monkeypatch):
    monkeypatch.setattr(budget, "EVIDENCE_BASE", 5000)
    with open(run / "training.log", "a") as stream:
        stream.writelines(f"saved global_step_{n}\n" for n in range(10_000))
    [found] = postflight_fails_with(run, "POST-E033")
    kept = int(found["message"].split("first ")[1].split()[0])
    assert 5000 < kept < 6000 and "this run's budget" in found["message"]


PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_postflight_stays_within_100_mib_on_large_hostile_inputs(run):
    """A 160 MB log line without a newline and a 64 MB rollout row, default limits."""
    hostile.log_without_newline(run, 160 << 20)
    hostile.huge_rollout_row(run, 64 << 20)
    out = subprocess.run([sys.executable, "-c", PEAK, sys.executable, str(VERIFY), "postflight",
                          "--output-dir", str(run)], capture_output=True, text=True, check=True)
    code, peak_kib = map(int, out.stdout.split())
    assert code == 1
    assert {f["id"] for f in findings(run)} == {"POST-E030", "POST-E031"}
    assert peak_kib <= 100 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


def fifo(path):
    path.unlink()
    os.mkfifo(path)


def to_dev_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")


SPECIAL_FILES = {  # each would block or never end if opened and read like a file
    "FIFO rollout file": (lambda r: fifo(r / "rollouts" / "2.jsonl"), "POST-E018"),
    "rollout file linked to /dev/zero": (lambda r: to_dev_zero(r / "rollouts" / "2.jsonl"), "POST-E018"),
    "FIFO model shard": (lambda r: fifo(r / hostile.MODEL), "POST-E022"),
    "FIFO event file": (lambda r: fifo(next((r / "tensorboard").iterdir())), "POST-E015"),
    "tracker linked to /dev/zero": (lambda r: to_dev_zero(r / "checkpoints" / "latest_checkpointed_iteration.txt"), "POST-E025"),
    "preflight.json nested 100,000 deep": (lambda r: (r / "preflight.json").write_text("[" * 100_000), "POST-E007"),
    "fsdp_config.json not UTF-8": (lambda r: (r / hostile.ACTOR / "fsdp_config.json").write_bytes(b'{"\xff": 1}'), "POST-E023"),
}


@pytest.mark.parametrize("name", SPECIAL_FILES)
def test_special_and_malformed_small_files_are_findings(run, name):
    plant, expected = SPECIAL_FILES[name]
    plant(run)
    ids = {f["id"] for f in postflight_fails_with_any(run)}
    assert expected in ids and "GEN-E001" not in ids


def postflight_fails_with_any(run):
    done = subprocess.run([sys.executable, str(VERIFY), "postflight", "--output-dir", str(run)],
                          capture_output=True, text=True, timeout=120)  # a hang guard
    assert done.returncode == 1, done.stdout[-2000:]
    return findings(run)


def test_a_million_damaged_records_are_counted_not_listed(run):
    path = next((run / "tensorboard").iterdir())
    head = struct.pack("<Q", 0)
    with open(path, "ab") as stream:  # 1,000,000 empty records, each with a wrong data CRC
        stream.write((head + struct.pack("<I", tfevents.masked_crc(head)) + b"\0\0\0\0") * 1_000_000)
    found = postflight_fails_with(run, "POST-E015")
    assert len(found) == tfevents.PROBLEM_SAMPLES + 1
    assert found[-1]["message"].startswith(f"{1_000_000 - tfevents.PROBLEM_SAMPLES} more")
