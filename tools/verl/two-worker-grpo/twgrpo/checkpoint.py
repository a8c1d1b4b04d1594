"""Checkpoint shards without torch: torch.save writes a zip archive holding data.pkl."""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Optional


def shard_problem(path: Path) -> Optional[str]:
    """None if the file is a whole torch.save archive, else what is wrong with it."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if not any(name.endswith("data.pkl") for name in names):
                return f"a zip archive without data.pkl ({len(names)} members): not a torch.save file"
            bad = archive.testzip()  # reads every member and checks its CRC
            if bad is not None:
                return f"member {bad} fails its CRC check"
    except FileNotFoundError:
        return "missing"
    except zipfile.BadZipFile as exc:
        return f"not a whole zip archive ({exc})"
    except (OSError, EOFError, zlib.error, zipfile.LargeZipFile, NotImplementedError) as exc:
        return f"unreadable ({exc})"
    return None
