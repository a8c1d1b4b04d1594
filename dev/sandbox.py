"""This working tree's bundle installed in a scratch folder with extra profiles and its hash
chain renewed there, whatever the state of the repo's pins (tests and the multi-host smoke)."""
from __future__ import annotations

from pathlib import Path

from prep import bundle


def repin(folder: Path) -> None:
    """Re-hash an installed bundle folder: SHA256SUMS over its files, the launcher's pin."""
    (folder / "SHA256SUMS").write_text(
        bundle.sums_text(bundle.walk(folder, {bundle.LAUNCHER_NAME, "SHA256SUMS"})), encoding="utf-8")
    bundle.pin_launcher(folder / bundle.LAUNCHER_NAME, bundle.sha256(folder / "SHA256SUMS"))


def install_sandbox(dest: Path, profiles: dict) -> None:
    """The bundle in dest plus profiles (name -> text), re-hashed so the launcher accepts them."""
    bundle.install_files(dest, force=True)
    for name, text in profiles.items():
        (dest / "profiles" / f"{name}.env").write_text(text, encoding="utf-8")
    repin(dest)
