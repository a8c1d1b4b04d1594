"""Findings are values, not exceptions: a check returns them, the runner reports them all."""
from __future__ import annotations

import dataclasses
import sys
import traceback
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from . import findinggroups, findingsout
from .catalog import CATALOG

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command line or missing input: nothing can be checked (exit 2). One with a finding id
    comes from usage(): str() is '(ID) message' and hint is the catalog's fix for that id; obj
    and text are the object and message apart, for --format json."""

    def __init__(self, message: str, fid: str = "", hint: str = "", obj: str = "", text: str = ""):
        super().__init__(message)
        self.fid, self.hint, self.obj, self.text = fid, hint, obj, text


class Skip(Exception):
    """Raised by a check whose input is missing; the message says why (reported as skipped)."""


@dataclasses.dataclass
class Finding:
    id: str
    obj: str
    message: str
    hint: str = ""
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def level(self) -> str:
        return findinggroups.level(self.id)

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "level": self.level, "obj": self.obj, "message": self.message,
                "hint": self.hint, "evidence": self.evidence}


def finding(fid: str, obj: str, message: str, **evidence: Any) -> Finding:
    """Build a finding whose hint comes from the catalog, so every id has one fix text."""
    if fid not in CATALOG:
        raise KeyError(f"finding id {fid} is not in the catalog")
    return Finding(fid, obj, message, CATALOG[fid][1], evidence)


def usage(fid: str, obj: Optional[str], message: str) -> UsageError:
    """The one way to refuse with a finding id before there is a finding list to put it in:
    printed as '[obj: ](ID) message', then the catalog's HINT line (say_usage)."""
    found = finding(fid, obj or "", message)
    where = f"{obj}: " if obj else ""
    return UsageError(f"{where}({fid}) {message}", fid, found.hint, obj or "", message)


def usage_lines(prog: str, exc: BaseException) -> List[str]:
    """A UsageError (or any error with a hint) as it is printed: 'prog: text', then its HINT."""
    hint = getattr(exc, "hint", "")
    return [f"{prog}: {exc}"] + ([f"    HINT: {hint}"] if hint else [])


def say_usage(prog: str, exc: BaseException, out: Optional[TextIO] = None) -> None:
    findingsout.note_refusal(exc)
    print("\n".join(usage_lines(prog, exc)), file=out or sys.stderr, flush=True)


def mismatch(fid: str, obj: str, what: str, expected: Any, actual: Any, **evidence: Any) -> Finding:
    """A finding for a value that differs from its pin, expected and actual side by side."""
    return finding(fid, obj, f"{what}: expected {expected!s}, actual {actual!s}",
                   expected=expected, actual=actual, **evidence)


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Any], List[Finding]]
    # Checks whose results this one reads from the context: they come earlier in the list, and
    # if one of them was skipped or crashed, this one is skipped too (it has nothing to judge).
    needs: Tuple[str, ...] = ()


@dataclasses.dataclass
class CheckResult:
    name: str
    findings: List[Finding]
    skipped: str = ""

    @property
    def passed(self) -> bool:
        return not any(f.level == "error" for f in self.findings)

    @property
    def crashed(self) -> bool:
        return any(f.id == "GEN-E001" for f in self.findings)

    def to_json(self) -> Dict[str, Any]:
        status = "skipped" if self.skipped else ("passed" if self.passed else "failed")
        return {"name": self.name, "status": status, "skipped": self.skipped,
                "findings": [f.to_json() for f in self.findings]}


def order_problems(checks: Sequence[Check]) -> List[str]:
    """Checks named twice, or that need a check which does not come before them."""
    problems, seen = [], set()
    for check in checks:
        if check.name in seen:
            problems.append(f"{check.name} is listed twice")
        problems += [f"{check.name} needs {need}, which does not come before it"
                     for need in check.needs if need not in seen]
        seen.add(check.name)
    return problems


def run_checks(phase: str, checks: Sequence[Check], ctx: Any,
               out: Optional[TextIO] = None) -> List[CheckResult]:
    """Run every check (a crash becomes a finding), printing one status line per check."""
    problems = order_problems(checks)
    if problems:
        raise ValueError(f"{phase} checks are misdeclared: {'; '.join(problems)}")
    out = out or sys.stdout
    results: Dict[str, CheckResult] = {}
    width = max(len(check.name) for check in checks) + 4
    for check in checks:
        found, skipped = [], ""
        blocked = next((results[need] for need in check.needs
                        if results[need].skipped or results[need].crashed), None)
        if blocked:
            why = "skipped" if blocked.skipped else "stopped by a crash"
            skipped = f"needs {blocked.name}, which was {why}"
        else:
            try:
                found = list(check.run(ctx))
            except Skip as skip:
                skipped = str(skip) or "its input is missing"
            except Exception as exc:  # a broken check must not hide the others
                found = [finding("GEN-E001", check.name, f"the check crashed: {exc!r}",
                                 traceback=traceback.format_exc(limit=4))]
        result = CheckResult(check.name, found, skipped)
        results[check.name] = result
        errors = sum(f.level == "error" for f in found)
        warnings = len(found) - errors
        status = f"FAIL ({errors})" if errors else ("ok" if not warnings else f"ok ({warnings} warning)")
        if skipped:
            status = f"skipped ({skipped})"
        print(f"{phase}: {check.name} {'.' * (width - len(check.name))} {status}", file=out, flush=True)
    return list(results.values())


def print_findings(results: Sequence[CheckResult], out: Optional[TextIO] = None,
                   where_all: str = "--format json lists") -> None:
    """Each check's findings by id: the first few of an id, then a count of the rest and the
    id's hint once (findinggroups.py); where_all says what keeps every one: the phase's record
    where one is written, --format json where the phase takes it (findingsout.PHASES)."""
    out = out or sys.stdout
    findingsout.note_results(results)
    for result in results:
        for group in findinggroups.grouped((result.name, f) for f in result.findings):
            for f in group.shown:
                print(f"{f.obj}: ({f.id}) {f.message}", file=out)
            if group.more:
                print(f"... and {group.more:,} more ({group.id}) like these: {where_all} all "
                      f"{group.total:,}", file=out)
            if group.hint:
                print(f"    HINT: {group.hint}", file=out)


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
                              "checks": [r.to_json() for r in results],
                              # one short line near the record's end, for make runs's glance
                              "passed_checks": ",".join(r.name for r in results
                                                        if r.passed and not r.skipped)}
    record.update(extra)
    return record


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

