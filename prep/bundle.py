#!/usr/bin/env python3
"""Summary: Keep the bundle's hash chain: SHA256SUMS, the launcher's pin, install and checks.

Usage: prep/bundle.py checksums | verify-scripts | install (--prep-root ROOT | DEST [--force])
       prep/bundle.py driver-command STORAGE_ROOT [--profile NAME] [--run-id ID]

The bundle is every file under tools/verl/two-worker-grpo/ plus runtime-env.json. Installed on
a volume (--prep-root), each version sits in its own folder,
<storage>/tools/verl/two-worker-grpo/bundle-<12 hex of the launcher's sha256>/, never
overwritten, and LATEST names the newest; install DEST copies it flat into one folder (scratch
volumes). The launcher is pinned by the Driver command, SHA256SUMS and the bundle checker by the
launcher, and every other file by SHA256SUMS.
Exit codes: 0 ok, 1 a check failed, 2 usage error.
"""
from __future__ import annotations

import argparse
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for prep/
from prep.bundle_layout import (BUNDLE, BUNDLES_REL, LAUNCHER_NAME, REPO, SUMS,  # noqa: E402
                                sha256, version_of)
from prep.driver_command import cmd_driver_command  # noqa: E402
from twgrpo.formats import sums  # noqa: E402  (the one SHA256SUMS reader; bundle_layout set the path)

VERIFIER_NAME = "verify-two-worker-grpo-v1.py"
RUNTIME_ENV = REPO / "runtime-env.json"
DEFAULT_JOB_ROOT = "/mnt/verl-reproduction"
from twgrpo.run.findings import say_usage, usage  # noqa: E402

CHECKER_NAME = "check-bundle-v1.py"
PIN = re.compile(r"^readonly BUNDLE_SUMS_SHA256=[0-9a-f]{64}$", re.M)
CHECKER_PIN = re.compile(r"^readonly BUNDLE_CHECK_SHA256=[0-9a-f]{64}$", re.M)
SKIP_PARTS = {"__pycache__"}


def walk(folder: Path, exclude: set) -> Dict[str, Path]:
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in exclude and not SKIP_PARTS & set(path.parts) \
                and not path.name.endswith(".pyc"):
            files[rel] = path
    return files


def repo_files() -> Dict[str, Path]:
    """Installed name -> repo path of every file SHA256SUMS covers."""
    files = walk(BUNDLE, {LAUNCHER_NAME})
    files["runtime-env.json"] = RUNTIME_ENV
    return files


def sums_text(files: Dict[str, Path]) -> str:
    return sums.format_sums((sha256(path), name) for name, path in sorted(files.items()))


def pin_launcher(launcher: Path, sums_sha: str) -> None:
    """The launcher's two pins: SHA256SUMS beside it and the checker it runs first."""
    text = launcher.read_text(encoding="utf-8")
    for pattern, line in ((PIN, "readonly BUNDLE_SUMS_SHA256="), (CHECKER_PIN, "readonly BUNDLE_CHECK_SHA256=")):
        if not pattern.search(text):
            raise SystemExit(f"bundle: {launcher} has no '{line}' line to pin")
    checker = sha256(launcher.parent / CHECKER_NAME)
    text = PIN.sub(f"readonly BUNDLE_SUMS_SHA256={sums_sha}", text)
    launcher.write_text(CHECKER_PIN.sub(f"readonly BUNDLE_CHECK_SHA256={checker}", text),
                        encoding="utf-8")


def generated_runtime_env() -> str:
    out = subprocess.run([sys.executable, str(BUNDLE / VERIFIER_NAME), "runtime-env",
                          "--storage-root", DEFAULT_JOB_ROOT], capture_output=True, text=True,
                         check=True)
    return out.stdout


def cmd_checksums(args: argparse.Namespace) -> int:
    RUNTIME_ENV.write_text(generated_runtime_env(), encoding="utf-8")
    SUMS.parent.mkdir(exist_ok=True)
    SUMS.write_text(sums_text(repo_files()), encoding="utf-8")
    pin_launcher(BUNDLE / LAUNCHER_NAME, sha256(SUMS))
    print(f"bundle: wrote runtime-env.json, {SUMS.relative_to(REPO)} "
          f"({len(repo_files())} files) and the launcher's pin {sha256(SUMS)[:12]}…")
    print(f"bundle: launcher sha256 {sha256(BUNDLE / LAUNCHER_NAME)}")
    return 0


