"""The Driver command: one short paste for the job form (bash or sh) that checks the volume,
the bundle version it pins, RUN_ID and the launcher's sha256, each with its own message, before
any tool's raw output, then starts the launcher in a bash that reads no BASH_ENV, ENV or
exported function (-p). Every command that hashes or executes goes by absolute path
(/usr/bin/env), so no shell function of the job's environment can stand in for it; the
builtins it uses are freed of functions first: the assignment POSIXLY_CORRECT=y (no command
lookup) puts bash in POSIX mode, where the special builtin unset comes before any function,
and `unset -f` then removes functions named exec, [, echo or cat (a backslash keeps an alias
off). Shell startup files and variables (BASH_ENV, SHELLOPTS, PS4) act before the first line,
so make submit, rayjob and sbatch refuse them as job variables (prep/jobspec.py). LATEST is read
only when it is a regular file, and 64 bytes of it at most: a FIFO there cannot hang the message.
A site profile (prep/site.py) is pinned by its own sha256 in PROFILE_SHA256, next to PROFILE.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Optional

from prep.bundle_layout import BUNDLE, BUNDLES_REL, LAUNCHER_NAME, SUMS, sha256, version_of
from prep import site  # noqa: E402  (after prep.bundle_layout, which puts the bundle's twgrpo on the path)
from twgrpo.formats import sums  # noqa: E402  (the one SHA256SUMS reader; prep.bundle_layout set the path)
from twgrpo.run import runid  # noqa: E402
from twgrpo.run.catalog import CATALOG
from twgrpo.run.findings import UsageError, say_usage, usage
from twgrpo.run.profile import load_profile

DRIVER = """\
# The job's environment variables: RUN_ID=<a new name> (required); SAVE_FREQ=<N> saves
# a checkpoint every N steps; RESUME_FROM=<a preempted run's RUN_ID> continues that run
# from its latest complete checkpoint (under the new RUN_ID). Runs in bash or sh.
POSIXLY_CORRECT=y; \\unset -f exec exit echo cat [ test
{exports}
b=$STORAGE_ROOT/{bundle_parent} v={version}; launcher=$b/$v/{launcher}
[ -d "$b" ] || {no_bundle}
[ -f "$launcher" ] || {no_version}
[ -n "${{RUN_ID:-}}" ] || {no_run_id}
case $(/usr/bin/env sha256sum "$launcher") in
  "{sha} "*) echo "driver: $launcher verified (bundle $v)"; \\exec /usr/bin/env bash --noprofile --norc -p "$launcher" ;;
  *) {changed} ;;
esac"""
# The Driver command's refusals, before any tool of the bundle can run: (id, what is wrong as
# shell text, exit code). Their hints are the catalog's, written in when the command is printed.
REFUSALS = {
    "no_bundle": ("LAUNCH-E045", "$b is missing: the shared volume is not mounted at "
                  "STORAGE_ROOT=$STORAGE_ROOT (or the bundle is not installed)", 2),
    "no_version": ("LAUNCH-E046", 'bundle $v of this command is not in $b (the latest installed is '
                   '$([ -f "$b/LATEST" ] && /usr/bin/env head -c 64 "$b/LATEST" 2>/dev/null '
                   '|| echo unknown))', 2),
    "no_run_id": ("LAUNCH-E003", "RUN_ID is not set", 2),
    "changed": ("LAUNCH-E047", "$launcher differs from this command's pin: the bundle there was "
                "changed or reinstalled after this command was copied", 1),
}


def refusal(fid: str, message: str, code: int) -> str:
    """One refusal as shell text: 'driver: (ID) message — the catalog's hint' on stderr, exit."""
    hint = CATALOG[fid][1]
    for char in '\\"$`':  # the hint is plain text inside the shell's double quotes
        hint = hint.replace(char, "\\" + char)
    return f'{{ echo "driver: ({fid}) {message} — {hint}" >&2; exit {code}; }}'


