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
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

# Path bootstrap: the repo root (prep/, dev/) and the bundle's own twgrpo package.
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools" / "verl" / "two-worker-grpo")]

from prep import site  # noqa: E402
from prep.volume import gsm8k, layout, parquetwrite, pin, verltree  # noqa: E402
from twgrpo.checks.inputs import missing_verl_fields  # noqa: E402
from twgrpo.checks.reward import hash_script  # noqa: E402
from twgrpo.formats import parquet, sums  # noqa: E402
from twgrpo.run.findings import UsageError  # noqa: E402
from twgrpo.run.profile import PROFILE_DIR, Profile, load_profile  # noqa: E402
from twgrpo.run.records import RecordError, write_text  # noqa: E402

CONVERTER = "two-worker-grpo gsm8k-to-verl 1"


class PrepareError(Exception):
    """A part could not be prepared; the message says what to do (exit 1)."""


def say(message: str) -> None:
    print(f"prepare-inputs: {message}", flush=True)


# ------------------------------------------------------------------------------------- verl
def verl_problem(checkout: Path, commit: str) -> str:
    """'' if checkout's files are exactly the commit's tracked files (by content), else what is
    wrong; git runs with the checkout's own config neutralised (verltree.safe_git)."""
    try:
        verltree.tree_manifest(checkout, commit)
    except verltree.TreeError as exc:
        return str(exc)
    return ""


def prepare_verl(profile: Profile, root: Path, source: str) -> str:
    final = profile.verl_root(root)
    if final.exists():
        problem = verl_problem(final, profile.VERL_COMMIT)
        if problem:
            raise PrepareError(f"{final} exists but {problem}; nothing was changed. Fix or move it "
                               "aside, then run prepare-inputs again.")
        return "kept (its files are the pinned commit's), " + _manifest(final, profile)
    staging = layout.staging_for(final)
    staging.rmdir()  # git clone wants to create it
    say(f"verl: cloning {source}")
    clone = subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(staging)],
                           capture_output=True, text=True)
    if clone.returncode:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"git clone {source} failed: {clone.stderr.strip()} — check the "
                           "network, or pass VERL_MIRROR=<a local clone>")
    try:
        layout.git(staging, "checkout", "--quiet", "--detach", profile.VERL_COMMIT)
    except layout.LayoutError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"{source} has no commit {profile.VERL_COMMIT}: {exc}")
    problem = verl_problem(staging, profile.VERL_COMMIT)
    if problem:
        raise PrepareError(f"the fresh checkout is wrong: {problem}")
    return layout.publish(staging, final) + ", " + _manifest(final, profile)


def _manifest(checkout: Path, profile: Profile) -> str:
    """Write (or keep) code/verl/<commit>.SHA256SUMS; what happened, for the log."""
    try:
        digest = verltree.ensure_manifest(checkout, profile.VERL_COMMIT)
    except verltree.TreeError as exc:
        raise PrepareError(str(exc)) from None
    pinned = "matches the profile's pin" if digest == profile.VERL_SUMS_SHA256 else \
        f"sha256 {digest} (the profile pins {profile.VERL_SUMS_SHA256 or 'none'}: make pin-inputs)"
    return f"tree manifest {verltree.manifest_path(checkout).name} {pinned}"


# ------------------------------------------------------------------------------------ model
def folder_problems(folder: Path) -> List[str]:
    """Files that do not match the folder's own SHA256SUMS (empty: it verifies)."""
    if not (folder / sums.NAME).is_file():
        return ["no SHA256SUMS"]
    return [f"{p.name}: {p.message}" for p in sums.check_folder(folder, label=folder.name)[1]]


def keep_if_verified(final: Path, what: str) -> bool:
    if not final.exists():
        return False
    problems = folder_problems(final)
    if problems:
        raise PrepareError(f"{final} exists but does not verify ({'; '.join(problems[:3])}); "
                           f"nothing was changed. Move it aside to prepare the {what} again.")
    return True


# MODEL_HUB -> (the client's module, its pip package, the hub's name)
MODEL_CLIENTS = {"modelscope": ("modelscope", "modelscope", "ModelScope"),
                 "huggingface": ("huggingface_hub", "huggingface_hub", "Hugging Face")}


