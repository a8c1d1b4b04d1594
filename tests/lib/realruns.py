"""Copies of real run folders (tests/fixtures/real-*/) under a test storage root."""
import shutil
import tarfile
from pathlib import Path

from twgrpo.run.runfolder import runs_dir

VERDICT_RECORDS = ("SUCCESS", "verification.json", "actor-placement.json")


def copy_runs(fixtures: Path, names, root: Path, rejudge=()) -> Path:
    """The named run folders of a fixture folder, side by side under root's runs/, with the
    checkpoint shards it keeps packed (shards.tar.gz) unpacked into them; the verdict records
    of the runs in rejudge removed, so postflight judges them again. Returns root."""
    runs = runs_dir(root)
    runs.mkdir(parents=True)
    for name in names:
        shutil.copytree(fixtures / name, runs / name)
    if (fixtures / "shards.tar.gz").is_file():
        with tarfile.open(fixtures / "shards.tar.gz") as tar:
            tar.extractall(runs, filter="data")
    for name in rejudge:
        for record in VERDICT_RECORDS:
            (runs / name / record).unlink()
    return root
