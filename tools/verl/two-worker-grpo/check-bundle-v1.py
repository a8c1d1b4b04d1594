#!/usr/bin/env python3
# Summary: Check that an installed bundle folder is exactly its SHA256SUMS, before any of its code runs.
# Usage: python3 -I -S -B check-bundle-v1.py BUNDLE_DIR LAUNCHER_NAME
#
# The launcher pins this file's sha256 and SHA256SUMS's, and runs this before any other Python
# of the bundle: every listed file must be a regular file with its listed sha256, and nothing
# else may sit in the folder (no unlisted file, folder, symlink or special file; __pycache__
# included: Python would load a planted .pyc next to a verified .py). Standard library only,
# self-contained (it imports nothing of the bundle), run as `python3 -I -S -B` so nothing on
# PYTHONPATH, in site-packages or beside it takes part. Only regular files are opened.
# Exit codes: 0 the folder is exactly SHA256SUMS, 1 it is not, 2 usage error.
import hashlib
import os
import re
import stat
import sys

PROG = "run-two-worker-grpo-v1"
MAX_SUMS = 1 << 20  # the bundle's SHA256SUMS is a few KiB
SHOWN = 20          # intruders named one by one; the rest are counted
LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
PLAIN = re.compile(r"^[A-Za-z0-9._/+-]+$")
# Beside a flat install (an older layout): the version folders install puts in the same folder,
# their LATEST pointer and install's staging folders. Nothing of this bundle reads them.
CHANGED, EXTRA = "LAUNCH-E012", "LAUNCH-E014"
VERSIONS = re.compile(r"^(bundle-[0-9a-f]{12}|LATEST|\.installing-[A-Za-z0-9_]+)$")


# The catalog's hints for the ids this checker prints, copied because it imports nothing of the
# bundle; tests/py/unit/test_launcher_ids.py keeps them equal to twgrpo/run/catalog.py.
HINTS = {
    "LAUNCH-E012": "Someone changed an installed file: reinstall (make install-tools FORCE=1); to "
                   "change it on purpose, edit the repo and run make checksums.",
    "LAUNCH-E014": "The bundle must be exactly SHA256SUMS (a dropped-in profile or module could "
                   "replace pins or shadow code): move the listed paths out, or install into a new "
                   "folder (make install-tools).",
}


def say(text):
    sys.stderr.write(f"{PROG}: {text}\n")


def refuse(fid, text):
    """The last line of a refusal: '(ID) text — the catalog's hint'."""
    say(f"({fid}) {text} — {HINTS[fid]}")


def shown(name):
    return name if PLAIN.match(name) else ascii(name)


def sha256_regular(path):
    """The sha256 of a regular file (never a link, FIFO or device), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
        return digest.hexdigest()


def listed_files(sums_path):
    """(name -> digest, malformed lines) of SHA256SUMS; names stay inside the folder."""
    with open(sums_path, "rb") as handle:
        data = handle.read(MAX_SUMS + 1)
    if len(data) > MAX_SUMS:
        return {}, [f"SHA256SUMS is larger than {MAX_SUMS} bytes"]
    entries, bad = {}, []
    for line in data.decode("utf-8", "replace").splitlines():
        match = LINE.match(line)
        name = match.group(2) if match else ""
        parts = name.split("/")
        if not match or name.startswith("/") or ".." in parts or "" in parts or name in entries:
            bad.append(line[:200])
        else:
            entries[name] = match.group(1)
    return entries, bad


def file_problems(folder, entries, bad):
    problems = [f"SHA256SUMS has a malformed line: {shown(line)}" for line in bad]
    for name, expected in entries.items():
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            problems.append(f"{name}: listed in SHA256SUMS but missing")
            continue
        actual = sha256_regular(path)
        if actual is None:
            if os.path.islink(path):
                continue  # named below as a symlink intruder
            problems.append(f"{name}: listed in SHA256SUMS but not a regular file")
        elif actual != expected:
            problems.append(f"{name}: sha256 expected {expected}, actual {actual}")
    return problems


def intruders(folder, entries, launcher):
    """(kind, name) of every path the folder holds that SHA256SUMS does not list."""
    listed = set(entries) | {"SHA256SUMS", launcher}
    folders = {name.rsplit("/", 1)[0] for name in listed if "/" in name}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    found = []
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(os.path.join(folder, rel) if rel else folder) as listing:
            for entry in sorted(listing, key=lambda e: e.name):
                name = f"{rel}/{entry.name}" if rel else entry.name
                if not rel and VERSIONS.match(name) and not entry.is_symlink():
                    continue
                if entry.is_symlink():
                    found.append(("symlink", name))
                elif entry.is_dir(follow_symlinks=False):
                    if name in folders:
                        pending.append(name)
                    else:
                        found.append(("folder", name))
                elif not entry.is_file(follow_symlinks=False):
                    found.append(("special file", name))
                elif name not in listed:
                    found.append(("file", name))
    return found


def main(argv):
    if len(argv) != 3:
        say("usage: check-bundle-v1.py BUNDLE_DIR LAUNCHER_NAME")
        return 2
    folder, launcher = argv[1], argv[2]
    entries, bad = listed_files(os.path.join(folder, "SHA256SUMS"))
    problems = file_problems(folder, entries, bad)
    for problem in problems:
        say(f"({CHANGED}) {problem}")
    if problems:
        refuse(CHANGED, f"{len(problems)} bundle file(s) differ from SHA256SUMS")
        return 1
    found = intruders(folder, entries, launcher)
    for kind, name in found[:SHOWN]:
        say(f"({EXTRA}) {kind} not in SHA256SUMS: {shown(name)}")
    if found:
        refuse(EXTRA, f"{len(found)} path(s) in {folder} are not in SHA256SUMS (shown above)")
        return 1
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv))
    except OSError as exc:
        refuse(CHANGED, f"cannot read the bundle: {exc.filename}: {exc.strerror}")
        raise SystemExit(1)
