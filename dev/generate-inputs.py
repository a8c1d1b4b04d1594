#!/usr/bin/env python3
"""Summary: Generate a self-contained storage root for the smoke run: verl, a tiny model, data.

Usage: dev/generate-inputs.py --storage-root DIR --profile smoke-1x1 --verl-wheel WHEEL
       dev/generate-inputs.py --storage-root DIR --profile FILE --verl-source DIR [--unpinned]

Nothing comes from a hub: a tiny random Qwen2 with a locally trained tokenizer, synthetic
GSM8K-format parquet, and verl as a git checkout committed with a fixed identity and date.
Everything is deterministic, so the smoke profile pins fixed hashes; a mismatch is an error.
Exit codes: 0 written or already there, 1 output differs from the pins, 2 usage error.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

# Path bootstrap: the repo root (prep/, dev/) and the bundle's own twgrpo package.
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]

from dev.synth import model, wordproblems  # noqa: E402
from prep.volume import gsm8k, layout, parquetwrite, verltree  # noqa: E402
from twgrpo.formats import hashing  # noqa: E402
from twgrpo.run.findings import UsageError  # noqa: E402
from twgrpo.run.profile import load_profile  # noqa: E402

SEED = 20261202
CONVERTER = "two-worker-grpo synthetic-gsm8k 1"
GITIGNORE = "__pycache__/\n*.pyc\n"


def build_verl(profile, root: Path, wheel: Path, source: Path) -> str:
    """verl's package as a git checkout under code/verl/<commit>/; returns the commit."""
    final = profile.verl_root(root)
    staging = layout.staging_for(final.parent / "incoming")
    if wheel:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith("verl/") and not member.endswith("/"):
                    target = staging / member
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
        message = f"verl package from {wheel.name}"
    else:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        message = f"verl stand-in from {source.name}"
    (staging / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    commit = layout.commit_tree(staging, message)
    print(f"generate-inputs: verl {layout.publish(staging, final.parent / commit)}: "
          f"code/verl/{commit}")
    try:  # the tree pinned by content, as prepare-inputs and pin-inputs do
        verltree.ensure_manifest(final.parent / commit, commit)
    except verltree.TreeError as exc:
        raise layout.LayoutError(str(exc)) from None
    return commit


def build_model(profile, root: Path, corpus) -> None:
    final = profile.model_root(root)
    staging = layout.staging_for(final)
    model.write_model(staging, SEED, corpus)
    layout.write_sums(staging)
    print(f"generate-inputs: model {layout.publish(staging, final)}: {final.relative_to(root)}")


def build_data(profile, root: Path, splits) -> None:
    final = profile.data_root(root)
    staging = layout.staging_for(final)
    rows = {}
    for split, problems in splits.items():
        table = [gsm8k.to_verl_row(q, a, split, i) for i, (q, a) in enumerate(problems)]
        parquetwrite.write_table(staging / f"{split}.parquet", parquetwrite.VERL_GSM8K_FIELDS, table)
        rows[split] = len(table)
    manifest = {"source": "synthetic", "dataset_id": profile.DATASET_ID,
                "revision": profile.DATASET_REVISION, "variant": profile.DATASET_VARIANT,
                "converter": CONVERTER, "seed": SEED, "rows": rows}
    (staging / "dataset-manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True)
                                                    + "\n", encoding="utf-8")
    layout.write_sums(staging)
    print(f"generate-inputs: data {layout.publish(staging, final)}: {final.relative_to(root)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="generate-inputs.py", description=__doc__.splitlines()[0])
    parser.add_argument("--storage-root", type=Path, required=True)
    parser.add_argument("--profile", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--verl-wheel", type=Path, help="verl-0.6.0-py3-none-any.whl")
    source.add_argument("--verl-source", type=Path, help="a folder to commit as the verl checkout")
    parser.add_argument("--unpinned", action="store_true",
                        help="accept the commit that comes out (test profiles pin it afterwards)")
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile)
    except UsageError as exc:
        print(f"generate-inputs: {exc}", file=sys.stderr)
        return 2
    for path in (args.verl_wheel, args.verl_source):
        if path is not None and not path.exists():
            print(f"generate-inputs: {path} does not exist", file=sys.stderr)
            return 2
    root = args.storage_root
    root.mkdir(parents=True, exist_ok=True)
    splits = {"train": wordproblems.synthetic_split(SEED, "train", profile.TRAIN_ROWS),
              "test": wordproblems.synthetic_split(SEED, "test", profile.TEST_ROWS)}
    corpus = [f"{q} {gsm8k.INSTRUCTION}\n{a}" for rows in splits.values() for q, a in rows]
    try:
        commit = build_verl(profile, root, args.verl_wheel, args.verl_source)
        build_model(profile, root, corpus)
        build_data(profile, root, splits)
    except layout.LayoutError as exc:
        print(f"generate-inputs: {exc}", file=sys.stderr)
        return 1
    problems = []
    if commit != profile.VERL_COMMIT and not args.unpinned:
        problems.append(f"verl commit: profile pins {profile.VERL_COMMIT}, generated {commit}")
    verl_sums = verltree.manifest_path(profile.verl_root(root).parent / commit)
    for what, folder, pin in (("verl tree", verl_sums, profile.VERL_SUMS_SHA256),
                              ("model", profile.model_root(root), profile.MODEL_SUMS_SHA256),
                              ("data", profile.data_root(root), profile.DATA_SUMS_SHA256)):
        actual = hashing.sha256_file(folder if folder.is_file() else folder / "SHA256SUMS")
        if actual != pin and not args.unpinned:
            problems.append(f"{what} SHA256SUMS: profile pins {pin}, generated {actual}")
    for problem in problems:
        print(f"generate-inputs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
