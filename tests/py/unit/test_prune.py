"""make prune KEEP=<n>: removes installed bundle versions older than the n newest, never one
that a recorded run names, a live run uses, LATEST names or this checkout's Driver command pins,
and says what it kept and why."""
import json
import os
import time

import pytest

from prep import bundle, prune
from twgrpo.run.runfolder import NAME, runs_dir
HEARTBEAT = NAME.heartbeat_json

VERSIONS = [f"bundle-{n:012x}" for n in range(1, 7)]  # oldest first


@pytest.fixture
def volume(tmp_path):
    parent = tmp_path / bundle.BUNDLES_REL
    for age, version in enumerate(reversed(VERSIONS)):  # the last one installed most recently
        folder = parent / version
        folder.mkdir(parents=True)
        (folder / bundle.LAUNCHER_NAME).write_text("#!/bin/bash\n")
        stamp = time.time() - 1000 * (age + 1)
        os.utime(folder, (stamp, stamp))
    (parent / "LATEST").write_text(VERSIONS[-1] + "\n")
    return tmp_path


def run(volume, name, version, alive=False):
    folder = runs_dir(volume) / name
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": name, "bundle_version": version}))
    if alive:
        (folder / HEARTBEAT).write_text(json.dumps({
            "run_id": name, "time": "x", "beat_epoch": time.time(), "pid": 1, "host": "h",
            "interval_s": 30, "lease_s": 120, "state": "beating", "beats": 3}))


def test_prune_keeps_the_newest_and_every_version_a_run_names_or_uses(volume, capsys):
    run(volume, "exp-1", VERSIONS[0])            # a finished run names the oldest
    run(volume, "exp-2", VERSIONS[2], alive=True)  # a live run uses another
    (runs_dir(volume) / "broken").mkdir()  # a folder without run.json names nothing
    assert prune.main(["--prep-root", str(volume), "--keep", "2"]) == 0
    out = capsys.readouterr().out
    left = sorted(p.name for p in (volume / bundle.BUNDLES_REL).iterdir() if p.name != "LATEST")
    assert left == [VERSIONS[0], VERSIONS[2], VERSIONS[4], VERSIONS[5]]
    assert f"prune: kept {VERSIONS[5]}: installed most recently; LATEST names it" in out
    assert f"prune: kept {VERSIONS[4]}: installed #2 most recently" in out
    assert f"prune: kept {VERSIONS[0]}: run exp-1 names it" in out
    assert f"prune: kept {VERSIONS[2]}: run exp-2 is running from it (fresh heartbeat)" in out
    assert f"prune: removed {VERSIONS[1]}: older than the 2 newest, and no run names it" in out
    assert "prune: 4 version(s) kept, 2 removed" in out
    assert not list((volume / bundle.BUNDLES_REL).glob(".removing-*"))


def test_prune_keeps_this_checkouts_version_whatever_its_age(volume, capsys):
    mine = bundle.version_of(bundle.BUNDLE / bundle.LAUNCHER_NAME)
    folder = volume / bundle.BUNDLES_REL / mine
    folder.mkdir()
    os.utime(folder, (1, 1))  # the oldest of all
    assert prune.main(["--prep-root", str(volume), "--keep", "1"]) == 0
    assert f"prune: kept {mine}: this checkout's Driver command pins it" in capsys.readouterr().out
    assert folder.is_dir()


@pytest.mark.parametrize("keep", ["", "0", "-1", "two"])
def test_a_bad_keep_removes_nothing(volume, capsys, keep):
    assert prune.main(["--prep-root", str(volume), "--keep", keep]) == 2
    assert "(GEN-E130)" in capsys.readouterr().err
    assert len(list((volume / bundle.BUNDLES_REL).glob("bundle-*"))) == len(VERSIONS)


def test_a_missing_volume_is_refused(capsys, tmp_path):
    assert prune.main(["--prep-root", str(tmp_path / "absent"), "--keep", "1"]) == 2
    assert "(GEN-E130) PREP_ROOT" in capsys.readouterr().err


def test_a_symlink_named_like_a_version_is_never_followed(volume, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious").write_text("x")
    (volume / bundle.BUNDLES_REL / "bundle-0000000000ff").symlink_to(outside)
    assert prune.main(["--prep-root", str(volume), "--keep", "1"]) == 0
    assert (outside / "precious").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount point stands in for a folder that cannot be moved")
def test_a_version_that_cannot_be_removed_is_named_and_the_rest_goes_on(volume, capsys):
    import subprocess
    stuck = volume / bundle.BUNDLES_REL / VERSIONS[0]
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(stuck)], check=True)  # rename: EBUSY
    os.utime(stuck, (1, 1))  # still the oldest
    try:
        assert prune.main(["--prep-root", str(volume), "--keep", "1"]) == 1
    finally:
        subprocess.run(["umount", str(stuck)], check=True)
    out, err = capsys.readouterr()
    assert f"prune: (GEN-E131) {stuck}: cannot remove it" in err
    assert f"prune: removed {VERSIONS[1]}" in out and stuck.is_dir()
