"""JSON records and markers on shared storage: written whole or not at all, read with a clear error.

Every write goes to a temporary file beside the target, is fsynced, then renamed (records) or
hard-linked (markers, which never replace an existing file) into place; a full or read-only
disk leaves the old file or nothing, never a torn or empty one. Files get the mode the umask
allows (0644 under the usual 022), so another user can read the run's records.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Optional, Tuple

from ..formats import bounded, jsonlayout
from .catalog import CATALOG


class RecordError(OSError):
    """A record or marker could not be written; str() names the id, the file and the cause, and
    hint is the catalog's fix for that id (printed as its HINT line, like findings.usage's).

    An OSError, so callers that already catch OSError around a write keep working; its
    strerror is the cause alone (e.g. "No space left on device")."""

    def __init__(self, fid: str, message: str, cause: str = "", errno: int = 0):
        super().__init__(errno, cause or message)
        self.fid, self.message, self.hint = fid, message, CATALOG[fid][1]
        self.obj, self.text = "", message  # apart, for --format json (run/findingsout.py)

    def __str__(self) -> str:
        return f"({self.fid}) {self.message}"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _refuse_symlink(path: Path) -> None:
    """Refuse a target that exists and is not a regular file: a symlink (it could lead into
    another run), a device, FIFO, socket or folder (a rename would replace the node itself)."""
    try:
        mode = os.lstat(str(path)).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _cannot(path, exc) from None
    if stat.S_ISLNK(mode):
        raise RecordError("GEN-E004", f"{path} is a symlink (to {os.readlink(str(path))}); "
                          "records are written only as plain files in the run folder",
                          "it is a symlink")
    if not stat.S_ISREG(mode):
        raise RecordError("GEN-E020", f"{path} exists and is not a regular file ({kind(mode)}); "
                          "nothing is written over it", "not a regular file")


def kind(mode: int) -> str:
    """What a non-regular file is, in a word, for messages."""
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return word
    return "not a regular file"


def refuse_unwritable_target(path: Path) -> None:
    """The check every writer of the bundle and the prep tools runs before writing ``path``:
    RecordError unless it is absent or a regular file (never a symlink, device or FIFO)."""
    _refuse_symlink(Path(path))


def temporary_beside(path: Path) -> Tuple[int, str]:
    """An empty temporary file beside ``path``, with the mode the umask allows: its fd, open,
    and its name."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        discard(temporary)
        raise
    return fd, temporary


def fill(fd: int, text: str) -> None:
    """``text`` written to the open file fd, fsynced; fd is closed."""
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())


def _write_temporary(path: Path, text: str) -> str:
    """A fsynced temporary file beside ``path`` holding ``text``; its name."""
    fd, temporary = temporary_beside(path)
    try:
        fill(fd, text)
    except BaseException:
        discard(temporary)
        raise
    return temporary


def discard(name: Optional[str]) -> None:
    """Remove a temporary file if it is there (None: nothing to remove)."""
    if name is not None:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def _fsync_folder(folder: Path) -> None:
    fd = os.open(str(folder), os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a folder; the rename is done anyway
        pass
    finally:
        os.close(fd)


def _cannot(path: Path, exc: OSError) -> RecordError:
    return RecordError("GEN-E002", f"cannot write {path}: {exc.strerror or exc}",
                       exc.strerror or str(exc), exc.errno or 0)


def json_text(data: Any) -> str:
    """A record's text: indent=2's layout, long lists and objects at C speed (jsonlayout.py)."""
    return jsonlayout.dumps(data) + "\n"


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` so that readers see the old file or the new one, never a torn one."""
    write_text(Path(path), json_text(data))


def write_text(path: Path, text: str) -> None:
    path = Path(path)
    _refuse_symlink(path)
    try:
        _install(_write_temporary(path, text), path)
    except OSError as exc:
        raise _cannot(path, exc) from None


def install(temporary: str, path: Path) -> None:
    """Put a filled temporary file beside ``path`` (temporary_beside, fill) in its place, as
    write_text does; where it cannot, it is removed and RecordError raised."""
    path = Path(path)
    try:
        _refuse_symlink(path)
    except BaseException:
        discard(temporary)
        raise
    try:
        _install(temporary, path)  # which removes it where the rename fails
    except OSError as exc:
        raise _cannot(path, exc) from None


def _install(temporary: str, path: Path) -> None:
    try:
        os.replace(temporary, str(path))
    except BaseException:
        discard(temporary)
        raise
    _fsync_folder(path.parent)


def write_new_text(path: Path, text: str) -> bool:
    """Create ``path`` whole with ``text``; False if it exists (markers are never overwritten)."""
    path = Path(path)
    _refuse_symlink(path)
    try:
        temporary = _write_temporary(path, text)
        try:
            os.link(temporary, str(path))  # atomic, and refuses an existing file
        except FileExistsError:
            return False
        finally:
            discard(temporary)
        _fsync_folder(path.parent)
    except OSError as exc:
        raise _cannot(path, exc) from None
    return True


def read_json(path: Path, limit: int = 1 << 20) -> Any:
    """A small record or marker, bounded (formats/bounded.py); OSError if it cannot be opened,
    ValueError if it is too large or not JSON."""
    stream, _ = bounded.open_regular(path)
    with stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return bounded.loads(data)
