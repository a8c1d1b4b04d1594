"""What a phase writes into a run folder: never through a symlink, and never beside a stale SUCCESS.

SUCCESS stands only while the latest record of every phase passed. A phase that records a
failure into a run folder that holds SUCCESS moves SUCCESS aside under a dated name (nothing is
deleted), so a re-run that finds damage can never leave a stale SUCCESS behind; runverdict
judges the folder from the same records.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional

from .findings import usage
from .records import RecordError, write_json

SUPERSEDED = "SUCCESS.superseded-"


def refuse_symlinked(run_dir: Path) -> Path:
    """The run folder itself, refused when it is a symlink (it could point at another run)."""
    if Path(run_dir).is_symlink():
        raise usage("POST-E040", None, f"run folder {run_dir} is a symlink (to "
                    f"{os.readlink(str(run_dir))}); nothing is written through it")
    return Path(run_dir)


def supersede_success(run_dir: Path, phase: str) -> Optional[Path]:
    """Move run_dir/SUCCESS aside as SUCCESS.superseded-<UTC time>; its new name, or None."""
    success = Path(run_dir) / "SUCCESS"
    if not os.path.lexists(str(success)):
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for number in range(1000):
        target = success.with_name(f"{SUPERSEDED}{stamp}" + (f"-{number}" if number else ""))
        try:
            os.link(str(success), str(target), follow_symlinks=False)  # never replaces a file
        except FileExistsError:
            continue
        except OSError as exc:
            raise RecordError("GEN-E002", f"cannot move {success} aside: {exc.strerror} — it no "
                              f"longer holds: the latest {phase} failed") from None
        os.unlink(str(success))
        print(f"{phase}: SUCCESS superseded by this failed verification; the old marker is "
              f"kept as {target}", flush=True)
        return target
    raise RecordError("GEN-E002", f"cannot move {success} aside: too many superseded markers")


def record_phase(run_dir: Path, name: str, record: Dict[str, Any]) -> None:
    """Write a phase's record; a failed one supersedes any SUCCESS in the folder."""
    run_dir = refuse_symlinked(run_dir)
    if record.get("status") != "passed":
        moved = supersede_success(run_dir, str(record.get("phase", name)))
        if moved:
            record = {**record, "superseded_success": moved.name}
    write_json(run_dir / name, record)
