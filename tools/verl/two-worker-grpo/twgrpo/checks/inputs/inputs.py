"""The inputs phase: storage, verl checkout, model and data against the profile's pins.

Runs on the prep box (`make verify-inputs`), in the launcher before preflight, and in a light
form (``deep=False``: manifests, not every byte) inside each node's preflight probe.
"""
from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...formats import bounded, hashing, parquet, sums
from ...run.findings import Check, Finding, Skip, UsageError, finding, mismatch
from ...run.mounts import mount_for
from ...run.phase import run_phase
from ...run.profile import Profile
from . import converter, reward, weights
from ...run.runfolder import RunFolder

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


HEAD_FORM = re.compile(r"^([0-9a-f]{40})$")
REF_FORM = re.compile(r"^ref: (refs/[A-Za-z0-9._/-]+)$")
# A verl tree without these in its manifest pins nothing the run loads.
VERL_REQUIRED = ("verl/__init__.py", "verl/trainer/main_ppo.py")


def read_head(checkout: Path) -> Optional[str]:
    """The commit .git/HEAD names, read as plain files (git never runs): evidence only, since
    git's records are as writable as the tree. None when it cannot be read."""
    git_dir = checkout / ".git"
    try:
        head = bounded.read_text(git_dir / "HEAD", 4096).strip()
        match = REF_FORM.match(head)
        if match is None:
            return head if HEAD_FORM.match(head) else None
        ref = match.group(1)
        if ".." in ref.split("/"):
            return None
        try:
            value = bounded.read_text(git_dir / ref, 4096).strip()
        except bounded.Unreadable:
            packed = bounded.read_text(git_dir / "packed-refs", 4 << 20)
            value = next((line.split(" ", 1)[0] for line in packed.splitlines()
                          if line.endswith(" " + ref)), "")
        return value if HEAD_FORM.match(value) else None
    except bounded.Unreadable:
        return None


def check_verl_checkout(ctx: InputsContext) -> List[Finding]:
    """verl's tree by content: its manifest (code/verl/<commit>.SHA256SUMS) hashes to the pin,
    every listed file matches (deep) and nothing else lies in the tree but .git/. No git runs:
    a checkout's .git/config can name programs (fsmonitor, hooks) and hide edits (index flags,
    core.worktree); HEAD is read as a file, for the record only."""
    root = ctx.verl_root
    if root.is_symlink() or not root.is_dir():
        return [finding("INP-E003", str(root), "the verl checkout folder does not exist" if not
                        root.is_symlink() else "the verl checkout is a symlink, not a folder")]
    found = []
    commit = read_head(root)
    ctx.evidence["verl_commit"] = commit
    if commit is not None and commit != ctx.profile.VERL_COMMIT:
        found.append(mismatch("INP-E004", str(root), "verl HEAD (.git/HEAD, evidence)",
                              ctx.profile.VERL_COMMIT, commit))
    pin = ctx.profile.VERL_SUMS_SHA256
    manifest = root.parent / f"{root.name}.{sums.NAME}"
    if not pin:
        return found + [finding("INP-E034", str(root), "the profile pins no verl tree manifest "
                                "(VERL_SUMS_SHA256 is empty): the checkout's files cannot be proven")]
    try:
        actual = hashing.sha256_file(manifest) if manifest.is_file() and not manifest.is_symlink() \
            else None
    except OSError:
        actual = None
    if actual is None:
        return found + [finding("INP-E031", str(manifest), "no manifest of the verl tree (a regular "
                                "file beside the checkout)")]
    ctx.evidence["verl_sums_sha256"] = actual
    if actual != pin:
        return found + [mismatch("INP-E032", str(manifest), "verl tree manifest sha256", pin, actual)]
    listing, problems = sums.check_folder(root, VERL_REQUIRED, ctx.deep, label="verl files",
                                          sums_path=manifest)
    ids = {**SUMS_FINDINGS, sums.MISMATCH: "INP-E005", sums.MISSING: "INP-E033"}
    found += [finding(ids[p.kind], str(root / p.name) if p.kind != sums.UNREADABLE else p.name,
                      p.message) for p in problems]
    if any(p.kind == sums.UNREADABLE for p in problems):
        return found
    stray = unlisted(root, listing.entries)
    found += [finding("INP-E005", str(root / rel), "not listed in the verl tree's manifest (an "
                      "untracked or added file: Python may import it, or load it as bytecode)")
              for rel in stray[:50]]
    if len(stray) > 50:
        found.append(finding("INP-E005", str(root), f"{len(stray) - 50} more unlisted files"))
    ctx.evidence["verl_tree"] = {"files": len(listing.entries), "hashed": ctx.deep,
                                 "unlisted": len(stray)}
    return found


