"""The one reader of SHA256SUMS files (sha256sum's format) for every Python tool of the bundle.

The inputs check, pin-inputs, prepare-inputs and the bundle tools all use it; the launcher's
own shell check stays the trust root for the installed bundle. A SHA256SUMS may only name
regular files inside its own folder, each once: an entry that is absolute, climbs out with
``..``, reaches outside through a symlink, or names a device or FIFO is a problem, and is
never opened. The file itself is read with a size bound, so a huge or endless one costs
nothing.
"""
from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from . import hashing

MAX_BYTES = 16 << 20  # about 160 000 entries: far beyond any model or dataset folder
LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
NAME = "SHA256SUMS"

# Problem kinds, each of which the inputs check reports under its own finding id.
UNREADABLE = "unreadable"      # SHA256SUMS itself: missing, too large, not a file, not UTF-8
MALFORMED = "malformed"        # a line that is not "<64 hex>  <name>"
ESCAPES = "escapes"            # an absolute name or one with '..': outside the folder by name
DUPLICATE = "duplicate"        # the same name twice
SYMLINK_OUT = "symlink-out"    # a name inside the folder whose symlinks lead outside it
NOT_REGULAR = "not-regular"    # a device, FIFO, socket or folder
REQUIRED = "required"          # a file the caller needs is not listed
MISSING = "missing"            # listed but absent or unreadable
MISMATCH = "mismatch"          # listed, readable, another sha256


@dataclasses.dataclass
class Problem:
    kind: str
    name: str      # the entry's name (or the SHA256SUMS path for UNREADABLE)
    message: str


@dataclasses.dataclass
class Sums:
    entries: Dict[str, str]  # name -> lower-case digest, in file order
    problems: List[Problem]


def parse(text: str) -> Sums:
    """Entries and problems of a SHA256SUMS text; unsafe names are problems, not entries."""
    entries: Dict[str, str] = {}
    problems: List[Problem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = LINE.match(line)
        if not match:
            problems.append(Problem(MALFORMED, line[:200], f"line {number} is not "
                                    f"'<sha256>  <name>': {line[:200]!r}"))
            continue
        digest, name = match.group(1).lower(), match.group(2)
        if name.startswith("./"):
            name = name[2:]
        problem = name_problem(name)
        if problem:
            problems.append(Problem(problem[0], name, f"line {number}: {problem[1]}"))
        elif name in entries:
            problems.append(Problem(DUPLICATE, name, f"line {number}: {name!r} is listed again"))
        else:
            entries[name] = digest
    return Sums(entries, problems)


def name_problem(name: str) -> Optional[Tuple[str, str]]:
    """Why a listed name is not a plain relative path inside the folder, or None."""
    if name.startswith("/"):
        return ESCAPES, f"{name!r} is an absolute path; only names inside the folder count"
    parts = name.split("/")
    if ".." in parts:
        return ESCAPES, f"{name!r} climbs out of the folder with '..'"
    if "" in parts or "." in parts or "\\" in name or "\0" in name:
        return MALFORMED, f"{name!r} is not a plain relative path"
    return None


def read(path: Path, max_bytes: int = MAX_BYTES) -> Sums:
    """Parse the SHA256SUMS at ``path``, reading at most ``max_bytes`` of it."""
    path = Path(path)
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return Sums({}, [Problem(UNREADABLE, str(path), f"cannot open: {exc.strerror}")])
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Sums({}, [Problem(UNREADABLE, str(path), "not a regular file")])
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        return Sums({}, [Problem(UNREADABLE, str(path), f"larger than {max_bytes >> 20} MiB; "
                                 "not a SHA256SUMS of a model or dataset folder")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Sums({}, [Problem(UNREADABLE, str(path), f"not UTF-8 text ({exc.reason} at "
                                 f"byte {exc.start})")])
    return parse(text)


def target_problem(folder: Path, name: str) -> Optional[Problem]:
    """Why folder/name must not be hashed: a symlink leading out, or not a regular file."""
    path = Path(folder) / name
    try:
        real = path.resolve(strict=True)
        root = Path(folder).resolve(strict=True)
    except FileNotFoundError:
        return None  # absent: hashing reports it as missing
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission problem
        return Problem(NOT_REGULAR, name, f"cannot resolve: {exc}")
    if root not in real.parents:
        return Problem(SYMLINK_OUT, name, f"{name!r} leads outside the folder (to {real})")
    try:
        mode = os.stat(str(real)).st_mode
    except OSError as exc:
        return Problem(MISSING, name, f"cannot read: {exc.strerror}")
    if not stat.S_ISREG(mode):
        return Problem(NOT_REGULAR, name, f"{name!r} is not a regular file")
    return None


def check_folder(folder: Path, required: Iterable[str] = (), deep: bool = True,
                 label: str = "sha256", sums_path: Optional[Path] = None) -> Tuple[Sums, List[Problem]]:
    """Read folder/SHA256SUMS (or ``sums_path``, a manifest kept beside the folder) and judge
    every entry; with ``deep``, hash what is safe to hash.

    Returns the parsed file and every problem: the file's own, each unsafe entry, each
    ``required`` name it does not list and (deep) each file that is missing or differs.
    """
    folder = Path(folder)
    sums = read(Path(sums_path) if sums_path is not None else folder / NAME)
    problems = list(sums.problems)
    if any(p.kind == UNREADABLE for p in problems):
        return sums, problems
    for name in required:
        if name not in sums.entries:
            problems.append(Problem(REQUIRED, name, f"{name!r} is needed but not listed in "
                                    f"{NAME}"))
    safe = {}
    for name, digest in sums.entries.items():
        problem = target_problem(folder, name)
        if problem:
            problems.append(problem)
        else:
            safe[name] = digest
    if deep:
        for path, digest, got in hashing.mismatches(folder, [(d, n) for n, d in safe.items()], label):
            name = path.relative_to(folder).as_posix()
            if isinstance(got, OSError):
                problems.append(Problem(MISSING, name, f"cannot read: {got.strerror}"))
            else:
                problems.append(Problem(MISMATCH, name, f"sha256 expected {digest}, actual {got}"))
    return sums, problems


def format_sums(entries: Iterable[Tuple[str, str]]) -> str:
    """(digest, name) pairs as sha256sum writes them."""
    return "".join(f"{digest}  {name}\n" for digest, name in entries)
