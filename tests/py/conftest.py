"""The one path bootstrap for pytest: the bundle's twgrpo, the repo root (prep/, dev/), and the
test libraries (tests/lib/, tests/cluster/) become importable; no test touches sys.path."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for path in (REPO / "tools" / "verl" / "two-worker-grpo", REPO, REPO / "tests" / "lib",
             REPO / "tests" / "cluster"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