def chain_problems(files: Dict[str, Path], sums_file: Path, launcher: Path) -> List[str]:
    """Everything that breaks the hash chain, each with what to do."""
    problems: List[str] = []
    if not sums_file.is_file():
        return [f"{sums_file} is missing — run `make checksums`"]
    parsed = sums.read(sums_file)
    problems += [f"SHA256SUMS: {p.message} — run `make checksums`" for p in parsed.problems]
    listed = parsed.entries
    for name, path in sorted(files.items()):
        if name not in listed:
            problems.append(f"{name}: not in SHA256SUMS — run `make checksums`")
        elif listed[name] != sha256(path):
            problems.append(f"{name}: sha256 expected {listed[name]}, actual {sha256(path)} "
                            "— run `make checksums`")
    for name in sorted(set(listed) - set(files)):
        problems.append(f"{name}: listed in SHA256SUMS but missing — run `make checksums`")
    text = launcher.read_text(encoding="utf-8")
    for pattern, what, path in ((PIN, "SHA256SUMS", sums_file),
                                (CHECKER_PIN, CHECKER_NAME, launcher.parent / CHECKER_NAME)):
        match = pattern.search(text)
        pinned = match.group(0).split("=")[1] if match else None
        actual = sha256(path) if path.is_file() else "missing"
        if pinned != actual:
            problems.append(f"{launcher.name}: pins {what} {pinned}, actual {actual} "
                            "— run `make checksums`")
    return problems


def compile_problems(files: List[Path]) -> List[str]:
    problems = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in files:
            if path.suffix == ".py":
                try:  # compile to scratch, so no __pycache__ lands in the bundle
                    py_compile.compile(str(path), cfile=os.path.join(scratch, "x.pyc"), doraise=True)
                except py_compile.PyCompileError as exc:
                    problems.append(f"{path}: does not compile: {exc.msg.strip()}")
            # the launcher and the parts it sources; linting (shellcheck) is make test's job
            elif path.suffix in (".sh", ".bash"):
                out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
                if out.returncode:
                    problems.append(f"{path}: bash -n fails:\n{out.stdout}{out.stderr}")
    return problems


def cmd_verify_scripts(args: argparse.Namespace) -> int:
    files = repo_files()
    problems = compile_problems([*files.values(), BUNDLE / LAUNCHER_NAME])
    if RUNTIME_ENV.is_file() and RUNTIME_ENV.read_text(encoding="utf-8") != generated_runtime_env():
        problems.append("runtime-env.json differs from the profile's RuntimeEnv — run `make checksums`")
    problems += chain_problems(files, SUMS, BUNDLE / LAUNCHER_NAME)
    for problem in problems:
        print(f"verify-scripts: {problem}", file=sys.stderr)
    if problems:
        print(f"verify-scripts: FAILED ({len(problems)} problems)", file=sys.stderr)
        return 1
    print(f"verify-scripts: PASSED ({len(files) + 1} files compiled and hash-chained; "
          f"launcher sha256 {sha256(BUNDLE / LAUNCHER_NAME)})")
    return 0


def install_files(dest: Path, force: bool) -> bool:
    """Copy the bundle flat into dest; False (and nothing changed) if a file differs and not force."""
    plan = {**repo_files(), "SHA256SUMS": SUMS, LAUNCHER_NAME: BUNDLE / LAUNCHER_NAME}
    differing = [n for n, p in plan.items() if (dest / n).is_file() and sha256(dest / n) != sha256(p)]
    if differing and not force:
        print(f"install: {dest} holds other versions of {len(differing)} files "
              f"({', '.join(differing[:5])}); nothing was changed. Past runs used them: install "
              "into a new folder, or pass FORCE=1 to replace them.", file=sys.stderr)
        return False
    unsafe = [n for n in plan for t in (dest / n, (dest / n).with_name(f".{Path(n).name}.installing"))
              if (t.is_symlink() or t.exists()) and (t.is_symlink() or not t.is_file())]
    if unsafe:  # a link, device, FIFO or folder in the way: never written through (GEN-E020)
        say_usage("install", usage("GEN-E020", None, f"{dest} holds non-regular files where "
                                   f"bundle files go ({', '.join(unsafe[:5])}); nothing was changed"))
        return False
    for name, source in plan.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.installing")
        shutil.copyfile(source, temporary)
        os.chmod(temporary, 0o755 if name in (LAUNCHER_NAME, VERIFIER_NAME) else 0o644)
        os.replace(temporary, target)
    print(f"install: {len(plan)} files in {dest}")
    return True


