#!/usr/bin/env python3
"""Summary: Put the profile's verl, model and data on the volume in the layout the bundle checks.

Usage: prep/prepare-inputs.py prepare --prep-root ROOT [--profile NAME] [--verl-mirror URL_OR_PATH]
                                      [--model-source DIR] [--gsm8k-source DIR] [--data-source PATH]
       prep/prepare-inputs.py pin --prep-root ROOT [--profile NAME] [--name NAME] [--force]

prepare (make prepare-inputs), on the prep box, which may reach the network:
  verl   git clone of --verl-mirror (a URL or a local path; default the profile's VERL_REPO_URL)
         checked out at VERL_COMMIT into code/verl/<commit>/, HEAD verified.
  model  --model-source (a local folder) copied, or the MODEL_HUB client's snapshot of MODEL_ID
         at MODEL_REVISION (modelscope, or huggingface_hub for MODEL_HUB=huggingface); then
         SHA256SUMS over every file.
  GSM8K  --gsm8k-source (a folder with train and test as .jsonl or .parquet of GSM8K's main
         config), or the Hugging Face snapshot of DATASET_ID at DATASET_REVISION; converted to
         verl v0.6 rows by our converter, with SHA256SUMS and dataset-manifest.json.
  data   or, when the profile sets DATA_CONVERTER (a script under ROOT): python3 SCRIPT OUT_DIR
         [SOURCE] writes train.parquet and test.parquet into OUT_DIR, SOURCE being --data-source,
         or without it (DATASET_HUB=huggingface) the Hugging Face dataset repo DATASET_ID at
         DATASET_REVISION, downloaded whole; rows verl cannot read
         (data_source, prompt messages, reward_model.ground_truth) are refused; the manifest
         records the script's sha256, which pin writes into DATA_CONVERTER_SHA256.
  Each part is staged beside its final folder and published by one rename, so an interrupted
  run is redone; a finished part is verified and kept; a part that differs is never
  overwritten: it is reported with what to do.
pin (make pin-inputs) writes the prepared inputs' hashes, revision and row counts (measured
  from the parquet footers) into
  profiles/<name>.env (default: --profile's own, in place; local.env without --profile; a site
  profile's folder for a site profile); a pin that differs from one already there is replaced
  only with --force. Then `make checksums` (a site profile: make install-tools SITE=<folder>).
Exit codes: 0 done, 1 a part failed or differs, 2 usage error or a missing tool.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

# Path bootstrap: the repo root (prep/, dev/) and the bundle's own twgrpo package.
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]

from prep import site  # noqa: E402
from prep.volume import layout, pin  # noqa: E402
from prep.volume.data_input import prepare_data  # noqa: E402
from prep.volume.model_input import prepare_model  # noqa: E402
from prep.volume.prepared import PrepareError, say  # noqa: E402
from prep.volume.verl_input import prepare_verl  # noqa: E402
from twgrpo.run.findings import UsageError, say_usage  # noqa: E402
from twgrpo.run.profile import PROFILE_DIR, Profile, load_profile  # noqa: E402
from twgrpo.run.records import RecordError, write_text  # noqa: E402


def cmd_prepare(args: argparse.Namespace, profile: Profile) -> int:
    root = args.prep_root
    sources = {"verl": args.verl_mirror or profile.VERL_REPO_URL, "model": args.model_source,
               "data": args.data_source if profile.DATA_CONVERTER else args.gsm8k_source}
    failures = 0
    for name, step in (("verl", prepare_verl), ("model", prepare_model), ("data", prepare_data)):
        try:
            say(f"{name}: {step(profile, root, sources[name])}")
        except (PrepareError, layout.LayoutError) as exc:
            say_usage(f"prepare-inputs: {name}", exc)
            failures += 1
    if failures:
        return 1
    say(f"done; check them with: make verify-inputs PREP_ROOT={root}"
        + (f" PROFILE={args.profile}" if args.profile else "")
        + (" (then pin them: make pin-inputs)" if site.is_site(args.profile) else
           " (fresh downloads differ from the tutorial's pins: make pin-inputs, then make checksums)"))
    return 0


def cmd_pin(args: argparse.Namespace, profile: Profile) -> int:
    try:
        values = pin.read_pins(profile, args.prep_root)
    except pin.UnsafeFolder as exc:
        print(f"prepare-inputs: {exc} — nothing was pinned; prepare the folder again "
              "(make prepare-inputs) so that SHA256SUMS lists its own regular files once each",
              file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, layout.LayoutError) as exc:
        print(f"prepare-inputs: cannot read the inputs' pins under {args.prep_root}: {exc} — "
              "run make prepare-inputs first", file=sys.stderr)
        return 1
    # Into the named profile (PROFILE=<name>), or local.env when the default profile was used.
    name = args.name or (profile.PROFILE_NAME if args.profile else "local")
    mine = site.is_site(args.profile)
    target = (profile.path.parent if mine else PROFILE_DIR) / f"{name}.env"
    in_place = target.resolve() == profile.path.resolve()
    text = pin.profile_text(profile, name, values, "" if in_place else
                            f"Pinned by make pin-inputs from {profile.PROFILE_NAME} and the inputs "
                            f"prepared under {args.prep_root}.")
    differs = (pin.changed_pins(profile, values) if in_place else
               target.exists() and target.read_text(encoding="utf-8") != text)
    if differs and not args.force:
        shown = "; ".join(differs) if isinstance(differs, list) else "it holds other lines"
        print(f"prepare-inputs: {target} exists with other pins ({shown}); nothing was changed. "
              "Pass FORCE=1 to replace them, or NAME=<another profile>.", file=sys.stderr)
        return 1
    try:
        write_text(target, text)  # refused unless absent or a regular file (never a device)
    except RecordError as exc:
        say_usage("prepare-inputs", exc)  # the line, then the catalog's HINT
        return 1
    then = f"make verify-inputs PROFILE={name} SITE={target.parent}" if mine else \
        f"make checksums && make verify-inputs PROFILE={name}"
    say(f"wrote {target}; now run: {then} PREP_ROOT={args.prep_root}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prepare-inputs.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("prepare", "pin"):
        p = sub.add_parser(name)
        p.add_argument("--prep-root", type=Path, required=True)
        p.add_argument("--profile", default="")
        if name == "pin":
            p.add_argument("--name", default="", help="the profile to write (default: --profile's "
                           "own, or local when --profile is empty)")
            p.add_argument("--force", action="store_true", help="replace a profile with other pins")
        else:
            p.add_argument("--verl-mirror", default="", help="clone verl from here (URL or path)")
            p.add_argument("--model-source", default="", help="copy the model from this folder")
            p.add_argument("--gsm8k-source", default="", help="convert GSM8K from this folder")
            p.add_argument("--data-source", default="", help="with the profile's DATA_CONVERTER: "
                           "its second argument (a file or folder it converts)")
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile or None)
    except UsageError as exc:
        say_usage("prepare-inputs", exc)
        return 2
    if not args.prep_root.is_dir():
        print(f"prepare-inputs: PREP_ROOT {args.prep_root} is not a directory — mount the shared "
              "volume and pass its path", file=sys.stderr)
        return 2
    if shutil.which("git") is None:
        print("prepare-inputs: git is not installed — apt-get install git", file=sys.stderr)
        return 2
    return cmd_prepare(args, profile) if args.command == "prepare" else cmd_pin(args, profile)


if __name__ == "__main__":
    raise SystemExit(main())
