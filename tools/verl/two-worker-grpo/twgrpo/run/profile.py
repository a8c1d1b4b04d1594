"""A profile holds every pin and size of one run; launcher, verifier and Makefile all read it.

Format: ``KEY=value`` lines, ``#`` comments, no quoting and no expansion, so every reader
sees the same bytes the same way. Here: reading and validating one (its keys are declared in
profile_keys.py), and which profile files a job may use.
"""
from __future__ import annotations

import dataclasses
import difflib
import errno
import hashlib
from pathlib import Path
from typing import Dict, List, Optional

from ..formats import bounded
from .findings import Finding, UsageError, finding, usage
from .profile_keys import (CHOICES, DEFAULTS, FIELDS, INTS, LINE, LOWER, NAME, NUMBER,
                           OPTIONAL_EMPTY, PINS, SHA256)

BUNDLE_DIR = Path(__file__).resolve().parents[2]  # twgrpo/run/profile.py -> the bundle folder
PROFILE_DIR = BUNDLE_DIR / "profiles"
DEFAULT_PROFILE = "tutorial-2x2-a100"
# A site's own profiles on the volume, outside every bundle version: each installed once under
# its own sha256 (two-worker-grpo-profiles/<name>/<sha256>.env), which the Driver command pins.
SITE_PROFILES_REL = Path("tools/verl/two-worker-grpo-profiles")
MAX_PROFILE_BYTES = 1 << 20  # a profile is a page of KEY=value lines


@dataclasses.dataclass(frozen=True)
class Profile:
    values: Dict[str, str]
    path: Path
    sha256: str = ""  # of the file it was read from; empty when made from text

    def __getattr__(self, key: str):
        values = self.__dict__.get("values", {})
        if key in values or key in DEFAULTS:
            value = values.get(key, DEFAULTS.get(key))
            if key == "TARGET_STEPS" and value == "auto":
                return 0  # TRAIN_ROWS not pinned yet, so no count of steps (INP-E070 says so)
            return int(value) if key in INTS else value
        if key in PINS:
            return 0 if key in INTS else ""  # not pinned yet: the inputs phase says so (INP-E070)
        raise AttributeError(key)

    def pinned(self, key: str) -> bool:
        return bool(self.values.get(key))

    @property
    def gpu_models(self) -> List[str]:
        """GPU_MODEL's names; empty for * (any model)."""
        return [] if self.GPU_MODEL == "*" else [m.strip() for m in self.GPU_MODEL.split(",")]

    @property
    def world_size(self) -> int:
        return self.NODES * self.GPUS_PER_NODE

    # Layout on the volume, relative to the storage root (same on every mount path).
    def verl_root(self, root: Path) -> Path:
        return Path(root) / "code" / "verl" / self.VERL_COMMIT

    def model_root(self, root: Path) -> Path:
        return Path(root) / "models" / self.MODEL_HUB / self.MODEL_ID / self.MODEL_REVISION

    def reward_path(self, root: Path) -> Optional[Path]:
        """REWARD_FILE on the volume mounted at root; None without one."""
        return Path(root) / self.REWARD_FILE if self.REWARD_FILE else None

    def converter_path(self, root: Path) -> Optional[Path]:
        """DATA_CONVERTER on the volume mounted at root; None without one."""
        return Path(root) / self.DATA_CONVERTER if self.DATA_CONVERTER else None

    def data_root(self, root: Path) -> Path:
        return (Path(root) / "datasets" / self.DATASET_HUB / self.DATASET_ID / self.DATASET_REVISION
                / "processed" / self.DATASET_VARIANT)

    def to_text(self) -> str:
        return env_lines(self.values)

    def to_json(self) -> Dict[str, object]:
        return {"name": self.PROFILE_NAME, "path": str(self.path), "sha256": self.sha256,
                "values": dict(self.values), "world_size": self.world_size}


def env_lines(values: Dict[str, str]) -> str:
    """KEY=value lines, the form parse_profile_text reads; a newline could smuggle in a key."""
    for key, value in values.items():
        if not isinstance(key, str) or not isinstance(value, str) or "\n" in key + value:
            raise ValueError(f"profile value {key!r}={value!r} is not one line of text")
    return "".join(f"{key}={value}\n" for key, value in values.items())


class ProfileError(UsageError):
    """A profile that cannot be used, each problem a finding (id, object, message, HINT)."""

    def __init__(self, source: str, findings: List[Finding]):
        self.findings = findings
        lines = [f"profile {source} is invalid:"]
        for f in findings:
            lines += [f"  {f.obj}: ({f.id}) {f.message}", f"      HINT: {f.hint}"]
        super().__init__("\n".join(lines))


