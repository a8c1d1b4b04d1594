"""Findings are values, not exceptions: a check returns them, the runner reports them all."""
from __future__ import annotations

import dataclasses
import sys
import traceback
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from .catalog import CATALOG

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command line or missing input: nothing can be checked (exit 2)."""


class Skip(Exception):
    """Raised by a check that cannot run because an earlier one failed (that one reports it)."""


@dataclasses.dataclass
class Finding:
    id: str
    obj: str
    message: str
    hint: str = ""
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def level(self) -> str:
        return "warning" if "-W" in self.id else "error"

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "level": self.level, "obj": self.obj, "message": self.message,
                "hint": self.hint, "evidence": self.evidence}


def finding(fid: str, obj: str, message: str, **evidence: Any) -> Finding:
    """Build a finding whose hint comes from the catalog, so every id has one fix text."""
    if fid not in CATALOG:
        raise KeyError(f"finding id {fid} is not in the catalog")
    return Finding(fid, obj, message, CATALOG[fid][1], evidence)


def mismatch(fid: str, obj: str, what: str, expected: Any, actual: Any, **evidence: Any) -> Finding:
    """A finding for a value that differs from its pin, expected and actual side by side."""
    return finding(fid, obj, f"{what}: expected {expected!s}, actual {actual!s}",
                   expected=expected, actual=actual, **evidence)


Check = Tuple[str, Callable[[Any], List[Finding]]]


@dataclasses.dataclass
class CheckResult:
    name: str
    findings: List[Finding]
    skipped: str = ""

    @property
    def passed(self) -> bool:
        return not any(f.level == "error" for f in self.findings)

    def to_json(self) -> Dict[str, Any]:
        status = "skipped" if self.skipped else ("passed" if self.passed else "failed")
        return {"name": self.name, "status": status, "skipped": self.skipped,
                "findings": [f.to_json() for f in self.findings]}


def run_checks(phase: str, checks: Sequence[Check], ctx: Any,
               out: Optional[TextIO] = None) -> List[CheckResult]:
    """Run every check (a crash becomes a finding), printing one status line per check."""
    out = out or sys.stdout
    results = []
    width = max(len(name) for name, _ in checks) + 4
    for name, fn in checks:
        skipped = ""
        try:
            found = list(fn(ctx))
        except Skip as skip:
            found, skipped = [], str(skip) or "skipped"
        except Exception as exc:  # a broken check must not hide the others
            found = [finding("GEN-E001", name, f"the check crashed: {exc!r}",
                             traceback=traceback.format_exc(limit=4))]
        result = CheckResult(name, found, skipped)
        results.append(result)
        errors = sum(f.level == "error" for f in found)
        warnings = len(found) - errors
        status = f"FAIL ({errors})" if errors else ("ok" if not warnings else f"ok ({warnings} warning)")
        if skipped:
            status = f"skipped ({skipped})"
        print(f"{phase}: {name} {'.' * (width - len(name))} {status}", file=out, flush=True)
    return results


def print_findings(results: Sequence[CheckResult], out: Optional[TextIO] = None) -> None:
    out = out or sys.stdout
    for result in results:
        for f in result.findings:
            print(f"{f.obj}: ({f.id}) {f.message}", file=out)
            if f.hint:
                print(f"    HINT: {f.hint}", file=out)


def verdict(phase: str, results: Sequence[CheckResult], out: Optional[TextIO] = None) -> int:
    out = out or sys.stdout
    failed = [r for r in results if not r.passed]
    if failed:
        count = sum(len(r.findings) for r in failed)
        print(f"{phase}: FAILED ({len(failed)} of {len(results)} checks failed, {count} findings)",
              file=out, flush=True)
        return EXIT_FAILED
    print(f"{phase}: PASSED ({len(results)} checks)", file=out, flush=True)
    return EXIT_PASSED


def phase_record(phase: str, results: Sequence[CheckResult], **extra: Any) -> Dict[str, Any]:
    status = "passed" if all(r.passed for r in results) else "failed"
    record: Dict[str, Any] = {"phase": phase, "status": status, "checked_at": utc_now(),
                              "checks": [r.to_json() for r in results]}
    record.update(extra)
    return record


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