def download_model(profile: Profile, staging: Path) -> None:
    client = MODEL_CLIENTS.get(profile.MODEL_HUB)
    if client is None:
        raise PrepareError(f"MODEL_HUB={profile.MODEL_HUB} has no download client here (known: "
                           f"{', '.join(MODEL_CLIENTS)}): pass MODEL_SOURCE=<a local copy of the "
                           "model folder>")
    module, package, hub = client
    try:
        snapshot_download = __import__(module, fromlist=["snapshot_download"]).snapshot_download
    except (ImportError, AttributeError):
        raise PrepareError(f"the {package} client is not installed: pip install {package}, or "
                           "pass MODEL_SOURCE=<a local copy of the model folder>") from None
    say(f"model: downloading {profile.MODEL_ID} at {profile.MODEL_REVISION} from {hub}")
    try:
        snapshot_download(profile.MODEL_ID, revision=profile.MODEL_REVISION, local_dir=str(staging))
    except Exception as exc:  # the client raises many kinds; all mean the same to us
        raise PrepareError(f"{hub} download failed: {exc} — check the network, or pass "
                           "MODEL_SOURCE=<a local copy>") from None


def prepare_model(profile: Profile, root: Path, source: str) -> str:
    final = profile.model_root(root)
    if keep_if_verified(final, "model"):
        return "kept (verified against its SHA256SUMS)"
    staging = layout.staging_for(final)
    if source:
        say(f"model: copying {source}")
        shutil.copytree(source, staging, dirs_exist_ok=True)
        (staging / "SHA256SUMS").unlink(missing_ok=True)  # written fresh below, over every file
    else:
        download_model(profile, staging)
    for cache in (staging / ".msc", staging / ".mv", staging / "._____temp",  # client bookkeeping
                  staging / ".cache"):
        if cache.is_dir():
            shutil.rmtree(cache)
        elif cache.exists():
            cache.unlink()
    layout.write_sums(staging)
    return layout.publish(staging, final)


# ------------------------------------------------------------------------------------ GSM8K
def read_split(folder: Path, split: str) -> List[Tuple[str, str]]:
    """(question, answer) rows of one split, from .jsonl (stdlib) or .parquet (needs pyarrow)."""
    candidates = [folder / f"{split}.jsonl", *sorted(folder.glob(f"main/{split}-*.parquet")),
                  folder / f"{split}.parquet"]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise PrepareError(f"{folder} has no {split}.jsonl, {split}.parquet or main/{split}-*.parquet")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise PrepareError(f"reading {path} needs pyarrow: pip install pyarrow, or give "
                               "GSM8K_SOURCE as .jsonl files") from None
        rows = pq.read_table(path, columns=["question", "answer"]).to_pylist()
    return [(row["question"], row["answer"]) for row in rows]


def download_gsm8k(profile: Profile, into: Path) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise PrepareError("the huggingface_hub client is not installed: pip install "
                           "huggingface_hub pyarrow, or pass GSM8K_SOURCE=<a local copy>") from None
    say(f"data: downloading {profile.DATASET_ID} at {profile.DATASET_REVISION} from Hugging Face")
    try:
        return Path(snapshot_download(profile.DATASET_ID, repo_type="dataset",
                                      revision=profile.DATASET_REVISION, allow_patterns=["main/*"],
                                      local_dir=str(into)))
    except Exception as exc:
        raise PrepareError(f"Hugging Face download failed: {exc} — check the network, or pass "
                           "GSM8K_SOURCE=<a local copy>") from None


