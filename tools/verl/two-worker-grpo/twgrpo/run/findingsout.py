"""--format json for the phases that print findings (inputs, preflight, postflight and its audit,
check-profile): stdout carries one JSON object per finding, then one summary object, and
nothing else; every line a person reads (status lines, findings, HINTs, the verdict) goes to
stderr unchanged, so a script and a person can read the same run.

The phases print their findings through findings.print_findings and their refusals through
findings.say_usage, both deep below the command line; rather than hand a format down through
every phase, those two tell this module what they printed while a json phase runs (note_results,
note_refusal), and printed_as writes it out once the phase has its exit code.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

FORMATS = ("text", "json")
PHASES = ("inputs", "preflight", "postflight", "check-profile")
# The exit codes every phase shares (findings.py, postflight's audit) as a word for scripts.
STATUS = {0: "passed", 1: "failed", 2: "refused", 3: "partial"}

# What the phase printed so far; None while no json phase runs (text: nothing is kept).
_printed: Optional[List[Dict[str, Any]]] = None
_refusal: Optional[Dict[str, Any]] = None


def add_format(parser: Any) -> None:
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="json: one object per finding, then a summary, on stdout (for "
                             "scripts); the human lines go to stderr")


def finding_json(check: str, found: Any) -> Dict[str, Any]:
    """One finding as a script reads it: the catalog's hint, the check that raised it."""
    return {"id": found.id, "severity": found.level, "check": check, "message": found.message,
            "hint": found.hint, "object": found.obj}


def refusal_json(exc: BaseException) -> Dict[str, Any]:
    """A refusal (UsageError, RecordError, an argparse error) in the fields of a finding: no check
    ran, so check is null; an error without a finding id has id null."""
    return {"id": getattr(exc, "fid", "") or None, "severity": "error", "check": None,
            "message": getattr(exc, "text", "") or str(exc), "hint": getattr(exc, "hint", ""),
            "object": getattr(exc, "obj", "")}


def note_results(results: Sequence[Any]) -> None:
    if _printed is not None:
        _printed.extend(finding_json(r.name, f) for r in results for f in r.findings)


def note_refusal(exc: BaseException) -> None:
    global _refusal
    if _printed is not None:
        _refusal = refusal_json(exc)


def summary(phase: str, code: int) -> Dict[str, Any]:
    return {"phase": phase, "status": STATUS.get(code, "failed"), "exit": code}


def printed_as(args: Any, judge: Callable[[], int]) -> int:
    """Run judge() (a phase, its refusals handled inside) and print its findings in the format
    args asks for. json: each finding one line, then the summary; a refusal is one object, the
    summary's fields and the refusal's together, after any findings printed before it."""
    global _printed, _refusal
    if args.phase not in PHASES or args.format != "json":  # runs, compare: their own --format
        return judge()
    phase = "audit" if getattr(args, "audit", False) else args.phase
    out, _printed, _refusal = sys.stdout, [], None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            code = judge()
        lines, refusal = _printed, _refusal
    finally:
        _printed, _refusal = None, None
    try:
        for line in lines:
            print(json.dumps(line, sort_keys=True), file=out)
        print(json.dumps({**(refusal or {}), **summary(phase, code)}, sort_keys=True), file=out,
              flush=True)
    except BrokenPipeError:  # `... | head -1` closed the pipe: the reader has what it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return code


def parse(parser: Any, argv: Optional[List[str]]) -> Any:
    """parser.parse_args, but a command line that asks for json and is refused by argparse
    (a missing or malformed argument) also gets its refusal as one JSON object on stdout."""
    words = list(sys.argv[1:] if argv is None else argv)
    phase = next((w for w in words if not w.startswith("-")), "")
    if phase not in PHASES or not ("--format=json" in words or any(a == "--format" and b == "json"
                                            for a, b in zip(words, words[1:]))):
        return parser.parse_args(argv)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv)
    except SystemExit as exc:
        sys.stderr.write(said.getvalue())
        if exc.code:
            last = said.getvalue().strip().splitlines()[-1:] or ["bad command line"]
            print(json.dumps({**refusal_json(ValueError(last[0])), **summary(phase, int(exc.code))},
                             sort_keys=True), flush=True)
        raise