def _guess(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def parse_profile_text(text: str, source: str) -> Profile:
    values: Dict[str, str] = {}
    problems: List[Finding] = []

    def problem(ident: str, where: str, message: str, **evidence) -> None:
        problems.append(finding(ident, f"profile {source} {where}", message, **evidence))

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = LINE.match(line)
        if not match:
            problem("PROF-E001", f"line {number}", f"not KEY=value: {raw!r}")
            continue
        key, value = match.groups()
        if key not in FIELDS:
            problem("PROF-E002", f"line {number}", f"unknown key {key}{_guess(key, FIELDS)}", key=key)
        elif key in values:
            problem("PROF-E003", f"line {number}", f"{key} set twice", key=key)
        else:
            values[key] = value.lower() if key in LOWER else value
    for key, (form, meaning) in FIELDS.items():
        if key not in values and (key in DEFAULTS or key in PINS):
            continue
        if key not in values:
            problem("PROF-E004", key, f"{key} is missing ({meaning})", key=key)
        elif not form.match(values[key]) or (not values[key] and key not in OPTIONAL_EMPTY) \
                or (form is NUMBER and not 0 < float(values[key]) < 1e6):
            guess = _guess(values[key], CHOICES[key]) if key in CHOICES and values[key] else ""
            problem("PROF-E005", key, f"{key}={values[key]!r} is not a valid {meaning}{guess}",
                    key=key, value=values[key])
    if not problems and values["TARGET_STEPS"] == "auto" and "TRAIN_ROWS" in values:
        # Resolved here, so every reader of the recorded values (run.json) sees the number verl
        # is given: verl's own count, epochs x the full batches of the train split.
        epochs = int(values.get("TOTAL_EPOCHS", DEFAULTS["TOTAL_EPOCHS"]))
        steps = epochs * (int(values["TRAIN_ROWS"]) // int(values["TRAIN_BATCH_SIZE"]))
        if steps:
            values["TARGET_STEPS"] = str(steps)
        else:
            problem("PROF-E005", "TARGET_STEPS", f"TARGET_STEPS=auto gives no step: TRAIN_ROWS "
                    f"{values['TRAIN_ROWS']} hold no full batch of {values['TRAIN_BATCH_SIZE']}")
    if problems:
        raise ProfileError(source, problems)
    return Profile(values, Path(source))


def resolve_profile_path(name_or_path: Optional[str]) -> Path:
    """A bare name is a file in the bundle's profiles/; anything with a slash or .env is a path."""
    name = name_or_path or DEFAULT_PROFILE
    if "/" in name or name.endswith(".env"):
        return Path(name)
    if not NAME.match(name):
        raise UsageError(f"profile name {name!r} is not a valid name")
    return PROFILE_DIR / f"{name}.env"


def refuse_unlisted(path: Path) -> None:
    """In an installed bundle (SHA256SUMS beside the verifier) a profile of the bundle counts
    only when SHA256SUMS lists it with its hash: a dropped-in profile could re-pin everything."""
    listing = BUNDLE_DIR / "SHA256SUMS"
    if path.resolve().parent != PROFILE_DIR or not listing.is_file():
        return
    from ..formats import hashing, sums
    name = f"profiles/{path.name}"
    digest = sums.read(listing).entries.get(name)
    if digest is None:
        raise UsageError(f"profile {path} is not listed in the bundle's SHA256SUMS; only the "
                         "installed, hash-checked profiles can be used (add it in the repo, then "
                         "make checksums install-tools)")
    try:
        actual = hashing.sha256_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read profile {path}: {exc.strerror}")
    if actual != digest:
        raise UsageError(f"profile {path}: sha256 {actual} differs from SHA256SUMS ({digest}); "
                         "reinstall the bundle (make install-tools FORCE=1)")


def site_profile_path(root: Path, name: str, digest: str) -> Path:
    """Where make install-tools puts a site profile of that name and sha256 on the volume."""
    return Path(root) / SITE_PROFILES_REL / name / f"{digest}.env"


def installed_site_profile(path: Path) -> bool:
    """Whether path is laid out as two-worker-grpo-profiles/<name>/<sha256>.env: its file name
    is its pin."""
    return (path.parent.parent.name == SITE_PROFILES_REL.name and bool(SHA256.match(path.stem))
            and path.suffix == ".env")


def requested_profile(root: str, name: str, digest: str) -> Profile:
    """The profile a job asks for: PROFILE names a profile of the bundle (hash-listed in its
    SHA256SUMS) or, with the PROFILE_SHA256 the Driver command pins, a site profile installed
    on the volume mounted at root."""
    if not digest:
        return load_profile(name or None)
    path = site_profile_path(Path(root), name, digest)
    if not path.is_file():
        raise usage("LAUNCH-E095", None, f"site profile {name} with sha256 {digest[:12]}… is not "
                    f"installed in {path.parent}")
    return load_profile(str(path))


def load_profile(name_or_path: Optional[str] = None) -> Profile:
    path = resolve_profile_path(name_or_path)
    if path.exists():
        refuse_unlisted(path)
    try:  # a regular file of at most MAX_PROFILE_BYTES: a FIFO or /dev/zero never hangs this
        stream, _ = bounded.open_regular(path)
        with stream:
            data = stream.read(MAX_PROFILE_BYTES + 1)
        if len(data) > MAX_PROFILE_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_PROFILE_BYTES} bytes")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        known = ", ".join(sorted(p.stem for p in PROFILE_DIR.glob("*.env")))
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise UsageError(f"cannot read profile {path}: {why} (bundle profiles: {known})")
    digest = hashlib.sha256(data).hexdigest()
    site = installed_site_profile(path)
    if site and digest != path.stem:
        raise ProfileError(str(path), [finding(
            "PROF-E008", f"profile {path}", f"its content has sha256 {digest}, not the one its "
            "file name pins: the installed site profile was changed on the volume")])
    profile = dataclasses.replace(parse_profile_text(text, str(path)), sha256=digest)
    own = path.parent.name if site else path.stem
    if path.suffix == ".env" and profile.PROFILE_NAME != own:
        raise ProfileError(str(path), [finding(
            "PROF-E006", f"profile {path}", f"PROFILE_NAME={profile.PROFILE_NAME} differs from its "
            f"file name {own}; rename one of them")])
    return profile


def with_overrides(profile: Profile, **values: object) -> Profile:
    """The profile with some values replaced (command-line flags), validated like the file."""
    merged = dict(profile.values)
    merged.update({k: str(v) for k, v in values.items() if v is not None})
    return dataclasses.replace(parse_profile_text(env_lines(merged), str(profile.path)),
                               sha256=profile.sha256)
