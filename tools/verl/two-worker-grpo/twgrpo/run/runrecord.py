"""run.json, the launcher's record of a run, read in one place: whole (bounded and typed) or,
for `make runs` over thousands of runs, glanced at (run/glance.py). Every other module asks
here for what it needs of the record: the profile, its values, the lineage, the storage root,
the launcher's identity.

run.json is a few KiB; a resumed run's lineage adds a hash for each checkpoint file (about 1 MiB
at 2,900 ranks). So a read is bounded by the run's own record budget (run/budget.py), from the
size its profile describes: the profile is read from the record when it is at most MOST_BYTES,
else from its head, where the writer's sorted keys put it (before the lineage). A folder
without a readable run.json takes its size from the profile postflight recorded, at the end of
verification.json (after the evidence), so that every view reads it within one budget. A 1 GiB
or FIFO run.json is refused, never read whole or waited on. A record that cannot be read raises
bounded.Unreadable (str(exc) == "missing" when there is none); each caller decides what that
means for it.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..formats import bounded
from . import budget, glance, runid, typed
from .findings import UsageError
from .profile import Profile, env_lines, parse_profile_text
from .profile_keys import ADDED_LATER, SHA256
from .records import write_json
from .runfolder import RunFolder, refuse_symlinked

MOST_BYTES = 1 << 20  # read whole for its profile; a larger record's profile is in its head
PROFILE_HEAD = 256 << 10  # the head searched: the keys before "profile" and the profile itself
# The writer (indent 2, sorted keys) puts the profile object on lines of its own; indent 2
# makes its end exact: a nested object's brace is indented further, a string holds no newline.
PROFILE_OPENS, PROFILE_CLOSES = b'\n  "profile": {\n', b"\n  }"
PATH_MAX = 4096  # Linux's, in bytes: a longer storage root names no folder a job could have used
PROFILE = {"name": str, "sha256": str, "values": typed.Need(typed.Map(str))}
Folder = Union[str, Path, RunFolder]


def path_of(run_dir: Folder) -> Path:
    return RunFolder(run_dir).run_json


def exists(run_dir: Folder) -> bool:
    return path_of(run_dir).is_file()


def read(run_dir: Folder, limit: Optional[int] = None, memory: Optional[int] = None) -> Dict[str, Any]:
    """The whole record, bounded by the run's record budget (limit and memory: the caller's)."""
    within = size(run_dir)
    return bounded.read_object(path_of(run_dir), limit or within.record_bytes,
                               memory or within.record_memory)


# A run record: without profile values it is not one (the resume phase, postflight's lineage).
RUN = {**typed.RUN, "profile": typed.Need({"name": str, "values": typed.Need(typed.Map(str))}),
       "bundle_sums_sha256": str, "launcher_sha256": str, "resume": typed.ANY}


def read_run(run_dir: Folder) -> Dict[str, Any]:
    """The record held to RUN; ValueError if it is not a plain file, huge, not JSON, nested too
    deep, or not a run record with profile values (fields of the wrong type are dropped)."""
    path = path_of(run_dir)
    if path.is_symlink():
        raise ValueError("not a plain file")
    within = size(run_dir)
    try:
        data = bounded.loads(bounded.read_bytes(path, within.record_bytes), memory=within.record_memory)
    except bounded.Unreadable as exc:
        raise ValueError(str(exc))
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})")
    wrong: List[str] = []
    data = typed.conform(data, RUN, "", wrong) if isinstance(data, dict) else None
    if not isinstance(data, dict) or "profile" not in data:
        raise ValueError("not a run record with profile values" + (f" ({wrong[0]})" if wrong else ""))
    return data


def read_or_empty(run_dir: Folder) -> Dict[str, Any]:
    """The whole record, or {} when it is missing or cannot be read."""
    try:
        return read(run_dir)
    except bounded.Unreadable:
        return {}


def read_typed(run_dir: Folder, spec: Any, problems: List[str],
               within: Optional[budget.Size] = None) -> Dict[str, Any]:
    """The record held to spec (run/typed.py); fields that do not fit are told in problems.
    within: the run's budget (bytes, parse cost, items), by default the size it records."""
    within = within or size(run_dir)
    return typed.read_record(path_of(run_dir), spec, problems, within.record_bytes,
                             within.record_memory, within.items)