def download_dataset(profile: Profile, into: Path) -> Path:
    """The Hugging Face dataset repo DATASET_ID at DATASET_REVISION (a commit, so the bytes a
    converter reads are pinned), whole, for DATA_CONVERTER to read."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise PrepareError("the huggingface_hub client is not installed: pip install "
                           "huggingface_hub, or pass DATA_SOURCE=<a local copy>") from None
    say(f"data: downloading {profile.DATASET_ID} at {profile.DATASET_REVISION} from Hugging Face "
        f"for {profile.DATA_CONVERTER}")
    shutil.rmtree(into, ignore_errors=True)
    try:
        return Path(snapshot_download(profile.DATASET_ID, repo_type="dataset",
                                      revision=profile.DATASET_REVISION, local_dir=str(into)))
    except Exception as exc:
        shutil.rmtree(into, ignore_errors=True)
        raise PrepareError(f"Hugging Face download of {profile.DATASET_ID} at "
                           f"{profile.DATASET_REVISION} failed: {exc} — check the network and the "
                           "revision, or pass DATA_SOURCE=<a local copy>") from None


def convert_with_script(profile: Profile, root: Path, source: str, staging: Path) -> Dict[str, object]:
    """Run DATA_CONVERTER (python3 SCRIPT OUT_DIR [SOURCE]) into staging, refuse what verl could not
    read; the manifest's converter fields, with the sha256 of the script that ran."""
    script = profile.converter_path(root)
    digest, problem = hash_script(script, "DATA_CONVERTER")
    if digest is None:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"{script}: {problem} — put your converter there (a regular file, "
                           "relative to PREP_ROOT)")
    command = [sys.executable, str(script), str(staging)] + ([source] if source else [])
    say(f"data: running {' '.join(shlex.quote(word) for word in command)}")
    if subprocess.run(command, cwd=str(staging)).returncode:
        shutil.rmtree(staging, ignore_errors=True)
        raise PrepareError(f"DATA_CONVERTER {profile.DATA_CONVERTER} failed (its output is above); "
                           "nothing was published")
    counts: Dict[str, int] = {}
    for split in ("train", "test"):
        path = staging / f"{split}.parquet"
        try:
            footer = parquet.read_footer(path)
        except (OSError, parquet.ParquetError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise PrepareError(f"DATA_CONVERTER {profile.DATA_CONVERTER} wrote no readable "
                               f"{split}.parquet into the folder it was given: {exc}") from None
        missing = missing_verl_fields(footer)
        if missing or not footer.num_rows:
            shutil.rmtree(staging, ignore_errors=True)
            what = f"verl cannot read its rows: {', '.join(missing)} missing (has columns " \
                   f"{footer.columns})" if missing else "it has no rows"
            raise PrepareError(f"(INP-E016) {split}.parquet from DATA_CONVERTER "
                               f"{profile.DATA_CONVERTER}: {what}; nothing was published — write "
                               "them in the converter (docs/your-cluster.md has an example)")
        counts[split] = footer.num_rows
        say(f"data: {split}: {footer.num_rows} rows written by {profile.DATA_CONVERTER}")
    return {"converter": f"{profile.DATA_CONVERTER} sha256 {digest}", "converter_sha256": digest,
            "rows": counts}


def prepare_data(profile: Profile, root: Path, source: str) -> str:
    final = profile.data_root(root)
    if keep_if_verified(final, "data"):
        return "kept (verified against its SHA256SUMS)"
    staging = layout.staging_for(final)
    if profile.DATA_CONVERTER:
        origin = source
        if not source and profile.DATASET_HUB == "huggingface":  # the repo at its revision
            try:
                origin = str(download_dataset(profile, staging.parent / f".{staging.name}.download"))
            except PrepareError:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        try:
            made = convert_with_script(profile, root, origin, staging)
        finally:
            if origin != source:
                shutil.rmtree(origin, ignore_errors=True)
        where = source or (f"huggingface:{profile.DATASET_ID}@{profile.DATASET_REVISION}"
                           if origin else "")
        return _publish_data(profile, where, made, staging, final)
    origin = Path(source) if source else download_gsm8k(profile, staging / ".download")
    counts: Dict[str, int] = {}
    for split in ("train", "test"):
        try:
            table = [gsm8k.to_verl_row(q, a, split, i) for i, (q, a) in enumerate(read_split(origin, split))]
        except gsm8k.ConversionError as exc:
            raise PrepareError(f"{split}: {exc}") from None
        parquetwrite.write_table(staging / f"{split}.parquet", parquetwrite.VERL_GSM8K_FIELDS, table)
        counts[split] = len(table)
        say(f"data: {split}: {len(table)} rows converted")
    shutil.rmtree(staging / ".download", ignore_errors=True)
    return _publish_data(profile, source or f"huggingface:{profile.DATASET_ID}",
                         {"converter": CONVERTER, "rows": counts}, staging, final)


def _publish_data(profile: Profile, source: str, made: Dict[str, object], staging: Path,
                  final: Path) -> str:
    manifest = {"source": source, "dataset_id": profile.DATASET_ID,
                "revision": profile.DATASET_REVISION, "variant": profile.DATASET_VARIANT, **made}
    (staging / "dataset-manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                                   encoding="utf-8")
    layout.write_sums(staging)
    return layout.publish(staging, final)


# -------------------------------------------------------------------------------- commands
def cmd_prepare(args: argparse.Namespace, profile: Profile) -> int:
    root = args.prep_root
    sources = {"verl": args.verl_mirror or profile.VERL_REPO_URL, "model": args.model_source,
               "data": args.data_source if profile.DATA_CONVERTER else args.gsm8k_source}
    failures = 0
    for name, step in (("verl", prepare_verl), ("model", prepare_model), ("data", prepare_data)):
        try:
            say(f"{name}: {step(profile, root, sources[name])}")
        except (PrepareError, layout.LayoutError) as exc:
            print(f"prepare-inputs: {name}: {exc}", file=sys.stderr)
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
        print(f"prepare-inputs: {exc}", file=sys.stderr)
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
        print(f"prepare-inputs: {exc}", file=sys.stderr)
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
