"""Prep-box helpers that write inputs in the volume layout the bundle checks (stdlib only)."""
import sys
from pathlib import Path

# The bundle's own package (parquet writer, hashing) is the single copy of that code.
BUNDLE = Path(__file__).resolve().parents[2] / "tools" / "verl" / "two-worker-grpo"
if str(BUNDLE) not in sys.path:
    sys.path.insert(0, str(BUNDLE))
