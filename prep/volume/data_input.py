"""The data on the volume: GSM8K (a local copy or the Hugging Face snapshot) converted to verl
rows by the bundle, or the profile's DATA_CONVERTER run and its output refused unless verl can
read it; with SHA256SUMS and dataset-manifest.json."""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from prep.volume import gsm8k, layout, parquetwrite
from prep.volume.prepared import PrepareError, keep_if_verified, say
from twgrpo.checks.inputs.inputs import missing_verl_fields
from twgrpo.checks.inputs.reward import hash_script
from twgrpo.formats import parquet
from twgrpo.run.findings import usage
from twgrpo.run.profile import Profile

CONVERTER = "two-worker-grpo gsm8k-to-verl 1"


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
            made = usage("INP-E016", None, f"{split}.parquet from DATA_CONVERTER "
                         f"{profile.DATA_CONVERTER}: {what}; nothing was published")
            raise PrepareError(str(made), made.fid, made.hint)
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