def write(run_dir: Folder, record: Dict[str, Any]) -> None:
    """Write the record (never through a symlinked run folder)."""
    write_json(refuse_symlinked(RunFolder(run_dir).path) / path_of(run_dir).name, record)


@dataclasses.dataclass(frozen=True)
class ProfileProblem:
    """Why run.json gives no profile: detail as the reader said it, note as a page says it."""
    path: Path
    detail: str
    note: str

    def refusal(self) -> UsageError:
        return UsageError(f"{self.path}: cannot read the run's profile ({self.detail}); pass --profile")


def _recorded(run_dir: Folder) -> Union[Dict[str, Any], ProfileProblem]:
    """The record's profile (name, values, sha256) held to PROFILE, or why there is none."""
    path, wrong = path_of(run_dir), []
    try:
        data = read_typed(run_dir, {"profile": typed.Need(PROFILE)}, wrong)
    except bounded.Unreadable as exc:
        return ProfileProblem(path, str(exc), f"run.json is {exc}" if str(exc) == "missing"
                              else f"run.json cannot be read: {exc}")
    if "profile" not in data:
        return ProfileProblem(path, wrong[0] if wrong else "no profile values",
                              "run.json holds no profile values" + (f" ({wrong[0]})" if wrong else ""))
    return data["profile"]


def profile_problem(run_dir: Folder) -> Optional[str]:
    """Why the record cannot give the run's profile, or None when it holds its values."""
    found = _recorded(run_dir)
    return found.note if isinstance(found, ProfileProblem) else None


def recorded_profile(run_dir: Folder) -> Union[Profile, ProfileProblem]:
    """The profile the run recorded, or why it cannot be read: one read of run.json."""
    found = _recorded(run_dir)
    if isinstance(found, ProfileProblem):
        return found
    record, name = path_of(run_dir), found.get("name", "?")
    values = found["values"]  # a run recorded before a key existed did not pin it
    try:
        text = env_lines({**{key: "" for key in ADDED_LATER}, **values})
    except ValueError as exc:
        return ProfileProblem(record, str(exc), f"run.json's profile cannot be read: {exc}")
    recorded = parse_profile_text(text, f"{record} (profile {name[:80]})")
    digest = found.get("sha256", "")  # of the file the run read (older runs: none)
    return dataclasses.replace(recorded, sha256=digest) if SHA256.match(digest) else recorded


def profile(run_dir: Folder) -> Profile:
    """The profile the run recorded (a UsageError says what to do if it cannot be read)."""
    found = recorded_profile(run_dir)
    if isinstance(found, ProfileProblem):
        raise found.refusal()
    return found


def profile_values(run_dir: Folder) -> Dict[str, Any]:
    """The profile's values as recorded; {} when the record or its values cannot be read."""
    path = path_of(run_dir)
    try:
        if os.stat(path).st_size <= MOST_BYTES:
            recorded = bounded.read_object(path, MOST_BYTES).get("profile")
        else:
            recorded = _profile_in(path)
    except (OSError, bounded.Unreadable):
        return {}
    return _values_of(recorded)


def _values_of(recorded: Any) -> Dict[str, Any]:
    """A recorded profile object's values; {} where it or they are not objects."""
    values = recorded.get("values") if isinstance(recorded, dict) else None
    return values if isinstance(values, dict) else {}


