"""Where the bundle is: its folder, launcher and SHA256SUMS in this checkout, and its version
folders on a volume, each named from the launcher's sha256 (which pins every other file).
Importing it puts the bundle's twgrpo package on the path, for the prep tools that read with it."""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
LAUNCHER_NAME = "run-two-worker-grpo-v1.sh"
SUMS = REPO / "checksums" / "SHA256SUMS"
BUNDLES_REL = "tools/verl/two-worker-grpo"  # versions live in <root>/BUNDLES_REL/<version>/
VERSION = re.compile(r"^bundle-[0-9a-f]{12}\Z")
if str(BUNDLE) not in sys.path:
    sys.path.insert(0, str(BUNDLE))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def version_of(launcher: Path) -> str:
    """A bundle's version: from the launcher's sha256, which pins every other file."""
    return f"bundle-{sha256(launcher)[:12]}"
