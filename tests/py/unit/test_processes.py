"""A recorded driver counts as alive only while its pid still names the same process: same
boot, same start time, or for an older record without them, a launcher's command line."""
import os
import subprocess
import sys
import time
from pathlib import Path

from twgrpo.checks.resume.resume import _driver_alive
from twgrpo.run import processes


def record_of(pid, **extra):
    return {"driver_host": os.uname().nodename, "driver_pid": pid, **extra}


def test_the_recorded_process_itself_is_alive():
    record = record_of(os.getpid(), **processes.identity(os.getpid()))
    assert record["driver_start_ticks"] == processes.start_ticks(os.getpid())
    assert _driver_alive(record) is True


def test_a_reused_pid_with_another_start_time_is_not_the_driver():
    record = record_of(os.getpid(), **processes.identity(os.getpid()))
    record["driver_start_ticks"] += 1
    assert _driver_alive(record) is False


def test_a_record_from_another_boot_is_not_alive():
    record = record_of(os.getpid(), **processes.identity(os.getpid()))
    record["driver_boot_id"] = "00000000-0000-0000-0000-000000000000"
    assert _driver_alive(record) is False


def test_an_older_record_counts_only_a_launcher_command_line(tmp_path):
    assert _driver_alive(record_of(os.getpid())) is False  # pytest holds the pid, not a launcher
    launcher = tmp_path / "run-two-worker-grpo-v1.sh"
    launcher.write_text("sleep 30\n")
    child = subprocess.Popen(["bash", str(launcher)])
    try:
        for _ in range(500):  # until the child has exec'd bash with the launcher's name
            if b"run-two-worker-grpo" in Path(f"/proc/{child.pid}/cmdline").read_bytes():
                break
            time.sleep(0.01)
        assert _driver_alive(record_of(child.pid)) is True
    finally:
        child.kill()
        child.wait()
    assert _driver_alive(record_of(child.pid)) is False


def test_a_gone_pid_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert _driver_alive(record_of(child.pid, **{"driver_start_ticks": 1})) is False