def _profile_in(path: Path, at_end: bool = False) -> Any:
    """The profile object of a record over MOST_BYTES, from its first PROFILE_HEAD bytes (at_end:
    its last, where postflight's record has it, after its evidence); None when it is not there
    (or not JSON)."""
    stream, info = bounded.open_checked(path)
    with stream:
        try:
            stream.seek(max(info.st_size - PROFILE_HEAD, 0) if at_end else 0)
            head = stream.read(PROFILE_HEAD)
        except OSError as exc:
            raise bounded.Unreadable(f"cannot read: {exc.strerror}")
    # the first (the last at the end): two finds, linear in the bytes read
    opens = head.rfind(PROFILE_OPENS) if at_end else head.find(PROFILE_OPENS)
    closes = head.find(PROFILE_CLOSES, opens + len(PROFILE_OPENS)) if opens != -1 else -1
    try:
        return bounded.loads(head[opens + len(PROFILE_OPENS) - 2:closes + len(PROFILE_CLOSES)]) \
            if closes != -1 else None
    except ValueError:
        return None


def _verified_values(path: Path) -> Dict[str, Any]:
    """The profile's values as postflight recorded them in verification.json (path); {} when
    they cannot be read."""
    try:
        return _values_of(_profile_in(path, at_end=True))
    except (OSError, bounded.Unreadable):
        return {}


_SIZES: Dict[str, Tuple[Tuple[Optional[Tuple[int, int]], ...], Optional[budget.Size]]] = {}


def size(run_dir: Folder) -> budget.Size:
    """The size the recorded profile describes (recorded_size), the default when none can be read."""
    return recorded_size(run_dir) or budget.Size()


def recorded_size(run_dir: Folder) -> Optional[budget.Size]:
    """The size the recorded profile describes: run.json's or, in a folder without a readable
    one, the profile postflight recorded in verification.json (so that every view reads such a
    run's records within the budget postflight had); None when neither can be read. Read once
    per version of the files in a process (make runs asks for every record of a run)."""
    folder = RunFolder(run_dir)
    key = (_version(folder.run_json), _version(folder.verification_json))
    cached = _SIZES.get(str(folder.run_json))
    if cached and cached[0] == key:
        return cached[1]
    values = (profile_values(run_dir) if key[0] else {}) or \
        (_verified_values(folder.verification_json) if key[1] else {})
    found = budget.of_values(values) if values else None
    if len(_SIZES) > 4096:
        _SIZES.clear()
    _SIZES[str(folder.run_json)] = (key, found)
    return found


def _version(path: Path) -> Optional[Tuple[int, int]]:
    """What tells a file's versions apart (its mtime and size); None when it is not there."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def storage_root(run_dir: Folder) -> Optional[str]:
    """The storage root the job saw (an absolute path of at most PATH_MAX bytes), or None."""
    root = read_or_empty(run_dir).get("storage_root")
    return root if isinstance(root, str) and root.startswith("/") and \
        len(root.encode("utf-8", "surrogatepass")) <= PATH_MAX else None


def glance_fields(run_dir: Folder, names: Sequence[str], specs: Dict[str, Any]) -> Dict[str, Any]:
    """A few top-level fields at near-floor cost (make runs; run/glance.py)."""
    return glance.fields(path_of(run_dir), names, specs, size(run_dir).record_bytes)


def intact(run_dir: Folder) -> None:
    """bounded.Unreadable when the record is cut short or over the run's budget (glance.intact)."""
    glance.intact(path_of(run_dir), size(run_dir).record_bytes)


# The writer (indent 2, sorted keys) ends the resume record with from_run_id, then the
# snapshot the resume phase made (when there is one), then step.
PARENT_TAIL = 64 << 10
_PARENT = re.compile(rb'\n    "from_run_id": "([^"\\\n]{1,%d})",\n' % runid.MOST +
                     rb'(?:    "snapshot": "[^"\n]{0,4096}",\n)?    "step": (\d{1,9})\n  \}')


def parent_glance(run_dir: Folder) -> Optional[Tuple[str, int]]:
    """(parent, step) from the record's last PARENT_TAIL bytes; make runs reads no more."""
    try:
        data = "\n".join(bounded.tail_lines(path_of(run_dir), PARENT_TAIL)).encode()
    except bounded.Unreadable:
        return None
    match = _PARENT.search(b"\n" + data)
    parent = match.group(1).decode("ascii", "replace") if match else ""
    return (parent, int(match.group(2))) if match and runid.is_run_id(parent) else None