def stale_profile(launcher: Path, profile: str) -> Optional[UsageError]:
    """A profile edited after `make checksums` is not the one the job reads: the volume holds
    the pinned bytes (make install-tools refuses the edited ones), so whatever is printed from
    the edited file would describe another run. None when the profile is the pinned one, or when
    no SHA256SUMS lists it (a copied folder: make submit compares it with the installed one)."""
    if not profile:
        return None
    folder = launcher.parent
    listing = SUMS if folder.resolve() == BUNDLE.resolve() else folder / "SHA256SUMS"
    name = f"profiles/{profile}.env"
    if not listing.is_file():
        return None
    pinned = sums.read(listing).entries.get(name)
    actual = sha256(folder / name)
    if pinned is None or pinned == actual:
        return None
    return usage("PROF-E007", None, f"{name} changed after `make checksums` (sha256 "
                 f"{actual[:12]}… now, {pinned[:12]}… pinned): the job would read the pinned "
                 "profile, not this one")


def cmd_driver_command(args: argparse.Namespace) -> int:
    root = args.storage_root.rstrip("/") or "/"
    site_profile = site.is_site(args.profile)
    for value, name in ((root, "STORAGE_ROOT"), ("" if site_profile else args.profile, "PROFILE"),
                        (args.bundle_dir, "--bundle-dir")):
        if value and not re.match(r"^[A-Za-z0-9/._-]+$", value):
            print(f"driver-command: {name}={value!r} holds characters a job form would mangle; "
                  "use letters, digits, '/', '.', '_' and '-'", file=sys.stderr)
            return 2
    if args.run_id and not runid.is_run_id(args.run_id):
        print(f"driver-command: RUN_ID={args.run_id!r} {runid.problem(args.run_id)}; set "
              "RUN_ID=<a new name>", file=sys.stderr)
        return 2
    if not root.startswith("/"):
        print(f"driver-command: STORAGE_ROOT={root} is not an absolute path; set it to where the "
              "job mounts the volume, e.g. /mnt/verl-reproduction", file=sys.stderr)
        return 2
    launcher = Path(args.launcher)
    profiles = launcher.parent / "profiles"
    if site_profile:
        try:  # a site profile: pinned below by its own sha256, never by the bundle's hash chain
            pinned = load_profile(args.profile)
        except UsageError as exc:
            say_usage("driver-command", exc)
            return 2
    elif args.profile and not (profiles / f"{args.profile}.env").is_file():
        known = ", ".join(sorted(p.stem for p in profiles.glob("*.env")))
        print(f"driver-command: PROFILE={args.profile} is not a profile of the bundle; set PROFILE= "
              f"to one of: {known}, or name your site's folder: SITE=<folder>", file=sys.stderr)
        return 2
    stale = None if site_profile else stale_profile(launcher, args.profile)
    if stale:
        say_usage("driver-command", stale)
        return 2
    if args.ignored_run_id:
        print(f"driver-command: RUN_ID={args.ignored_run_id} is left out: the Driver command is the "
              "same for every run; put RUN_ID=<a new name> in the job form's environment "
              "variables instead", file=sys.stderr)
    exports = [f"export STORAGE_ROOT={root}"]
    if site_profile:
        exports += [f"export PROFILE={pinned.PROFILE_NAME} PROFILE_SHA256={pinned.sha256}"]
    else:  # a bundle profile: no PROFILE_SHA256 of the job's environment may make it a site one
        exports += [f"export PROFILE={args.profile}; \\unset PROFILE_SHA256" if args.profile
                    else "\\unset PROFILE_SHA256"]
    exports += [f"export RUN_ID={args.run_id}"] if args.run_id else []
    # --bundle-dir: a flat install in that exact folder (make smoke's and the tests' volumes)
    parent, version = (args.bundle_dir.rstrip("/").rsplit("/", 1) if args.bundle_dir
                       else (BUNDLES_REL, version_of(launcher)))
    print(DRIVER.format(exports="\n".join(exports), bundle_parent=parent, version=version,
                        launcher=LAUNCHER_NAME, sha=sha256(launcher),
                        **{key: refusal(*how) for key, how in REFUSALS.items()}))
    return 0
