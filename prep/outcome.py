"""make submit's last line: the run folder's verdict (the one every view gives) and, for a failed
run, what failed, with finding ids, as make report says it.

From the run folder on PREP_ROOT: the verdict (run/runverdict.py's, the one every reader uses),
FAILED's fields (phase, exit status, signal, cause) and each failed check with its finding ids
from the phase records. A job that died before it made a run folder left only its log: then the
line is the driver's or launcher's own error line, `(ID) what went wrong — what to do`.
Reads are bounded (records by bounded.read_object, the log by its last lines).
"""
from __future__ import annotations

import os
import re
from typing import Optional

from twgrpo.run.failedchecks import failed_checks
from twgrpo.run import runid
from twgrpo.run.runfolder import RunFolder
from twgrpo.run.runverdict import Verdict, failed_fields, latest_verdict

FAILED_KEYS = ("phase", "exit_status", "signal", "cause")
MAX_NAMED = 8  # failed checks named on the line; make report names them all
ERROR_LINE = re.compile(r"^(driver|run-two-worker-grpo-v1): \([A-Z]+-[EW]\d{3}\) ")


def folder_verdict(prep_root: str, run_id: str) -> Optional[Verdict]:
    """The run folder's verdict, by the function every view uses (runverdict.latest_verdict);
    None when this box cannot read the folder (no PREP_ROOT, no folder, a link, unlistable)."""
    if not prep_root or not runid.is_run_id(run_id):  # no RUN_ID: no folder to read
        return None
    folder = RunFolder.at(prep_root, run_id).path
    try:
        if not folder.is_dir() or folder.is_symlink():
            return None
        with os.scandir(folder) as listing:  # a folder this user cannot list is not read
            next(listing, None)
    except OSError:
        return None
    return latest_verdict(folder)


def run_outcome(prep_root: str, run_id: str) -> Optional[str]:
    """The failed run's verdict, FAILED's fields and its failed checks on one line; None when
    this box cannot see the run folder."""
    if not prep_root or not runid.is_run_id(run_id):  # no RUN_ID: no folder to read
        return None
    folder = RunFolder.at(prep_root, run_id).path
    if not folder.is_dir() or folder.is_symlink():
        return None
    fields = failed_fields(folder) or {}
    marker = " ".join(f"{k}={fields[k]}" for k in FAILED_KEYS if fields.get(k))
    verdict = latest_verdict(folder)
    # the verdict every view gives first (PREEMPTED, RUNNING, UNPROVEN ...), FAILED's fields after
    said = verdict.summary if verdict.summary.startswith(verdict.status) else \
        f"{verdict.status}: {verdict.summary}"
    parts = [f"FAILED {marker}"] if marker and verdict.status == "FAILED" else [said]
    if marker and verdict.status != "FAILED":
        parts.append(f"FAILED {marker}")
    checks = failed_checks(folder)
    if checks:
        more = f" and {len(checks) - MAX_NAMED} more" if len(checks) > MAX_NAMED else ""
        parts.append("failed checks " + "; ".join(checks[:MAX_NAMED]) + more)
    return " — ".join(parts)


def error_line(log_text: str) -> Optional[str]:
    """The last `(ID) ...` line the Driver command or the launcher printed before dying."""
    for line in reversed(log_text.splitlines()[-200:]):
        if ERROR_LINE.match(line.strip()):
            return line.strip()[:600]
    return None
