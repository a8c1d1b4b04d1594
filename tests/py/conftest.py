"""Shared pytest setup: the bundle's package and the test libraries on sys.path."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
for path in (BUNDLE, REPO / "tests" / "lib", REPO / "hack"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
