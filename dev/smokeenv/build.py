"""Find or build make smoke's Python environment from the lock.

The plan: every lock pin the base Python already has inside the pin's reuse range is kept; the
rest are installed, hash-checked, into a venv that sees the base Python's packages after its own
(a .pth file), so the machine's torch is reused and never downloaded again. No pin missing: the
base Python itself is the environment (the verl image). Nothing is written before every check
passed; a venv that fails half-way is removed, and a folder this builder did not make is refused.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from twgrpo.run.findings import Finding, finding

from .lockfile import Lock, Pin, normalize, satisfies
from .machine import TIMEOUT, last_json, run

STAMP = "twgrpo-smoke-env.json"
INSTALL_TIMEOUT = 3600  # a slow mirror may take long; a hung pip must still end
# The first distribution of a name on sys.path is the one imported: later copies are shadowed.
_DISTS = ("import importlib.metadata as m, json, site, sys, re\nd = {}\n"
          "for x in m.distributions(): d.setdefault(re.sub(r'[-_.]+', '-', x.metadata['Name'] or '').lower(), x.version)\n"
          "print(json.dumps({'dists': d, 'site': site.getsitepackages(), 'version': sys.version.split()[0],"
          " 'executable': sys.executable}))")


class BuildError(Exception):
    """Findings that stop the build (nothing was written, or what was written is removed)."""

    def __init__(self, findings: List[Finding]):
        super().__init__("; ".join(f.message for f in findings))
        self.findings = findings


@dataclasses.dataclass
class Plan:
    keep: List[Pin]
    install: List[Pin]
    torch_missing: bool


def describe(python: str) -> Dict:
    """The installed distributions (normalized name -> version), site folders and version of PYTHON."""
    code, out = run([python, "-c", _DISTS])
    return (last_json(out) if code == 0 else None) or {}


def plan(lock: Lock, dists: Dict[str, str]) -> Plan:
    keep = [p for p in lock.pins if p.key in dists and satisfies(dists[p.key], p.reuse)]
    install = [p for p in lock.pins if p not in keep]
    torch_missing = any(normalize(name) not in dists for name, _ in lock.base)
    return Plan(keep, install, torch_missing)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_of(pin: Pin, folders: Sequence[Path]) -> List[Path]:
    stem = "[-_.]".join(re.escape(part) for part in pin.key.split("-"))
    pattern = re.compile(rf"^{stem}-{re.escape(pin.version)}(-.*\.whl|\.tar\.gz|\.zip)$", re.IGNORECASE)
    return sorted(f for folder in folders for f in folder.iterdir() if f.is_file() and pattern.match(f.name))


def check_wheelhouse(pins: Sequence[Pin], folders: Sequence[Path]) -> List[Finding]:
    """Every pin to install has a file in the wheelhouse, and every file of a pin has a lock hash."""
    found, missing = [], []
    for pin in pins:
        files = files_of(pin, folders)
        if not files:
            missing.append(f"{pin.name}=={pin.version}")
        for path in files:
            actual = sha256(path)
            if actual not in pin.hashes:
                found.append(finding("ENV-E007", str(path), f"sha256 {actual} is not the lock's for "
                                     f"{pin.name}=={pin.version}", expected=list(pin.hashes), actual=actual))
    if missing:
        found.append(finding("ENV-E006", ":".join(map(str, folders)), f"the wheelhouse lacks {len(missing)} "
                             f"of the pins to install: {', '.join(missing)}", missing=missing))
    return found


def stamp_of(lock_text: str, base: Dict) -> Dict:
    return {"lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
            "base_python": base.get("executable", ""), "base_version": base.get("version", "")}


@contextlib.contextmanager
def exclusive(env: Path):
    """Hold a lock beside ENV while it is built, so two builds never write one folder."""
    lock = env.parent / f".{env.name}.lock"
    env.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def env_python(env: Path) -> Path:
    return env / "bin" / "python"


def reusable(env: Path, want: Dict) -> bool:
    """Whether ENV is a finished build of this lock over this base Python (its stamp says so)."""
    try:
        have = json.loads((env / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return all(have.get(k) == v for k, v in want.items()) and env_python(env).exists()


def refuse_foreign(env: Path) -> List[Finding]:
    """A folder at the venv's path that this builder did not make is never removed or reused."""
    if env.is_symlink() or (env.exists() and not (env / STAMP).exists() and not (env / ".building").exists()):
        return [finding("ENV-E010", str(env), "this folder exists and was not made by make smoke's "
                        "environment builder (no stamp): it is left as it is")]
    return []


def base_pip(python: str) -> bool:
    """Whether PYTHON's own pip can install into another interpreter (pip --python: 22.3 or newer)."""
    code, out = run([python, "-m", "pip", "--version"])
    match = re.match(r"pip (\d+)\.(\d+)", out.strip())
    return code == 0 and bool(match) and (int(match.group(1)), int(match.group(2))) >= (22, 3)


