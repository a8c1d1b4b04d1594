"""Postflight's read-only side: `make audit` (the same checks, nothing written) and the partial
verdict of a run folder whose checkpoints/ is not here (a half-synced copy, a laptop mount).

A partial verdict is no verdict on the run: it writes nothing, so it can never move SUCCESS
aside; every other check must still pass, and a failure there is recorded as usual (except
under audit, which never writes).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

from ...run.findings import EXIT_FAILED, CheckResult, Finding, Skip, print_findings
from ...run.runverdict import latest_verdict, resume_record_finding
from ...run.runfolder import RunFolder

EXIT_PARTIAL = 3
NOT_HERE = "checkpoint not present here: the run folder has no checkpoints/"


def require_checkpoints(run_dir: Path) -> None:
    """Skip the checkpoint check, as partial, when checkpoints/ does not exist at all (a file or
    a dangling link in its place is judged as damage by the check itself)."""
    if not os.path.lexists(str(RunFolder(run_dir).checkpoints)):
        raise Skip(NOT_HERE)


def checkpoint_absent(run_dir: Path) -> bool:
    return not os.path.lexists(str(RunFolder(run_dir).checkpoints))


def check_proof(run_dir: Path) -> List[Finding]:
    """What the run's own records lack to prove a SUCCESS that no postflight check can judge
    from the artifacts: a resumed run's resume.json (POST-E066). The verdict (runverdict) asks
    the same function, so postflight and audit never pass a run that runs and report call
    UNPROVEN."""
    lost = resume_record_finding(run_dir)
    return [lost] if lost is not None else []


def unproven(run_dir: Path, code: int) -> int:
    """The exit code once check_proof has had its say: a run whose checks all passed but whose
    records cannot prove it is UNPROVEN, exit 1, and no SUCCESS is written for it."""
    found = check_proof(run_dir) if code == 0 else []
    if not found:
        return code
    print_findings([CheckResult("proof", found)])
    print(f"postflight: UNPROVEN ({found[0].id}): every check passed, but the records cannot "
          "prove the run; no SUCCESS is written (exit 1)", flush=True)
    return EXIT_FAILED


def conclude(run_dir: Path, code: int, results: List[CheckResult], audit: bool) -> int:
    """The exit code of a postflight that wrote nothing, and its closing lines."""
    skipped = any(r.skipped == NOT_HERE for r in results)
    code = unproven(run_dir, code)
    recorded = latest_verdict(run_dir)
    if code == 0 and skipped:
        print("postflight: PARTIAL: every check passed but the checkpoint's, which is not present "
              f"here; nothing written (exit {EXIT_PARTIAL})")
        code = EXIT_PARTIAL
    if audit:
        print(f"postflight: audit only: nothing written; the run's recorded verdict stays "
              f"{recorded.status} ({recorded.summary})")
    elif code == EXIT_PARTIAL:
        print(f"postflight: the run's recorded verdict stays {recorded.status}: a missing "
              "checkpoints/ here says nothing about the run")
    return code
