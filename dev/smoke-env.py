#!/usr/bin/env python3
"""Find or build the Python environment of make smoke, or fill a wheelhouse for one.

Usage:
  python3 dev/smoke-env.py ensure [--python python3] [--env .smoke-env] [--wheelhouse DIR[:DIR]]
                                  [--no-gpu] [--lock FILE]
      Prints, as its last line on stdout, the bin folder to put first on PATH. Kept as it is:
      a base Python that already has a working stack (every pin of dev/smokeenv/lock.txt in its
      reuse range); else a finished build of this lock in --env. Else builds --env: a venv that
      installs the missing pins hash-checked (from --wheelhouse only, when given) and sees the
      base Python's packages after its own, torch included.
  python3 dev/smoke-env.py wheelhouse --dest DIR [--python-version 3.12]
      Downloads every pin of the lock, hash-checked, for Linux x86_64 CPython of that version (the
      GPU machine's): a folder to carry to a machine without network (torch is not included).

Exit codes: 0 ready; 2 this machine cannot have the environment (each reason a finding, ENV-E*).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "verl" / "two-worker-grpo"))
sys.path.insert(0, str(REPO / "dev"))
from smokeenv import build, lockfile, machine  # noqa: E402
from twgrpo.run.findings import finding  # noqa: E402

GIB = 2 ** 30
TORCH_ROOM = 8 * GIB  # a CUDA build of torch with its libraries, unpacked, when the base has none


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def ensure(args: argparse.Namespace) -> int:
    started = time.monotonic()
    lock_path = Path(args.lock) if args.lock else lockfile.LOCK
    lock = lockfile.load(lock_path)
    env = Path(args.env).absolute()
    base = build.describe(args.python)
    if not base:
        build.print_findings([finding("ENV-E012", args.python, "this Python cannot be run or lacks importlib.metadata")])
        return 2
    problems, driver = machine.driver_cuda() if args.gpu else ([], None)
    torch_spec = dict((lockfile.normalize(n), s) for n, s in lock.base).get("torch")
    torch_version = ""
    if torch_spec and not problems:
        found, torch_version, cuda = machine.base_torch(args.python)
        problems += found or (machine.torch_fits(args.python, torch_version, cuda, torch_spec, driver)
                              if torch_version else [])
    if problems:
        build.print_findings(problems)
        return 2
    want = build.stamp_of(lock_path.read_text(encoding="utf-8"), base)
    if build.reusable(env, want):
        print(f"smoke-env: reusing {env} (built from this lock over {base['executable']}) in "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        print(build.env_python(env).parent)
        return 0
    the_plan = build.plan(lock, base["dists"])
    if not the_plan.install and not the_plan.torch_missing and not build.stack_problems(args.python, lock):
        print(f"smoke-env: {base['executable']} already has a working stack: using it", file=sys.stderr)
        print(Path(base["executable"]).parent)
        return 0
    folders, problems = build.wheelhouse_sources(args.wheelhouse or "")
    if not problems:
        problems = (build.check_wheelhouse(the_plan.install, folders) if folders
                    else machine.index_reachable(args.python, the_plan.install[0].name if the_plan.install else "torch"))
    problems += build.refuse_foreign(env)
    needed = 4 * sum(p.size for p in the_plan.install) + (TORCH_ROOM if the_plan.torch_missing else 0)
    problems += machine.free_space(env, needed)
    if problems:
        build.print_findings(problems)
        return 2
    source = f"the wheelhouse {args.wheelhouse}" if folders else "the package index"
    torch_note = (f" (torch {torch_version or 'to install, from ' + source})" if torch_spec else "")
    print(f"smoke-env: keeping {len(the_plan.keep)} packages of {base['executable']}{torch_note}; "
          f"installing {len(the_plan.install)} hash-checked pins from {source} into {env}", file=sys.stderr)
    try:
        with build.exclusive(env):  # two smokes at once: the second waits, then reuses the build
            if build.reusable(env, want):
                print(build.env_python(env).parent)
                return 0
            build.build(env, lock, the_plan, base, folders, want)
    except build.BuildError as failed:
        build.print_findings(failed.findings)
        return 2
    print(f"smoke-env: built {env} in {time.monotonic() - started:.1f} s ({folder_size(env) / 2**20:.0f} MiB); "
          f"remove it with rm -rf {env}", file=sys.stderr)
    print(build.env_python(env).parent)
    return 0


def glibc_platforms() -> list:
    return [f"--platform=manylinux_2_{n}_x86_64" for n in range(17, 40)] + [
        "--platform=manylinux2014_x86_64", "--platform=manylinux1_x86_64", "--platform=linux_x86_64"]


def wheelhouse(args: argparse.Namespace) -> int:
    lock = lockfile.load(Path(args.lock) if args.lock else None)
    if not args.dest:
        build.print_findings([finding("ENV-E011", "WHEELHOUSE", "make wheelhouse needs the folder to fill: "
                                      "make wheelhouse WHEELHOUSE=<dir>")])
        return 2
    dest = Path(args.dest).absolute()
    dest.mkdir(parents=True, exist_ok=True)
    version = args.python_version.replace(".", "")
    target = [f"--python-version={args.python_version}", "--implementation=cp", f"--abi=cp{version}",
              "--abi=abi3", "--abi=none", *glibc_platforms(), "--only-binary=:all:"]
    wheels = [p for p in (*lock.pins, *lock.fetch) if not p.sdist]
    for pins, extra in ((wheels, target), ([p for p in lock.pins if p.sdist], [])):
        if not pins:
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
            req.write("\n".join(p.requirement() for p in pins) + "\n")
        try:
            code, out = machine.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                                     "--no-deps", "--require-hashes", "-d", str(dest), *extra, "-r", req.name],
                                    timeout=build.INSTALL_TIMEOUT)
        finally:
            os.unlink(req.name)
        if code != 0:
            build.print_findings([finding("ENV-E013", "package index", "pip download failed (exit "
                                          f"{code}): {' | '.join(out.strip().splitlines()[-3:])[:600]}")])
            return 2
    problems = build.check_wheelhouse([*lock.pins, *lock.fetch], [dest])
    if problems:
        build.print_findings(problems)
        return 2
    size = sum(f.stat().st_size for p in (*lock.pins, *lock.fetch) for f in build.files_of(p, [dest]))
    print(f"smoke-env: {dest} holds the lock's {len(lock.pins) + len(lock.fetch)} files for CPython "
          f"{args.python_version} ({size / 2**20:.0f} MiB): make smoke WHEELHOUSE={dest}", file=sys.stderr)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("ensure")
    one.add_argument("--python", default="python3")
    one.add_argument("--env", default=str(REPO / ".smoke-env"))
    one.add_argument("--wheelhouse", default=os.environ.get("WHEELHOUSE", ""))
    one.add_argument("--no-gpu", dest="gpu", action="store_false", help="skip the GPU, driver and CUDA checks")
    one.add_argument("--lock", default="")
    two = sub.add_parser("wheelhouse")
    two.add_argument("--dest", required=True)
    two.add_argument("--python-version", default="3.12")
    two.add_argument("--lock", default="")
    args = parser.parse_args()
    try:
        return ensure(args) if args.command == "ensure" else wheelhouse(args)
    except lockfile.LockError as exc:
        print(f"smoke-env: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
