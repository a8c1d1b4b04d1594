"""One sequence for every phase: its header, every check, the findings, the verdict, the record."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .findings import Check, CheckResult, phase_record, print_findings, run_checks, verdict
from .runfolder import record_phase


def run_phase(phase: str, header: str, checks: Sequence[Check], ctx: Any,
              record_path: Optional[Path],
              record: Callable[[], Dict[str, Any]]) -> Tuple[int, List[CheckResult]]:
    """Print and record one phase into record_path (a RunFolder's file); ``record()`` gives the
    record's own fields, read from ctx after the checks ran. Without a path nothing is written
    (make verify-inputs).
    Returns the exit code (0 passed, 1 failed) and the results."""
    print(f"{phase}: {header}", flush=True)
    results = run_checks(phase, checks, ctx)
    print_findings(results, where_all=f"{record_path.name} and --format json list"
                   if record_path is not None else "--format json lists")
    code = verdict(phase, results)
    if record_path is not None:
        # A failed record moves an earlier SUCCESS aside (runfolder.record_phase), so SUCCESS
        # never outlives the verification that justified it.
        record_phase(record_path, phase_record(phase, results, **record()))
    return code, results
