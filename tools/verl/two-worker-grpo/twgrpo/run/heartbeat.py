"""The run's heartbeat: a small record the launcher keeps fresh while it lives.

heartbeat.json in the run folder holds the time of the last beat, the launcher's pid and host,
the beat interval and the lease. A separate process (``beat``, started by the launcher in a
process group of its own) rewrites it every interval (one small atomic rename: cheap on shared
storage), writes ``state: ended`` when the launcher ends (it sends END_SIGNAL) or is gone, and stops. Whoever reads
it (make runs, the resume phase, a retry) judges the run by ``liveness``:

    alive   the last beat is younger than the lease: never resumed, whatever markers exist
    ended   the launcher ended (or vanished) and the beater said so
    lost    no beat for longer than the lease and no ``ended``: the whole job died at once
            (VM reclaimed, KILL to every process, power loss). A stale beat alone is not enough
            where the reader can see the launcher: on the launcher's own host a launcher that
            still runs (run.json's pid, start time and boot id) keeps the run alive, so the death
            of the beater alone (KILLed, out of memory) never makes a live run resumable
    None    no heartbeat record (a run from before heartbeats, or one that never started)
"""
from __future__ import annotations

import math
import os
import signal
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional

from ..formats import bounded
from .processes import start_ticks, still_running
from .records import write_json
from . import runrecord
from .runfolder import RunFolder

DEFAULT_INTERVAL = 30   # seconds between beats
DEFAULT_LEASE = 120     # seconds without a beat before a run counts as lost
MAX_SECONDS = 86400
SKEW_S = 300  # how far a node's clock may run ahead of the reader's: a beat beyond is refused
# The launcher's word that it ends. TERM is anyone's (a kill of the wrong pid, a platform's
# sweep): the beater keeps beating through it while its launcher lives.
END_SIGNAL = signal.SIGUSR1


def _stamp(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(run_dir: Path) -> Optional[Dict[str, Any]]:
    try:
        return bounded.read_object(RunFolder(run_dir).heartbeat_json, 64 << 10)
    except bounded.Unreadable:
        return None


def problem(run_dir: Path, now: Optional[float] = None) -> str:
    """Why heartbeat.json is no heartbeat ('' when it is one, or there is none): its beat must be
    a finite time not ahead of this clock by more than SKEW_S, its lease whole seconds."""
    data = _record(run_dir)
    if data is None:
        return ""
    beat, lease = data.get("beat_epoch"), data.get("lease_s")
    if not isinstance(beat, (int, float)) or isinstance(beat, bool) or not math.isfinite(beat):
        return f"beat_epoch {str(beat)[:40]!r} is not a finite time"
    if beat > (time.time() if now is None else now) + SKEW_S:
        return f"beat_epoch {beat:.0f} is in the future (more than {SKEW_S} s ahead of this clock)"
    if not isinstance(lease, int) or isinstance(lease, bool) or lease < 1:
        return f"lease_s {str(lease)[:40]!r} is not whole seconds"
    return ""


def read(run_dir: Path) -> Optional[Dict[str, Any]]:
    """The heartbeat record, None when there is none or it is not one (bounded read): a beat
    that is not a finite time (1e400, NaN) or lies in the future (a clock set to 2100) would
    crash a view or keep a dead run alive, so it counts as no heartbeat (problem() says why)."""
    data = _record(run_dir)
    return data if data is not None and not problem(run_dir) else None


def liveness(run_dir: Path, now: Optional[float] = None) -> Optional[str]:
    """alive, ended, lost, or None without a heartbeat record (see the module's text)."""
    data = read(run_dir)
    if data is None:
        return None
    if data.get("state") == "ended":
        return "ended"
    age = (time.time() if now is None else now) - float(data["beat_epoch"])
    return "alive" if age <= data["lease_s"] or launcher_runs(run_dir) else "lost"


def launcher_runs(run_dir: Path) -> bool:
    """Whether run.json's launcher is seen running here (its host, pid, start time, boot id);
    False where that cannot be seen (another host, no record)."""
    run = runrecord.read_or_empty(run_dir)
    if not run:
        return False
    pid = run.get("driver_pid")
    if run.get("driver_host") != socket.gethostname() or not isinstance(pid, int) or \
            isinstance(pid, bool) or pid <= 1 or start_ticks(pid) is None:
        return False
    return still_running(run, pid)


def last_beat(run_dir: Path) -> Optional[float]:
    data = read(run_dir)
    return float(data["beat_epoch"]) if data else None


def describe(run_dir: Path, now: Optional[float] = None) -> str:
    """'last beat 12 s ago (lease 120 s)' for messages; '' without a record."""
    data = read(run_dir)
    if data is None:
        return ""
    age = int((time.time() if now is None else now) - float(data["beat_epoch"]))
    helper = ("; its heartbeat process is gone but its launcher still runs on this host"
              if data.get("state") != "ended" and age > data["lease_s"] and launcher_runs(run_dir)
              else "")
    return (f"last beat {data.get('time', '?')} ({age} s ago, lease {data['lease_s']} s, state "
            f"{data.get('state', '?')}, launcher pid {data.get('pid', '?')} on "
            f"{data.get('host', '?')}{helper})")


def _write(path: Path, run_id: str, pid: int, interval: int, lease: int, state: str,
           beats: int, why: str = "") -> None:
    now = time.time()
    write_json(path, {"run_id": run_id, "time": _stamp(now), "beat_epoch": round(now, 3),
                      "pid": pid, "host": socket.gethostname(), "beater_pid": os.getpid(),
                      "interval_s": interval, "lease_s": lease, "state": state, "beats": beats,
                      **({"ended_because": why} if why else {})})


def beat(run_dir: Path, run_id: str, launcher_pid: int, interval: int, lease: int) -> int:
    """Keep heartbeat.json fresh while the launcher lives; ``ended`` when it ends (END_SIGNAL from
    the launcher) or is gone. Checks the launcher every second, writes every interval."""
    path = RunFolder(run_dir).heartbeat_json
    started = start_ticks(launcher_pid)
    stop = {"why": ""}

    def on_end(signum, frame):  # the launcher's normal end
        stop["why"] = "the launcher ended"

    signal.signal(END_SIGNAL, on_end)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # gone launchers are seen within a second
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
