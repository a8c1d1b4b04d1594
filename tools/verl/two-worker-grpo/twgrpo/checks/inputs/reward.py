"""The profile's own reward function (REWARD_FILE): a pinned input like the data. verl imports
it on every node and it decides every score, so the inputs phase hashes it wherever it runs (the
prep box, the launcher, each node's preflight probe) and refuses it when it differs from its pin.
"""
from __future__ import annotations

import os
import stat
from typing import List, Optional, Tuple

from ...formats import hashing
from ...run.findings import Finding, finding, mismatch

MAX_BYTES = 16 << 20  # a reward function is code, not data


def hash_script(path, what: str) -> Tuple[Optional[str], str]:
    """(sha256, '') of a regular file of code, or (None, what is wrong with it)."""
    try:  # a link could be pointed elsewhere after the check; a FIFO would block the hash
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{what} is not a regular file (a link, folder or device)"
        if info.st_size > MAX_BYTES:
            return None, f"{what} holds {info.st_size} bytes, more than a script's {MAX_BYTES}"
        return hashing.sha256_file(path), ""
    except OSError as exc:
        return None, f"{what} cannot be read: {exc.strerror or exc}"


def check_pinned_script(ctx, path, knob: str, pin: str, unreadable: str, changed: str,
                        evidence: str) -> Optional[List[Finding]]:
    """A script of the profile's (the knob KNOB names it, the key PIN holds its sha256) against
    its pin: INP-E070 when it has none, the unreadable id, the changed id; records its sha256 in
    the evidence under ``evidence``. None when it is the pinned script (the caller may check more)."""
    value, pinned = getattr(ctx.profile, knob), getattr(ctx.profile, pin)
    if not pinned:
        return [finding("INP-E070", str(path), f"the profile pins no {pin} for {knob} {value} yet",
                        missing=[pin])]
    actual, problem = hash_script(path, knob)
    if actual is None:
        return [finding(unreadable, str(path), problem)]
    ctx.evidence[evidence] = actual
    if actual != pinned:
        return [mismatch(changed, str(path), f"sha256 of {knob} (changed since it was pinned)",
                         pinned, actual, file=value)]
    return None


def check_reward_file(ctx) -> List[Finding]:
    """ctx: inputs.InputsContext. Records reward_sha256 in its evidence."""
    p = ctx.profile
    path = p.reward_path(ctx.storage_root)
    if path is None:
        return []
    return check_pinned_script(ctx, path, "REWARD_FILE", "REWARD_SHA256", "INP-E080", "INP-E081",
                               "reward_sha256") or []
