"""Each failed check of a run, with its finding ids, from the phase records in its folder:
FAILED's cause (the launcher) and make submit's last line (prep/outcome.py) say the same.
Reads are bounded by the run's record budget (bounded.read_object, runrecord.size): a hostile
record costs little and names nothing.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

from ..formats import bounded
from . import runrecord
from .runfolder import NAME

RECORDS = (("resume", NAME.resume_json), ("inputs", NAME.inputs_json),
           ("preflight", NAME.preflight_json), ("postflight", NAME.verification_json))


def failed_checks(folder: Path) -> List[str]:
    """'preflight: node-count (PRE-E012, PRE-E013)' for each failed check of each phase."""
    named = []
    for phase, name in RECORDS:
        try:
            size = runrecord.size(folder)  # the run's budget, as every view reads its records
            record = bounded.read_object(Path(folder) / name, size.record_bytes, size.record_memory)
        except bounded.Unreadable:
            continue
        checks = record.get("checks")
        for check in checks if isinstance(checks, list) else []:
            if not isinstance(check, dict) or check.get("status") != "failed":
                continue
            items = check.get("findings")
            ids = sorted({str(f.get("id")) for f in items if isinstance(f, dict) and
                          "-E" in str(f.get("id"))}) if isinstance(items, list) else []
            named.append(f"{phase}: {check.get('name', '?')}"
                         + (f" ({', '.join(ids[:6])})" if ids else ""))
    return named


def cause(folder: Path, most: int = 8) -> str:
    """FAILED's cause: 'failed checks a (ID); b (ID)', on one printable line; '' when none."""
    named = failed_checks(folder)
    if not named:
        return ""
    more = f"; and {len(named) - most} more" if len(named) > most else ""
    text = "failed checks " + "; ".join(named[:most]) + more
    return "".join(c if c.isprintable() else "?" for c in text)[:1000]
