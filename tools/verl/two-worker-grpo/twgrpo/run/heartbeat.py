"""The run's heartbeat: a small record the launcher keeps fresh while it lives.

heartbeat.json in the run folder holds the time of the last beat, the launcher's pid and host,
the beat interval and the lease. A separate process (``beat``, started by the launcher in a
process group of its own) rewrites it every interval (one small atomic rename: cheap on shared
storage), writes ``state: ended`` when the launcher ends or is gone, and stops. Whoever reads
it (make runs, the resume phase, a retry) judges the run by ``liveness``:

    alive   the last beat is younger than the lease: never resumed, whatever markers exist
    ended   the launcher ended (or vanished) and the beater said so
    lost    no beat for longer than the lease and no ``ended``: the whole job died at once
            (VM reclaimed, KILL to every process, power loss)
    None    no heartbeat record (a run from before heartbeats, or one that never started)
"""
from __future__ import annotations

import os
import signal
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional

from ..formats import bounded
from .processes import start_ticks
from .records import write_json

NAME = "heartbeat.json"
DEFAULT_INTERVAL = 30   # seconds between beats
DEFAULT_LEASE = 120     # seconds without a beat before a run counts as lost
MAX_SECONDS = 86400


def _stamp(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read(run_dir: Path) -> Optional[Dict[str, Any]]:
    """The heartbeat record, None when there is none or it is not one (bounded read)."""
    try:
        data = bounded.read_object(Path(run_dir) / NAME, 64 << 10)
    except bounded.Unreadable:
        return None
    beat = data.get("beat_epoch")
    lease = data.get("lease_s")
    if not isinstance(beat, (int, float)) or isinstance(beat, bool) or \
            not isinstance(lease, int) or isinstance(lease, bool) or lease < 1:
        return None
    return data


def liveness(run_dir: Path, now: Optional[float] = None) -> Optional[str]:
    """alive, ended, lost, or None without a heartbeat record (see the module's text)."""
    data = read(run_dir)
    if data is None:
        return None
    if data.get("state") == "ended":
        return "ended"
    age = (time.time() if now is None else now) - float(data["beat_epoch"])
    return "alive" if age <= data["lease_s"] else "lost"


def last_beat(run_dir: Path) -> Optional[float]:
    data = read(run_dir)
    return float(data["beat_epoch"]) if data else None


def describe(run_dir: Path, now: Optional[float] = None) -> str:
    """'last beat 12 s ago (lease 120 s)' for messages; '' without a record."""
    data = read(run_dir)
    if data is None:
        return ""
    age = int((time.time() if now is None else now) - float(data["beat_epoch"]))
    return (f"last beat {data.get('time', '?')} ({age} s ago, lease {data['lease_s']} s, state "
            f"{data.get('state', '?')}, launcher pid {data.get('pid', '?')} on {data.get('host', '?')})")


def _write(path: Path, run_id: str, pid: int, interval: int, lease: int, state: str,
           beats: int, why: str = "") -> None:
    now = time.time()
    write_json(path, {"run_id": run_id, "time": _stamp(now), "beat_epoch": round(now, 3),
                      "pid": pid, "host": socket.gethostname(), "beater_pid": os.getpid(),
                      "interval_s": interval, "lease_s": lease, "state": state, "beats": beats,
                      **({"ended_because": why} if why else {})})


def beat(run_dir: Path, run_id: str, launcher_pid: int, interval: int, lease: int) -> int:
    """Keep heartbeat.json fresh while the launcher lives; ``ended`` when it ends (TERM from
    the launcher) or is gone. Checks the launcher every second, writes every interval."""
    path = Path(run_dir) / NAME
    started = start_ticks(launcher_pid)
    stop = {"why": ""}

    def on_term(signum, frame):  # the launcher's normal end
        stop["why"] = "the launcher ended"

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the launcher's to handle
    beats, last = 0, 0.0
    while not stop["why"]:
        if started is None or start_ticks(launcher_pid) != started:
            stop["why"] = f"the launcher (pid {launcher_pid}) is gone"
            break
        if time.time() - last >= interval:
            beats += 1
            try:
                _write(path, run_id, launcher_pid, interval, lease, "alive", beats)
            except OSError:
                pass  # a full disk: the lease runs out and the run reads as lost, never as alive
            last = time.time()
        time.sleep(1)
    try:
        _write(path, run_id, launcher_pid, interval, lease, "ended", beats + 1, stop["why"])
    except OSError:
        pass
    return 0


def check_timing(interval: int, lease: int) -> Optional[str]:
    """Why HEARTBEAT_INTERVAL/HEARTBEAT_LEASE cannot be used, or None."""
    if not 1 <= interval <= MAX_SECONDS or not 1 <= lease <= MAX_SECONDS:
        return f"must be whole seconds from 1 to {MAX_SECONDS}"
    if lease < 2 * interval:
        return (f"the lease ({lease} s) must be at least twice the interval ({interval} s), "
                "or one late beat would make a live run look lost")
    return None
