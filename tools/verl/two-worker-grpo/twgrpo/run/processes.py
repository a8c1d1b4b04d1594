"""Is a recorded process still the one that was recorded? A pid alone is not enough: pids are
reused, and a run folder may come from another boot of the same host name. run.json records
the launcher's pid with its start time (field 22 of /proc/PID/stat) and the kernel's boot id;
a pid is the launcher only while both still match."""
from __future__ import annotations

from typing import Any, Dict, Optional

LAUNCHER_WORD = b"run-two-worker-grpo"  # in the command line of a launcher of any version


def _read(path: str, limit: int = 4096) -> Optional[bytes]:
    try:
        with open(path, "rb") as stream:
            return stream.read(limit)
    except OSError:
        return None


def boot_id() -> Optional[str]:
    data = _read("/proc/sys/kernel/random/boot_id", 64)
    return data.decode("ascii", "replace").strip() if data else None


def start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    data = _read(f"/proc/{pid}/stat")
    if not data or b") " not in data:
        return None
    fields = data.rsplit(b") ", 1)[1].split()  # the command name may hold spaces and ')'
    if len(fields) < 20 or fields[0] == b"Z" or not fields[19].isdigit():
        return None
    return int(fields[19])


def identity(pid: int) -> Dict[str, Any]:
    """What run.json records beside driver_pid."""
    found = {"driver_start_ticks": start_ticks(pid), "driver_boot_id": boot_id()}
    return {key: value for key, value in found.items() if value is not None}


def still_running(record: Dict[str, Any], pid: int) -> bool:
    """Whether the live process `pid` is the one `record` describes (pid known to exist)."""
    recorded_boot = record.get("driver_boot_id")
    if isinstance(recorded_boot, str) and recorded_boot != boot_id():
        return False  # another boot: that launcher is gone, whatever holds its pid now
    recorded_start = record.get("driver_start_ticks")
    if isinstance(recorded_start, int) and not isinstance(recorded_start, bool):
        return start_ticks(pid) == recorded_start
    # An older record without the start time: only a launcher's command line counts.
    cmdline = _read(f"/proc/{pid}/cmdline", 1 << 16)
    return cmdline is None or LAUNCHER_WORD in cmdline  # unreadable: alive, to be safe