MAX_TREE_FILES = 200000


def unlisted(folder: Path, listed: Dict[str, str]) -> List[str]:
    """Files (and links) under folder that its listing does not name, but SHA256SUMS and .git/."""
    stray = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if here == folder:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        dirnames.sort()
        links = [d for d in dirnames if (here / d).is_symlink()]  # os.walk does not enter them
        for name in sorted(filenames) + links:
            seen += 1
            rel = (here / name).relative_to(folder).as_posix()
            if rel != sums.NAME and rel not in listed:
                stray.append(rel)
        if seen > MAX_TREE_FILES:
            stray.append(f"... (more than {MAX_TREE_FILES} files: not all were looked at)")
            break
    return stray


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
    # The model's loader reads files by name (tokenizer, chat template, configs, remote code):
    # an unlisted one could change what the run does, so it is an error there.
    stray_id = "INP-E030" if what == "model" else "INP-W001"
    for rel in unlisted(folder, listing.entries):
        found.append(finding(stray_id, str(folder / rel), "not listed in SHA256SUMS" + (
            ": the loader may read it (tokenizer, chat template, config)" if what == "model" else "")))
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


# What verl reads of every row, whoever converted the data: RLHFDataset renders the prompt's chat
# messages (verl/utils/dataset/rl_dataset.py), the reward manager scores by data_source against
# reward_model.ground_truth (verl/workers/reward_manager/naive.py). ability and extra_info are
# read only where present.
VERL_READS = ("data_source", "prompt (chat messages of role and content)",
              "reward_model.ground_truth")


def missing_verl_fields(footer: parquet.Footer) -> List[str]:
    """The fields of VERL_READS a parquet file lacks (empty: verl can read its rows)."""
    paths = set(footer.paths) or set(footer.columns)
    prompt = [p for p in paths if p.startswith("prompt.")]
    have = {"data_source": "data_source" in paths,
            VERL_READS[1]: any(p.endswith(".role") for p in prompt) and
            any(p.endswith(".content") for p in prompt),
            "reward_model.ground_truth": "reward_model.ground_truth" in paths}
    return [field for field in VERL_READS if not have[field]]


def check_parquet_rows(ctx: InputsContext) -> List[Finding]:
    found = []
    rows = {}
    unpinned = [key for key in ("TRAIN_ROWS", "TEST_ROWS") if not ctx.profile.pinned(key)]
    if unpinned:  # a new profile: pin-inputs measures them on the prepared data
        found.append(finding("INP-E070", str(ctx.data_root), f"the profile pins no row counts "
                             f"({', '.join(unpinned)}) yet: make pin-inputs PROFILE="
                             f"{ctx.profile.PROFILE_NAME}", missing=unpinned))
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
        if (expected and footer.num_rows != expected) or \
                sum(footer.row_group_rows) != footer.num_rows:
            found.append(mismatch("INP-E013", str(path), "rows", expected, footer.num_rows,
                                  row_groups=footer.row_group_rows))
        missing = missing_verl_fields(footer)
        if missing:
            found.append(finding("INP-E016", str(path), f"verl cannot read its rows: "
                                 f"{', '.join(missing)} missing (has columns {footer.columns})",
                                 columns=footer.columns, missing=missing))
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
    Check("reward-file", reward.check_reward_file),
    Check("data-converter", converter.check_data_converter),
]


def run(profile: Profile, storage_root: Path, *, verl_root: Optional[Path] = None,
        model_root: Optional[Path] = None, data_root: Optional[Path] = None,
        folder: Optional[RunFolder] = None) -> int:
    """The inputs phase (make verify-inputs; the launcher, with the run folder for inputs.json).
    The roots default to the profile's folders under storage_root."""
    if not storage_root.is_dir():
        raise UsageError(f"storage root {storage_root} is not a directory: mount the shared "
                         "volume and set PREP_ROOT= to its path on this box (--storage-root)")
    ctx = InputsContext.build(profile, storage_root, verl_root, model_root, data_root)
    code, _ = run_phase("inputs", f"profile {profile.PROFILE_NAME}, storage {ctx.storage_root}",
                        CHECKS, ctx, folder.inputs_json if folder else None,
                        lambda: {"profile": profile.PROFILE_NAME, "storage_root": str(ctx.storage_root),
                                 "evidence": ctx.evidence})
    return code
