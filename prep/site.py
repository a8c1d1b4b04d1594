"""Site profiles: a site's own profiles live in a folder outside the checkout (make SITE=<folder>),
never in the bundle's hash chain, so adding or editing one changes neither SHA256SUMS nor the
launcher, and pulling a new bundle version never conflicts with them. make install-tools
SITE=<folder> puts each on the volume once, under its own sha256
(tools/verl/two-worker-grpo-profiles/<name>/<sha256>.env, read-only, never overwritten),
and the Driver command pins that sha256 next to the launcher's: what was checked is what runs.

The make targets pass a site profile to the tools as its path (SITE/PROFILE.env); a bundle
profile goes by its name.
"""
from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from pathlib import Path
from typing import List, Optional

from twgrpo.formats import hashing
from twgrpo.run.findings import UsageError, usage, usage_lines
from twgrpo.run.profile import PROFILE_DIR, Profile, load_profile, site_profile_path


def is_site(profile: str) -> bool:
    """Whether --profile is a site profile's file rather than the name of a bundle profile."""
    return "/" in profile or profile.endswith(".env")


def profile_file(bundle_dir: Path, profile: str, default: str) -> Path:
    """The file a submission's profile is read from: a site profile's, or bundle_dir's."""
    if is_site(profile):
        return Path(profile)
    return bundle_dir / "profiles" / f"{profile or default}.env"


def profile_of(bundle_dir: Path, profile: str, default: str) -> Profile:
    """The profile a submission names: a site profile's file, or one of bundle_dir's profiles."""
    return load_profile(str(profile_file(bundle_dir, profile, default)))


def installed(root: Path, profile: Profile) -> Optional[str]:
    """None when the volume at root holds this site profile's bytes where the job reads them;
    else what is wrong, for a message."""
    target = site_profile_path(root, profile.PROFILE_NAME, profile.sha256)
    try:
        have = hashing.sha256_file(target)
    except OSError:
        return f"is not installed in {target.parent}"
    return None if have == profile.sha256 else \
        f"differs from its pin in {target} (or is not a regular file)"


def install(root: Path, site: Path, say=print) -> int:
    """Install every profile of the folder site; each is checked first, and nothing is written
    when one is invalid. An installed file is never replaced. 0 done, 1 refused."""
    if not site.is_dir():
        say(f"install: SITE={site} is not a folder of profiles; nothing was installed. Name the "
            "folder that holds your site's <name>.env files")
        return 1
    profiles: List[Profile] = []
    problems: List[str] = []
    for path in sorted(site.glob("*.env")):
        try:
            profiles.append(load_profile(str(path)))
        except UsageError as exc:
            problems.append(str(exc))
    if problems or not profiles:
        for problem in problems or [f"{site} holds no <name>.env profile"]:
            say(f"install: {problem}")
        say("install: no site profile was installed; fix the profile(s) above "
            "(make check-profile SITE=... PROFILE=<name>), then install again")
        return 1
    shadowing = [p.PROFILE_NAME for p in profiles
                 if (PROFILE_DIR / f"{p.PROFILE_NAME}.env").exists()]
    if shadowing:
        say(f"install: site profile(s) {', '.join(shadowing)} have the name of a profile the bundle "
            "ships; no site profile was installed. Rename them (PROFILE_NAME and the file): runs "
            "and reports name a profile by its name")
        return 1
    status = 0
    for profile in profiles:
        target = site_profile_path(root, profile.PROFILE_NAME, profile.sha256)
        short = f"site profile {profile.PROFILE_NAME} (sha256 {profile.sha256[:12]}…)"
        try:
            if os.path.lexists(target):
                wrong = installed(root, profile)
                if wrong is None:
                    say(f"install: {short} is already installed in {target}")
                else:
                    for line in usage_lines("install", usage("PROF-E008", None, f"{target} {wrong}")):
                        say(line)
                status |= wrong is not None
                continue
            data = profile.path.read_bytes()
            if hashlib.sha256(data).hexdigest() != profile.sha256:  # edited while installing
                say(f"install: {profile.path} changed while it was installed; nothing was "
                    "written for it — install again")
                status = 1
                continue
            _write_read_only(target, data)
        except OSError as exc:
            for line in usage_lines("install", usage("GEN-E020", None, f"cannot install {short} "
                                                     f"at {target}: {exc.strerror or exc}")):
                say(line)
            status = 1
            continue
        say(f"install: {short} installed in {target}")
    return status


def _write_read_only(target: Path, data: bytes) -> None:
    """target, created whole (a temporary file linked into place) and read-only; on a volume
    without hard links, created exclusively and written (a torn one fails its own sha256)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".installing",
                                     dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o444)
        try:
            os.link(temporary, target)  # refuses a file that appeared meanwhile
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            out = os.open(str(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            with os.fdopen(out, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
    finally:
        os.unlink(temporary)