def verify_installed(folder: Path) -> int:
    return subprocess.run(["bash", str(folder / LAUNCHER_NAME), "--verify-bundle"]).returncode


def install_version(root: Path, staged: Path) -> int:
    """Move a complete bundle folder (staged, on the same volume) to its version folder under
    root, never replacing one: an installed version stays as it is, so every Driver command
    pasted for it, and every resume of its runs, keeps working. LATEST names the newest."""
    parent = root / BUNDLES_REL
    version = version_of(staged / LAUNCHER_NAME)
    target = parent / version
    if target.exists() or target.is_symlink():
        shutil.rmtree(staged)
        if verify_installed(target) != 0:
            say_usage("install", usage("LAUNCH-E050", None, f"{target} differs from its own "
                                       "SHA256SUMS (see above)"))
            return 1
        print(f"install: {version} is already installed in {target}; nothing was changed")
    else:
        os.rename(staged, target)
        print(f"install: {version} installed in {target}")
        if verify_installed(target) != 0:
            return 1
    latest = parent / ".LATEST.installing"
    latest.write_text(version + "\n", encoding="utf-8")
    os.replace(latest, parent / "LATEST")
    print(f"install: the Driver command for it: make driver-command (it runs {version})")
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    if args.prep_root is None and not args.dest:
        print("install: name the volume: --prep-root ROOT (make install-tools PREP_ROOT=...)",
              file=sys.stderr)
        return 2
    if args.prep_root is not None and not Path(args.prep_root).is_dir():
        # make install-tools: the volume must exist, never made here
        print(f"install: PREP_ROOT {args.prep_root} is not a directory; nothing was created. "
              "Mount the shared volume and set PREP_ROOT= to its path on this box.",
              file=sys.stderr)
        return 2
    problems = chain_problems(repo_files(), SUMS, BUNDLE / LAUNCHER_NAME)
    if problems:
        print("install: the repo's hash chain is stale:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    if args.dest:  # one exact folder, flat (make smoke's and the tests' scratch volumes)
        if not install_files(Path(args.dest), args.force):
            return 1
        return verify_installed(Path(args.dest))
    parent = Path(args.prep_root) / BUNDLES_REL
    parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=".installing-", dir=parent))
    install_files(staged, force=True)
    status = install_version(Path(args.prep_root), staged)
    if status or not args.site:
        return status
    from prep import site  # the site's profiles, beside every version (prep/site.py)
    return site.install(Path(args.prep_root), Path(args.site))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prep/bundle.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("checksums")
    sub.add_parser("verify-scripts")
    sub.add_parser("version", help="print this checkout's bundle version folder name")
    p = sub.add_parser("install")
    p.add_argument("dest", nargs="?", help="the bundle folder itself (make smoke's scratch volume)")
    p.add_argument("--prep-root", help="the volume: installs into its tools/verl/two-worker-grpo/")
    p.add_argument("--force", action="store_true")
    p.add_argument("--site", default="", help="a folder of site profiles: each installed under "
                   "two-worker-grpo-profiles/<name>/<sha256>.env on the volume (make install-tools SITE=)")
    p = sub.add_parser("driver-command")
    p.add_argument("storage_root")
    p.add_argument("--profile", default="")
    p.add_argument("--run-id", default="", help="export RUN_ID too (make smoke; never for a job form)")
    p.add_argument("--ignored-run-id", default="", help="a RUN_ID make was given: say why it is left out")
    p.add_argument("--launcher", default=str(BUNDLE / LAUNCHER_NAME),
                   help="the launcher whose sha256 to pin (default: this checkout's)")
    p.add_argument("--bundle-dir", default="",
                   help="the installed folder relative to STORAGE_ROOT, for a flat install "
                        "(default: the launcher's version folder)")
    args = parser.parse_args(argv)
    handlers = {"checksums": cmd_checksums, "verify-scripts": cmd_verify_scripts,
                "install": cmd_install, "driver-command": cmd_driver_command,
                "version": lambda _: print(version_of(BUNDLE / LAUNCHER_NAME)) or 0}
    return handlers[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
