"""Read the pins of inputs on a volume: commit, manifest hashes, revision, row counts."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

from twgrpo.formats import hashing, parquet, sums
from twgrpo.checks.inputs.inputs import required_files
from twgrpo.run.profile import Profile

from . import verltree


class UnsafeFolder(ValueError):
    """A folder whose SHA256SUMS the inputs check would refuse: it is never pinned."""


def refuse_unsafe(folder: Path, required: list) -> None:
    """Raise UnsafeFolder unless every entry of folder/SHA256SUMS is sound and matches."""
    _, problems = sums.check_folder(folder, required, label=folder.name)
    if problems:
        shown = "; ".join(f"{p.name}: {p.message}" for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise UnsafeFolder(f"{folder}/SHA256SUMS cannot be pinned: {shown}{more}")


def read_pins(profile: Profile, root: Path) -> Dict[str, str]:
    """The values a profile must hold to pin what is under ``root`` in its layout."""
    data = profile.data_root(root)
    refuse_unsafe(profile.model_root(root), required_files(profile, "model", profile.model_root(root)))
    refuse_unsafe(data, required_files(profile, "data"))
    manifest = json.loads((data / "dataset-manifest.json").read_text(encoding="utf-8"))
    verl_parent = profile.verl_root(root).parent
    checkouts = sorted(p.name for p in verl_parent.iterdir() if (p / ".git").exists()) \
        if verl_parent.is_dir() else []
    checkout = verl_parent / checkouts[0] if profile.VERL_COMMIT not in checkouts and \
        len(checkouts) == 1 else profile.verl_root(root)
    try:  # git with the checkout's own config neutralised; then every file checked by content
        commit = verltree.safe_git(checkout, "rev-parse", "--verify", "HEAD^{commit}").strip()
        tree_sha = verltree.ensure_manifest(checkout, commit)
    except verltree.TreeError as exc:
        raise UnsafeFolder(f"verl cannot be pinned: {exc}") from None
    if checkout.name != commit:
        raise UnsafeFolder(f"{checkout} holds commit {commit}: the folder must be named after "
                           "its commit (code/verl/<commit>/)")
    pins = {
        "VERL_COMMIT": commit,
        "VERL_SUMS_SHA256": tree_sha,
        "MODEL_SUMS_SHA256": hashing.sha256_file(profile.model_root(root) / "SHA256SUMS"),
        "DATA_SUMS_SHA256": hashing.sha256_file(data / "SHA256SUMS"),
        "DATASET_REVISION": str(manifest["revision"]),
        "TRAIN_ROWS": str(parquet.read_footer(data / "train.parquet").num_rows),
        "TEST_ROWS": str(parquet.read_footer(data / "test.parquet").num_rows),
    }
    reward = profile.reward_path(root)
    if reward is not None:  # hashed as the inputs phase will hash it: a regular file, no link
        if reward.is_symlink() or not reward.is_file():
            raise UnsafeFolder(f"REWARD_FILE {reward} is not a regular file: put the reward "
                               "function there (not a link), then pin again")
        pins["REWARD_SHA256"] = hashing.sha256_file(reward)
    converter = profile.converter_path(root)
    if converter is not None:  # pinned only as the script that made the data on the volume
        if converter.is_symlink() or not converter.is_file():
            raise UnsafeFolder(f"DATA_CONVERTER {converter} is not a regular file: put the "
                               "converter there (not a link), make prepare-inputs, then pin again")
        digest = hashing.sha256_file(converter)
        if manifest.get("converter_sha256") != digest:
            raise UnsafeFolder(f"DATA_CONVERTER {converter} (sha256 {digest}) did not make the data "
                               f"in {data} (its dataset-manifest.json records "
                               f"{manifest.get('converter', 'another converter')}): move that "
                               "folder aside and make prepare-inputs with it")
        pins["DATA_CONVERTER_SHA256"] = digest
    return pins


def profile_text(profile: Profile, name: str, values: Dict[str, str], header: str) -> str:
    """The profile's file with ``values`` replaced and PROFILE_NAME set, comments kept."""
    out = [f"# {line}" if line else "#" for line in header.splitlines()]
    seen = set()
    for line in profile.path.read_text(encoding="utf-8").splitlines():
        key = line.split("=", 1)[0]
        if key == "PROFILE_NAME":
            line = f"PROFILE_NAME={name}"
        elif "=" in line and not line.startswith("#") and key in values:
            line = f"{key}={values[key]}"
            seen.add(key)
        out.append(line)
    out += [f"{k}={v}" for k, v in values.items() if k not in seen and k != "PROFILE_NAME"]
    return "\n".join(out) + "\n"


def changed_pins(profile: Profile, values: Dict[str, str]) -> list:
    """'KEY: old -> new' for each value the profile already holds differently (an absent pin, as
    make new-profile leaves it, is filled in, not changed)."""
    return [f"{key}: {profile.values[key]} -> {value}" for key, value in values.items()
            if profile.values.get(key) and profile.values[key] != value]
