#!/usr/bin/env python3
"""Summary: Start a profile of your own from an existing one, with no input pins to fake.

Usage: prep/new-profile.py --from PROFILE --name NAME [--site DIR] [--set KEY=value ...]

Writes DIR/<NAME>.env with --site (make SITE=: your site's folder outside the checkout, see
prep/site.py; FROM may then name a profile there too), else the bundle's
tools/verl/two-worker-grpo/profiles/<NAME>.env: FROM's lines with PROFILE_NAME=NAME and
each --set value, and without the input pins (the SHA256SUMS hashes and the data's row counts
TRAIN_ROWS, TEST_ROWS), which only make pin-inputs writes, from inputs it has checked and
measured. Until then verify-inputs and check-profile say so (INP-E070). A profile that exists is
never replaced.
Exit codes: 0 written, 1 NAME exists, 2 usage error or an invalid result.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]

from twgrpo.run.findings import UsageError  # noqa: E402
from twgrpo.run.profile import PROFILE_DIR, load_profile, parse_profile_text  # noqa: E402
from twgrpo.run.profile_keys import LINE, NAME, PINS  # noqa: E402


def new_profile_text(source: Path, name: str, values: dict) -> str:
    """source's lines with PROFILE_NAME=name, values set (in place, or appended) and no pins;
    its leading comment block is replaced by one that says where the profile came from."""
    out = [f"# Made by make new-profile from {source.stem}: set what differs, then make "
           f"prepare-inputs, make pin-inputs PROFILE={name} (it writes "
           f"{', '.join(PINS)}), make checksums."]
    seen, header = set(), True
    for line in source.read_text(encoding="utf-8").splitlines():
        match = LINE.match(line.strip())
        key = match.group(1) if match else None
        header = header and key is None
        if header:  # the source's own description, which no longer describes this profile
            continue
        if key in PINS:
            continue
        if key == "PROFILE_NAME":
            line = f"PROFILE_NAME={name}"
        elif key in values:
            line = f"{key}={values[key]}"
            seen.add(key)
        out.append(line)
    out += [f"{key}={value}" for key, value in values.items() if key not in seen]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="new-profile.py", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default="", help="the profile to start from")
    parser.add_argument("--name", default="", help="the new profile's name")
    parser.add_argument("--site", default="", help="your site's folder of profiles (make SITE=)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=value")
    args = parser.parse_args(argv)
    if not args.name or not NAME.match(args.name):
        print(f"new-profile: NAME={args.name!r} must be a name of letters, digits, '.', '_' and "
              "'-' — e.g. make new-profile FROM=tutorial-2x2-a100 NAME=h100-4x8", file=sys.stderr)
        return 2
    values = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key in PINS or key == "PROFILE_NAME":
            print(f"new-profile: --set {item!r}: give KEY=value for a key other than "
                  f"PROFILE_NAME and {', '.join(PINS)}", file=sys.stderr)
            return 2
        values[key] = value
    site = Path(args.site).absolute() if args.site else None
    try:  # the site's folder is made on first use; it holds nothing of the checkout's
        if site is not None:
            site.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"new-profile: SITE={args.site} cannot be a folder of profiles: {exc.strerror} — "
              "name a folder you can write, outside the checkout", file=sys.stderr)
        return 2
    target = (site or PROFILE_DIR) / f"{args.name}.env"
    mine = site / f"{args.source}.env" if site is not None and args.source else None
    try:
        source = load_profile(str(mine) if mine is not None and mine.is_file() else args.source or None)
        text = new_profile_text(source.path, args.name, values)
        parse_profile_text(text, str(target))  # the result must be a valid profile
    except UsageError as exc:
        print(f"new-profile: {exc}", file=sys.stderr)
        return 2
    if target.exists():
        print(f"new-profile: {target} exists; nothing was changed. Pick another NAME, or edit "
              "that profile.", file=sys.stderr)
        return 1
    target.write_text(text, encoding="utf-8")
    knobs = f"PROFILE={args.name}" + (f" SITE={args.site}" if site is not None else "")
    install = f"install-tools SITE={args.site}" if site is not None else "checksums install-tools"
    print(f"new-profile: wrote {target} from {source.PROFILE_NAME}, without input pins.\n"
          f"  next: edit what differs (NODES, GPUS_PER_NODE, GPU_MODEL, MODEL_*, sizes), then\n"
          f"  make check-profile {knobs}\n"
          f"  make prepare-inputs {knobs} PREP_ROOT=<volume>\n"
          f"  make pin-inputs {knobs} PREP_ROOT=<volume>\n"
          f"  make {install} PREP_ROOT=<volume>")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