def pip_install(pip: List[str], requirements: List[str], folders: Sequence[Path], extra: Sequence[str]) -> None:
    source = ["--no-index", *[f"--find-links={f}" for f in folders]] if folders else []
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("\n".join(requirements) + "\n")
    try:
        code, out = run([*pip, "install", "--disable-pip-version-check", "--no-cache-dir",
                         "-q", *source, *extra, "-r", req.name], timeout=INSTALL_TIMEOUT)
    finally:
        os.unlink(req.name)
    if code != 0:
        said = [line for line in out.strip().splitlines() if line.strip() and not line.lstrip().startswith(
            ("note:", "hint:", "╰─>", "[end of output]"))]
        raise BuildError([finding("ENV-E008", pip[-1], "pip install failed (exit "
                                  f"{code}): {' | '.join(said[-4:])[:600]}")])


def build(env: Path, lock: Lock, the_plan: Plan, base: Dict, folders: Sequence[Path], want: Dict) -> None:
    """Make the venv ENV with what THE_PLAN installs; on any failure ENV is removed again."""
    if env.exists():  # an unfinished or outdated build of ours: a cache, made again
        shutil.rmtree(env)
    env.mkdir(parents=True)
    (env / ".building").write_text("")
    try:
        # The base's pip installs into the venv when it can: a Python without ensurepip (Debian's
        # without python3-venv, Ubuntu's under a torch venv) still makes a venv --without-pip.
        outside = base_pip(base["executable"])
        code, out = run([base["executable"], "-m", "venv", *(["--without-pip"] if outside else []), str(env)],
                        timeout=INSTALL_TIMEOUT)
        pip = ([base["executable"], "-m", "pip", "--python", str(env_python(env))] if outside
               else [str(env_python(env)), "-m", "pip"])
        if code != 0:
            raise BuildError([finding("ENV-E008", str(env), f"python -m venv failed: {out.strip()[-300:]}")])
        site = run([str(env_python(env)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])[1]
        # After the venv's own packages: the base's torch (and whatever the plan keeps) stay visible.
        Path(site.strip()).joinpath("_twgrpo_base_site.pth").write_text("\n".join(base.get("site", [])) + "\n")
        if the_plan.torch_missing:  # the one install not pinned by hash: torch's build follows the machine
            pip_install(pip, [f"{name}{spec if spec != 'any' else ''}" for name, spec in lock.base],
                        folders, [])
        sdists = [p.requirement() for p in the_plan.install if p.sdist]
        # Building an archive needs a setuptools with bdist_wheel in the venv itself: the one
        # venv may bring (Python 3.11's is older) would shadow the base's, so the lock's goes in.
        builder = [p for p in lock.pins if p.key == "setuptools" and p not in the_plan.install] if sdists else []
        wheels = [p.requirement() for p in [*the_plan.install, *builder] if not p.sdist]
        if wheels:
            pip_install(pip, wheels, folders, ["--no-deps", "--require-hashes", "--only-binary=:all:"])
        if sdists:  # pure-Python archives, built offline with the setuptools just installed or kept
            pip_install(pip, sdists, folders, ["--no-deps", "--require-hashes", "--no-build-isolation"])
        problems = stack_problems(str(env_python(env)), lock)
        if problems:
            raise BuildError(problems)
        (env / STAMP).write_text(json.dumps({**want, "installed": [p.name for p in the_plan.install],
                                             "kept": [p.name for p in the_plan.keep]}, indent=1) + "\n")
        (env / ".building").unlink()
    except BaseException:
        shutil.rmtree(env, ignore_errors=True)
        raise


def stack_problems(python: str, lock: Lock) -> List[Finding]:
    """Whether PYTHON is a working stack: every pin inside its reuse range, every module imports."""
    info = describe(python)
    dists = info.get("dists", {})
    wrong = [f"{p.name} {dists.get(p.key, 'missing')} (wants {p.reuse})" for p in lock.pins
             if p.key not in dists or not satisfies(dists[p.key], p.reuse)]
    wrong += [f"{n} {dists.get(normalize(n), 'missing')} (wants {s})" for n, s in lock.base
              if normalize(n) not in dists or not satisfies(dists[normalize(n)], s)]
    if wrong:
        return [finding("ENV-E009", python, f"{len(wrong)} packages are missing or outside their range: "
                        f"{', '.join(wrong[:12])}", packages=wrong)]
    if lock.imports:
        code, out = run([python, "-c", f"import {', '.join(lock.imports)}"], timeout=TIMEOUT * 5)
        if code != 0:
            return [finding("ENV-E009", python, "the stack does not import: "
                            f"{(out.strip().splitlines() or ['?'])[-1][:300]}")]
    return []


def wheelhouse_sources(spec: str) -> Tuple[List[Path], List[Finding]]:
    """WHEELHOUSE: one folder or several joined by ':' (the order does not matter)."""
    folders = [Path(p).resolve() for p in spec.split(":") if p]
    bad = [f for f in folders if not f.is_dir()]
    return folders, [finding("ENV-E011", str(f), "WHEELHOUSE names no folder") for f in bad]


def print_findings(findings: Sequence[Finding]) -> None:
    for f in findings:
        print(f"smoke-env: {f.obj}: ({f.id}) {f.message}", file=sys.stderr)
        if f.hint:
            print(f"    HINT: {f.hint}", file=sys.stderr)

