"""The inputs phase: storage, verl checkout, model and data against the profile's pins.

Runs on the prep box (`make verify-inputs`), in the launcher before preflight, and in a light
form (``deep=False``: manifests, not every byte) inside each node's preflight probe.
"""
from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..formats import bounded, hashing, parquet, sums
from ..run.findings import Check, Finding, Skip, UsageError, finding, mismatch
from ..run.mounts import mount_for
from ..run.phase import run_phase
from ..run.profile import Profile
from . import weights

MAX_MANIFEST = 1 << 20  # dataset-manifest.json is a few hundred bytes


@dataclasses.dataclass
class InputsContext:
    profile: Profile
    storage_root: Path
    verl_root: Path
    model_root: Path
    data_root: Path
    deep: bool = True  # hash every listed file, not only the SHA256SUMS files
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, profile: Profile, storage_root: Path, verl_root: Optional[Path] = None,
              model_root: Optional[Path] = None, data_root: Optional[Path] = None,
              deep: bool = True) -> "InputsContext":
        return cls(profile, Path(storage_root), Path(verl_root or profile.verl_root(storage_root)),
                   Path(model_root or profile.model_root(storage_root)),
                   Path(data_root or profile.data_root(storage_root)), deep)


def check_storage_mount(ctx: InputsContext) -> List[Finding]:
    mount = mount_for(ctx.storage_root)
    ctx.evidence["storage_mount"] = mount
    if mount is None:
        raise Skip("no /proc/self/mountinfo here, so the mount cannot be judged")
    found = []
    if mount["fstype"] == "overlay":
        found.append(finding("INP-E001", str(ctx.storage_root),
                             f"storage is on an overlay mount ({mount['target']}), not a shared "
                             "volume", mount=mount))
    if "ro" in mount["options"].split(","):
        found.append(finding("INP-E002", str(ctx.storage_root),
                             f"storage mount {mount['target']} is read-only", mount=mount))
    return found


def check_storage_writable(ctx: InputsContext) -> List[Finding]:
    try:
        with tempfile.NamedTemporaryFile(dir=str(ctx.storage_root), prefix=".write-probe-"):
            pass
    except OSError as exc:
        return [finding("INP-E002", str(ctx.storage_root),
                        f"cannot create a file in the storage root: {exc.strerror}")]
    return []


