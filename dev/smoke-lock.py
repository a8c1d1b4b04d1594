#!/usr/bin/env python3
"""Write dev/smokeenv/lock.txt from dev/smokeenv/pins.txt: every pin with the sha256 of each file
the package index holds for it that a Linux x86_64 CPython 3.11 or 3.12 can install.

Usage: python3 dev/smoke-lock.py [--index URL]      (make smoke-lock; needs the package index)

The hashes come from the index's JSON listing (PEP 691), so nothing is downloaded. A pin with no
wheel for one of those Pythons falls back to its source archive (built at install time); a pin
with neither is an error. The lock is a pip requirements file (`--require-hashes` mode) whose
comments carry what the environment builder needs: the range of an already installed version it
may reuse instead, and the size of the largest file (for the disk estimate).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent / "smokeenv"
PYTHONS = ("311", "312")  # this machine's CPython and the GPU machine's
ACCEPT = "application/vnd.pypi.simple.v1+json"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_fits(filename: str, python: str) -> bool:
    """Whether a wheel installs on Linux x86_64 CPython 3.<python[1:]>, by its file name's tags."""
    parts = filename[:-len(".whl")].split("-")
    pys, abi, plat = parts[-3].split("."), parts[-2], parts[-1]
    if plat != "any" and not ("linux" in plat and "x86_64" in plat):
        return False
    for py in pys:
        if py in ("py3", f"py{python}", f"cp{python}"):
            return True
        if abi == "abi3" and py.startswith("cp3") and int(py[3:]) <= int(python[1:]):
            return True
    return False


def index_files(index: str, name: str, version: str) -> List[dict]:
    request = urllib.request.Request(f"{index.rstrip('/')}/{normalize(name)}/", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=60) as response:
        listing = json.load(response)
    stem = "[-_.]".join(re.escape(part) for part in normalize(name).split("-"))
    prefix = re.compile(rf"^{stem}-{re.escape(version)}(-|\.tar\.gz$|\.zip$)", re.IGNORECASE)
    return [f for f in listing["files"] if prefix.match(f["filename"]) and not f.get("yanked")]


def lock_line(index: str, pin: str, reuse: str) -> Tuple[str, List[str]]:
    name, version = pin.split("==")
    files = index_files(index, name, version)
    chosen: Dict[str, dict] = {}
    missing = []
    for python in PYTHONS:
        wheels = [f for f in files if f["filename"].endswith(".whl") and wheel_fits(f["filename"], python)]
        sdists = [f for f in files if not f["filename"].endswith(".whl")]
        picked = wheels or sdists[:1]
        if not picked:
            missing.append(f"{pin}: no file for CPython 3.{python[1:]} on Linux x86_64")
        chosen.update({f["filename"]: f for f in picked})
    hashes = " ".join(f"--hash=sha256:{f['hashes']['sha256']}" for _, f in sorted(chosen.items()))
    size = max((int(f.get("size") or 0) for f in chosen.values()), default=0)
    source = "; build: sdist" if chosen and not any(n.endswith(".whl") for n in chosen) else ""
    return f"{pin} {hashes}  # reuse: {reuse}; bytes: {size}{source}", missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="https://pypi.org/simple")
    args = parser.parse_args()
    out = ["# The packages make smoke's environment installs: written by dev/smoke-lock.py from pins.txt.",
           "# pip requirements with hashes; '# reuse:' is the range of an installed version the",
           "# environment builder keeps instead (dev/smokeenv/lockfile.py). Do not edit by hand."]
    problems: List[str] = []
    for raw in (HERE / "pins.txt").read_text().splitlines():
        line = raw.strip()
        if line.startswith("#! fetch "):  # carried by the wheelhouse, never installed (verl's checkout)
            text, missing = lock_line(args.index, line.split()[2], "any")
            out.append("#! fetch " + text.split("  #")[0])
            problems += missing
        elif line.startswith("#!"):
            out.append(line)
        elif line and not line.startswith("#"):
            pin, reuse = line.split(None, 1)
            text, missing = lock_line(args.index, pin, reuse.strip())
            out.append(text)
            problems += missing
    if problems:
        print("smoke-lock: " + "\n smoke-lock: ".join(problems), file=sys.stderr)
        return 1
    (HERE / "lock.txt").write_text("\n".join(out) + "\n")
    print(f"smoke-lock: wrote {HERE / 'lock.txt'} ({len(out) - 3} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
