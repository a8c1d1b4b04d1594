"""A profile edited after `make checksums` is refused wherever a job is described from it
(PROF-E007): the volume holds the pinned bytes, so make driver-command, rayjob, sbatch and
submit would otherwise print or send a run the job does not do (TEST_FREQ 10 printed, 5 run)."""
import pytest

from prep import bundle, jobspec, rayjob, sbatch
from twgrpo.run.catalog import CATALOG

ROOT = "/mnt/verl-reproduction"


@pytest.fixture
def installed(tmp_path):
    assert bundle.main(["install", "--prep-root", str(tmp_path)]) == 0
    return tmp_path / bundle.BUNDLES_REL / bundle.version_of(bundle.BUNDLE / bundle.LAUNCHER_NAME)


def edit(folder, line="SAVE_FREQ=1\n"):
    profile = folder / "profiles" / "smoke-1x1.env"
    profile.chmod(0o644)
    with open(profile, "a", encoding="utf-8") as stream:
        stream.write(line)


def driver_command(folder):
    return bundle.main(["driver-command", ROOT, "--profile", "smoke-1x1", "--launcher",
                        str(folder / bundle.LAUNCHER_NAME)])


def test_the_pinned_profile_prints_its_driver_command(installed, capsys):
    assert driver_command(installed) == 0
    assert "verified (bundle" in capsys.readouterr().out


def test_an_edited_profile_prints_no_driver_command(installed, capsys):
    edit(installed)
    assert driver_command(installed) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "(PROF-E007) profiles/smoke-1x1.env changed after `make checksums`" in err
    assert f"    HINT: {CATALOG['PROF-E007'][1]}" in err


def test_a_submission_spec_from_an_edited_profile_names_the_profile_finding(installed):
    edit(installed)
    with pytest.raises(jobspec.SpecError, match=r"^\(PROF-E007\) profiles/smoke-1x1.env"):
        jobspec.job_spec(ROOT, "smoke-1x1", installed, {"RUN_ID": "exp-1"})


@pytest.mark.parametrize("tool", [rayjob, sbatch])
def test_rayjob_and_sbatch_print_nothing_from_an_edited_profile(installed, capsys, tool):
    edit(installed)
    code = tool.main(["--run-id", "exp-1", "--profile", "smoke-1x1", "--storage-root", ROOT,
                      "--bundle", str(installed)] + (["--image", "verl@sha256:" + "0" * 64, "--claim", "vol"]
                                                     if tool is rayjob else []))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "(PROF-E007)" in err