def git(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    # safe.directory: a shared volume's checkout is often owned by another uid.
    return subprocess.run(["git", "-c", f"safe.directory={checkout}", "-C", str(checkout), *args],
                          capture_output=True, text=True, check=False)


def check_verl_checkout(ctx: InputsContext) -> List[Finding]:
    root = ctx.verl_root
    if not root.is_dir():
        return [finding("INP-E003", str(root), "the verl checkout folder does not exist")]
    try:
        head = git(root, "rev-parse", "HEAD")
    except FileNotFoundError:
        return [finding("INP-E003", str(root), "git is not installed, so the commit cannot be read")]
    if head.returncode != 0:
        return [finding("INP-E003", str(root), f"not a git work tree: {head.stderr.strip()}")]
    commit = head.stdout.strip()
    ctx.evidence["verl_commit"] = commit
    found = []
    if commit != ctx.profile.VERL_COMMIT:
        found.append(mismatch("INP-E004", str(root), "verl HEAD", ctx.profile.VERL_COMMIT, commit))
    status = git(root, "status", "--porcelain")
    changes = status.stdout.splitlines()
    ctx.evidence["verl_clean"] = status.returncode == 0 and not changes
    if status.returncode != 0 or changes:
        shown = "; ".join(changes[:5]) + (" ..." if len(changes) > 5 else "")
        found.append(finding("INP-E005", str(root),
                             f"{len(changes)} changed or untracked paths: {shown or status.stderr}",
                             changes=changes[:50]))
    return found


def _sums_file(folder: Path, pin: str, what: str, ctx: InputsContext) -> Optional[List[Finding]]:
    """Check that SHA256SUMS exists and hashes to the pin; None means carry on."""
    path = folder / sums.NAME
    if not pin:  # a profile from make new-profile, not pinned yet
        return [finding("INP-E070", str(folder), f"the profile pins no {what} SHA256SUMS yet: "
                        f"make pin-inputs PROFILE={ctx.profile.PROFILE_NAME}")]
    if not path.is_file():
        return [finding("INP-E006", str(folder), f"no SHA256SUMS in the {what} folder")]
    actual = hashing.sha256_file(path)
    ctx.evidence[f"{what}_sums_sha256"] = actual
    if actual != pin:
        return [mismatch("INP-E007", str(path), f"{what} SHA256SUMS sha256", pin, actual)]
    return None


# sums.check_folder's problem kinds -> finding ids
SUMS_FINDINGS = {sums.UNREADABLE: "INP-E024", sums.MALFORMED: "INP-E015", sums.ESCAPES: "INP-E020",
                 sums.DUPLICATE: "INP-E021", sums.SYMLINK_OUT: "INP-E022",
                 sums.NOT_REGULAR: "INP-E023", sums.REQUIRED: "INP-E025",
                 sums.MISSING: "INP-E009", sums.MISMATCH: "INP-E008"}


def required_files(profile: Profile, what: str, folder: Optional[Path] = None) -> List[str]:
    """The files of a folder the run reads, so an empty or partial SHA256SUMS cannot pass."""
    if what == "model":
        if folder is None:
            return ["config.json", profile.MODEL_WEIGHTS]
        return ["config.json", *weights.weight_files(folder, profile.MODEL_WEIGHTS)]
    return ["train.parquet", "test.parquet", "dataset-manifest.json"]


def _verify_folder(folder: Path, pin: str, what: str, ctx: InputsContext) -> List[Finding]:
    found = _sums_file(folder, pin, what, ctx)
    if found is not None:
        return found
    listing, problems = sums.check_folder(folder, required_files(ctx.profile, what, folder), ctx.deep,
                                          label=f"{what} files")
    found = [finding(SUMS_FINDINGS[p.kind], str(folder / p.name) if p.kind != sums.UNREADABLE
                     else p.name, p.message) for p in problems]
    if any(p.kind == sums.UNREADABLE for p in problems):
        return found  # nothing is listed, so every file would look stray
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel != "SHA256SUMS" and rel not in listing.entries and "/.git/" not in f"/{rel}":
            found.append(finding("INP-W001", str(path), "not listed in SHA256SUMS"))
    if ctx.deep:
        ctx.evidence[f"{what}_files_verified"] = len(listing.entries)
    return found


def check_model_files(ctx: InputsContext) -> List[Finding]:
    return _verify_folder(ctx.model_root, ctx.profile.MODEL_SUMS_SHA256, "model", ctx)


def check_data_files(ctx: InputsContext) -> List[Finding]:
    return _verify_folder(ctx.data_root, ctx.profile.DATA_SUMS_SHA256, "data", ctx)


def check_model_weights(ctx: InputsContext) -> List[Finding]:
    return weights.check_weights(ctx.model_root, ctx.profile.MODEL_WEIGHTS, ctx.evidence)


def check_dataset_manifest(ctx: InputsContext) -> List[Finding]:
    path = ctx.data_root / "dataset-manifest.json"
    try:  # a regular file (a FIFO never blocks), at most MAX_MANIFEST bytes, bounded JSON
        manifest = bounded.read_object(path, MAX_MANIFEST)
    except bounded.Unreadable as exc:
        return [finding("INP-E010", str(path), f"cannot read: {exc}")]
    ctx.evidence["dataset_manifest"] = manifest
    revision = manifest.get("revision")
    if revision != ctx.profile.DATASET_REVISION:
        return [mismatch("INP-E011", str(path), "revision", ctx.profile.DATASET_REVISION, revision)]
    return []


def check_parquet_rows(ctx: InputsContext) -> List[Finding]:
    found = []
    rows = {}
    for split, expected in (("train", ctx.profile.TRAIN_ROWS), ("test", ctx.profile.TEST_ROWS)):
        path = ctx.data_root / f"{split}.parquet"
        try:
            footer = parquet.read_footer(path)
        except OSError as exc:
            found.append(finding("INP-E012", str(path), f"cannot read: {exc.strerror}"))
            continue
        except parquet.ParquetError as exc:
            found.append(finding("INP-E012", str(path), str(exc)))
            continue
        rows[split] = footer.num_rows
        if footer.num_rows != expected or sum(footer.row_group_rows) != footer.num_rows:
            found.append(mismatch("INP-E013", str(path), "rows", expected, footer.num_rows,
                                  row_groups=footer.row_group_rows))
        missing = [c for c in parquet.VERL_COLUMNS if c not in footer.columns]
        if missing:
            found.append(finding("INP-E016", str(path), f"columns {missing} are missing "
                                 f"(has {footer.columns})", columns=footer.columns))
    ctx.evidence["parquet_rows"] = rows
    return found


# Each reads the volume on its own: none needs another's result.
CHECKS: List[Check] = [
    Check("storage-mount", check_storage_mount),
    Check("storage-writable", check_storage_writable),
    Check("verl-checkout", check_verl_checkout),
    Check("model-files", check_model_files),
    Check("model-weights", check_model_weights),
    Check("data-files", check_data_files),
    Check("dataset-manifest", check_dataset_manifest),
    Check("parquet-rows", check_parquet_rows),
]


def main(args: argparse.Namespace, profile: Profile) -> int:
    """The inputs phase (make verify-inputs; the launcher, with --output-dir for inputs.json)."""
    if not args.storage_root.is_dir():
        raise UsageError(f"storage root {args.storage_root} is not a directory: mount the shared "
                         "volume and set PREP_ROOT= to its path on this box (--storage-root)")
    ctx = InputsContext.build(profile, args.storage_root, args.verl_root, args.model_root,
                              args.data_root)
    code, _ = run_phase("inputs", f"profile {profile.PROFILE_NAME}, storage {ctx.storage_root}",
                        CHECKS, ctx, args.output_dir, "inputs.json", lambda: {"profile": profile.PROFILE_NAME,
                                                      "storage_root": str(ctx.storage_root),
                                                      "evidence": ctx.evidence})
    return code
