"""Checkpoint shards without torch: each must be a whole archive laid out as torch.save writes."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from . import torchzip


def shard_problem(path: Path) -> Optional[Tuple[str, str]]:
    """None if the file is a whole torch.save archive, else (kind, what is wrong): kind is
    'missing', 'damaged' (cut off, CRC) or 'layout' (not what torch.save writes)."""
    try:
        torchzip.check(path)
    except FileNotFoundError:
        return "missing", "missing"
    except torchzip.Damaged as exc:
        return "damaged", str(exc)
    except torchzip.NotTorchSave as exc:
        return "layout", f"not a torch.save archive: {exc}"
    except OSError as exc:
        return "damaged", f"unreadable ({exc.strerror or exc})"
    return None
