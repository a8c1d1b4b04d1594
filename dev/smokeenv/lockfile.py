"""The smoke environment's lock (dev/smokeenv/lock.txt): pins, hashes, reuse ranges, versions.

A lock line is a pip requirement in hash-checking mode plus a comment the builder reads:
    ray==2.49.2 --hash=sha256:... --hash=sha256:...  # reuse: >=2.41; bytes: 70114942
`#! base NAME SPEC` names what the base Python must already have (torch): never installed from
the lock. `#! import MODULE...` lists the modules a working stack must import; `#! fetch PIN` is a
file a wheelhouse carries but the environment never installs (the verl wheel of the smoke inputs).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

LOCK = Path(__file__).resolve().parent / "lock.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_SPEC = re.compile(r"^(==|!=|>=|<=|>|<)\s*([0-9][0-9A-Za-z.+!_-]*)$")


class LockError(ValueError):
    """The lock file cannot be used as it is (the message names the line)."""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclasses.dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: Tuple[str, ...]
    reuse: str = "any"
    size: int = 0
    sdist: bool = False  # only a source archive: built at install time

    @property
    def key(self) -> str:
        return normalize(self.name)

    def requirement(self) -> str:
        return f"{self.name}=={self.version} " + " ".join(f"--hash=sha256:{h}" for h in self.hashes)


@dataclasses.dataclass(frozen=True)
class Lock:
    pins: Tuple[Pin, ...]
    base: Tuple[Tuple[str, str], ...]  # (name, spec) the base Python must have
    imports: Tuple[str, ...] = ()
    fetch: Tuple[Pin, ...] = ()


def release(version: str) -> Tuple[int, ...]:
    """The numeric release of a version: 2.13.0+cpu -> (2, 13, 0); 2.0.0rc1 -> (2, 0, 0)."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    if not match:
        raise LockError(f"not a version: {version!r}")
    parts = [int(p) for p in match.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 2.0 == 2.0.0
        parts.pop()
    return tuple(parts)


def satisfies(version: str, spec: str) -> bool:
    """Whether VERSION is inside SPEC ("any", or comparisons joined by commas: >=0.8,!=0.9.0)."""
    if spec.strip() == "any":
        return True
    have = release(version)
    for clause in spec.split(","):
        match = _SPEC.match(clause.strip())
        if not match:
            raise LockError(f"not a version range: {spec!r}")
        op, want = match.group(1), release(match.group(2))
        ok = {"==": have == want, "!=": have != want, ">=": have >= want, "<=": have <= want,
              ">": have > want, "<": have < want}[op]
        if not ok:
            return False
    return True


def _parse_pin(line: str, number: int) -> Pin:
    text, _, comment = line.partition("#")
    words = text.split()
    match = _PIN.match(words[0]) if words else None
    if not match:
        raise LockError(f"line {number}: not an exact pin (name==version): {line.strip()[:80]!r}")
    hashes = tuple(w[len("--hash=sha256:"):] for w in words[1:] if w.startswith("--hash=sha256:"))
    if len(hashes) != len(words) - 1 or not hashes or any(not re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes):
        raise LockError(f"line {number}: {words[0]} needs one or more --hash=sha256:<64 hex> and nothing else")
    fields = dict(part.strip().split(":", 1) for part in comment.split(";") if ":" in part)
    reuse = fields.get("reuse", "==" + match.group(2)).strip()
    satisfies(match.group(2), reuse) if reuse != "any" else None  # a range that does not parse fails here
    size = fields.get("bytes", "0").strip()
    return Pin(match.group(1), match.group(2), hashes, reuse, int(size) if size.isdigit() else 0,
               fields.get("build", "").strip() == "sdist")


def parse(text: str) -> Lock:
    pins: List[Pin] = []
    base: List[Tuple[str, str]] = []
    imports: List[str] = []
    fetch: List[Pin] = []
    seen: Dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#! base "):
            name, _, spec = stripped[len("#! base "):].strip().partition(" ")
            satisfies("0", spec.strip() or "any") if spec.strip() not in ("", "any") else None
            base.append((name, spec.strip() or "any"))
            continue
        if stripped.startswith("#! fetch "):
            fetch.append(_parse_pin(stripped[len("#! fetch "):], number))
            continue
        if stripped.startswith("#! import "):
            imports += stripped[len("#! import "):].split()
            continue
        if not stripped or stripped.startswith("#"):
            continue
        pin = _parse_pin(stripped, number)
        if pin.key in seen:
            raise LockError(f"line {number}: {pin.name} is pinned twice (first on line {seen[pin.key]})")
        seen[pin.key] = number
        pins.append(pin)
    if not pins:
        raise LockError("the lock pins nothing")
    return Lock(tuple(pins), tuple(base), tuple(imports), tuple(fetch))


def load(path: Optional[Path] = None) -> Lock:
    path = path or LOCK
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LockError(f"{path}: cannot read the lock ({exc.strerror})") from None
    except LockError as exc:
        raise LockError(f"{path}: {exc}") from None
