"""The RUN_ID rule, written once: what a run's name may be, and the names of a run's attempts.

A RUN_ID names its run folder on every file system and in every job form, so it is letters,
digits, '.', '_' and '-', starting with a letter or digit (never '/', '..' or a newline), at
most MOST characters. A retry of a stopped run becomes the next attempt, <RUN_ID>.2 up to
<RUN_ID>.99 (checks/resume/attempt.py). The launcher, the verifiers and prep/ all ask this module.
"""
from __future__ import annotations

import re
from typing import Any, List, Optional

FORM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # \Z: $ would let a trailing newline in
MOST = 128
SPELLED = "letters, digits, '.', '_' and '-', starting with a letter or digit"
MAX_ATTEMPT = 99
_ATTEMPT = re.compile(r"^(?P<base>.+)\.(?P<n>[2-9]|[1-9][0-9])\Z")


def problem(text: Any) -> Optional[str]:
    """Why text is not a RUN_ID (one sentence), or None when it is one."""
    if not isinstance(text, str) or not text:
        return "is empty" if text == "" else "is not text"
    if len(text) > MOST:
        return f"is {len(text)} characters long; at most {MOST} are allowed"
    if not FORM.match(text):
        return f"must be {SPELLED}"
    return None


def is_run_id(text: Any) -> bool:
    return problem(text) is None


def base_of(run_id: str) -> str:
    """The RUN_ID an attempt name continues: exp.3 -> exp; exp -> exp."""
    match = _ATTEMPT.match(run_id)
    return match.group("base") if match else run_id


def attempt_names(base: str) -> List[str]:
    """Every name the attempts of base may have, in order: base, base.2 .. base.99."""
    return [base] + [f"{base}.{n}" for n in range(2, MAX_ATTEMPT + 1)]
