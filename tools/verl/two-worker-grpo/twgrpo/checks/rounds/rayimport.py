"""Where the Driver's own Python would find ray, for the cluster probe's `import ray`.

The verifier runs as `python3 -I -B`: no PYTHONPATH, no user site, not the folder beside it, so
no stray file can stand in for a module it imports. ray, though, may come to the Driver through
PYTHONPATH (HPC modules, `pip install --target`) or the user site (`pip install --user`). Those
entries are appended to sys.path, after the standard library and site-packages, only when ray
is imported: nothing the verifier already has can be shadowed by them.
"""
from __future__ import annotations

import os
import site
import sys
from typing import List, Mapping, Optional


def driver_paths(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """The folders a plain `python3` would add to its path: PYTHONPATH's entries (empty ones,
    which stand for the current folder, left out), then the user site unless PYTHONNOUSERSITE."""
    environ = os.environ if environ is None else environ
    paths = [entry for entry in environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if not environ.get("PYTHONNOUSERSITE"):
        try:
            paths.append(site.getusersitepackages())
        except (AttributeError, OSError):  # a Python built without user sites
            pass
    return [os.path.abspath(path) for path in paths if os.path.isdir(path)]


def extend_path() -> None:
    """Append driver_paths() to sys.path (after everything already on it); call it just before
    `import ray`, and only there."""
    sys.path.extend(path for path in driver_paths() if path not in sys.path)
