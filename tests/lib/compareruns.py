"""The real runs that make compare is tested on, side by side under one storage root:
the 1x1 fresh run, the preempted run and its resumption, and the two-host run."""
import shutil
import tarfile
from pathlib import Path

from realruns import copy_runs
from tbevents import write_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FRESH = next((FIXTURES / "real-smoke-run").glob("smoke-*")).name
PARENT, RESUMED = sorted(p.name for p in (FIXTURES / "real-resume-run").glob("spot-*"))
TWO_HOST = "smoke-2x1-20261207T133403Z-3604"


def storage_with_real_runs(root: Path) -> Path:
    """root/runs/verl/two-worker-grpo/ holding FRESH, PARENT, RESUMED and TWO_HOST. Returns
    the runs folder."""
    copy_runs(FIXTURES / "real-resume-run", [PARENT, RESUMED], root)
    runs = root / "runs" / "verl" / "two-worker-grpo"
    shutil.copytree(FIXTURES / "real-smoke-run" / FRESH, runs / FRESH)
    with tarfile.open(next((FIXTURES / "real-smoke-run-2x1").glob("*.tar.xz"))) as tar:
        tar.extractall(runs, filter="data")
    return runs


def planted_copy(runs: Path, source: str, name: str, tag: str = "", value: float = 0.0,
                 steps=(1, 2)) -> Path:
    """A copy of a run under another name; with tag, a later event file rewrites that scalar to
    value at every step the run logged (the last write of a step wins)."""
    shutil.copytree(runs / source, runs / name)
    if tag:
        write_events(runs / name / "tensorboard" / "events.out.tfevents.9999999999.host.1.0",
                     [(step, {tag: value}) for step in steps])
    return runs / name
