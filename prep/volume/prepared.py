"""What preparing each input (verl, model, data) shares: its error, its log line, and keeping a
finished folder only when it verifies against its own SHA256SUMS."""
from __future__ import annotations

from pathlib import Path
from typing import List

from twgrpo.formats import sums
from twgrpo.run.findings import UsageError


class PrepareError(UsageError):
    """A part could not be prepared; the message says what to do (exit 1)."""


def say(message: str) -> None:
    print(f"prepare-inputs: {message}", flush=True)


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
