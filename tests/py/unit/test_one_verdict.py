"""One verdict everywhere: make runs, report, postflight, audit and submit give a run the status
runverdict.latest_verdict gives it, over the same records (issue 31, item 3)."""
import json
from pathlib import Path

import pytest
from prep import outcome, submit
from realruns import copy_runs
from twgrpo.run.runfolder import RunFolder
from views import quiet, statuses

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESUME = FIXTURES / "real-resume-run"
EARLIER = next(RESUME.glob("spot-*-a")).name
RESUMED = next(RESUME.glob("spot-*-b")).name


@pytest.fixture
def resumed_root(tmp_path):
    """The real preempted run and its resumed SUCCESS, judged again by this bundle's postflight."""
    root = copy_runs(RESUME, (EARLIER, RESUMED), tmp_path / "storage")
    code, text = quiet(["postflight", "--storage-root", str(root), "--run-id", RESUMED])
    assert code == 0, text
    return root


def test_a_resumed_success_without_resume_json_is_unproven_in_every_view(resumed_root, tmp_path):
    """Before: make runs said SUCCESS (it never asked run.json whether the run was resumed),
    report and audit UNPROVEN, and postflight passed and kept SUCCESS."""
    folder = RunFolder.at(resumed_root, RESUMED).path
    found, _, _ = statuses(resumed_root, RESUMED, tmp_path / "page.html")
    assert set(found.values()) == {"SUCCESS"}, found
    (folder / "resume.json").unlink()
    found, audit_code, audit_text = statuses(resumed_root, RESUMED, tmp_path / "page.html")
    assert found == dict.fromkeys(("runs", "report", "audit", "submit"), "UNPROVEN")
    assert audit_code == 1
    assert f"{folder}/resume.json: (POST-E066) run.json names the run this one resumed from, " \
           "but resume.json is missing" in audit_text
    assert "HINT: resume.json is the resume phase's record" in audit_text
    code, text = quiet(["postflight", "--storage-root", str(resumed_root), "--run-id", RESUMED])
    assert code == 1 and "postflight: UNPROVEN (POST-E066)" in text
    assert "already exists; kept as it is" not in text
    found, _, _ = statuses(resumed_root, RESUMED, tmp_path / "page.html")
    assert set(found.values()) == {"UNPROVEN"}, found
    code, listing = quiet(["runs", "--storage-root", str(resumed_root)])
    assert "UNPROVEN (POST-E066)" in next(line for line in listing.splitlines()
                                             if line.startswith(RESUMED))


def test_postflight_writes_no_success_for_a_resumed_run_without_its_resume_record(resumed_root,
                                                                                   tmp_path):
    folder = RunFolder.at(resumed_root, RESUMED).path
    for name in ("SUCCESS", "resume.json"):
        (folder / name).unlink()
    code, text = quiet(["postflight", "--storage-root", str(resumed_root), "--run-id", RESUMED])
    assert code == 1 and "no SUCCESS is written" in text
    assert not (folder / "SUCCESS").exists()
    assert json.loads((folder / "verification.json").read_text())["status"] == "passed"
    found, _, _ = statuses(resumed_root, RESUMED, tmp_path / "page.html")
    assert set(found.values()) == {"UNPROVEN"}, found


def test_make_runs_finds_the_lineage_of_a_run_json_past_the_glance_s_whole_read(resumed_root):
    """A run.json over glance.WHOLE is searched, not parsed: its resume object still counts."""
    from twgrpo.run import glance, runverdict
    folder = RunFolder.at(resumed_root, RESUMED).path
    record = json.loads((folder / "run.json").read_text())
    record["zz_padding"] = "x" * (glance.WHOLE + 1)  # sorted last, as the writer lays it out
    (folder / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    (folder / "resume.json").unlink()
    assert runverdict.resumed(folder, whole=False) and runverdict.resumed(folder)
    assert runverdict.latest_verdict(folder, lambda d, n: runverdict.record_status(d, n),
                                     whole=False).status == "UNPROVEN"


class FakeJobs:
    """A job server whose job has ended with the given status."""

    def __init__(self, status):
        self.info = {"status": status, "message": "", "driver_exit_code": None}

    def status(self, _):
        return self.info

    def logs(self, _):
        return ""


def follow(capsys, status, prep_root, run_id):
    code = submit.follow(FakeJobs(status), run_id, f"/mnt/v/runs/verl/two-worker-grpo/{run_id}",
                         0.01, prep_root)
    return code, capsys.readouterr().err


def test_submit_reports_the_run_folder_s_failed_verdict_when_ray_says_succeeded(resumed_root,
                                                                               capsys):
    """Before: SUCCESS and exit 0 whenever Ray said SUCCEEDED."""
    folder = RunFolder.at(resumed_root, RESUMED).path
    (folder / "FAILED").write_text("phase=postflight\nexit_status=1\nsignal=none\ntime=x\n")
    code, err = follow(capsys, "SUCCEEDED", str(resumed_root), RESUMED)
    assert code == 1
    assert f"submit: {RESUMED}: Ray says SUCCEEDED, but the run folder says FAILED " \
           "phase=postflight exit_status=1" in err
    assert ": SUCCESS —" not in err


def test_submit_reports_an_unproven_run_folder_when_ray_says_succeeded(resumed_root, capsys):
    (RunFolder.at(resumed_root, RESUMED).path / "resume.json").unlink()
    code, err = follow(capsys, "SUCCEEDED", str(resumed_root), RESUMED)
    assert code == 1 and "Ray says SUCCEEDED, but the run folder says UNPROVEN: " \
                         "run.json names the run this one resumed from" in err
    assert outcome.folder_verdict(str(resumed_root), RESUMED).status == "UNPROVEN"


def test_submit_says_success_when_ray_and_the_run_folder_agree(resumed_root, capsys):
    code, err = follow(capsys, "SUCCEEDED", str(resumed_root), RESUMED)
    assert code == 0 and f"submit: {RESUMED}: SUCCESS — the run's folder is" in err


def test_submit_gives_the_run_folder_s_success_when_ray_says_the_job_failed(resumed_root, capsys):
    code, err = follow(capsys, "FAILED", str(resumed_root), RESUMED)
    assert code == 0 and f"submit: {RESUMED}: SUCCESS — the run folder says so, though Ray says " \
                         "FAILED (exit status 1)" in err


@pytest.mark.parametrize("mounted", [True, False])
def test_submit_labels_ray_s_word_when_it_cannot_read_the_run_folder(tmp_path, capsys, mounted):
    prep_root = str(tmp_path) if mounted else ""
    code, err = follow(capsys, "SUCCEEDED", prep_root, "exp-1")
    assert code == 0
    assert "submit: exp-1: SUCCEEDED by Ray's word only: this box cannot read the run folder " \
           "/mnt/v/runs/verl/two-worker-grpo/exp-1" in err
    assert ("PREP_ROOT is not mounted here" in err) == (not mounted)
    assert ": SUCCESS —" not in err


FAULTS = FIXTURES / "real-2x1-faults"
BLOCKED = "smoke-2x1-20261203T145217Z-468"  # failed in preflight (README.md there)


def test_the_report_of_a_run_failed_in_preflight_claims_no_steps_and_no_missing_charts(tmp_path):
    """Before: '2 steps of 2 trained here (steps 1..2)', and RPT-E005/RPT-E006 for the scalars
    and rollouts no phase of a run stopped in preflight could have written."""
    root = copy_runs(FAULTS, (BLOCKED,), tmp_path / "storage")
    code, text = quiet(["report", "--storage-root", str(root), "--run-id", BLOCKED, "--html",
                        str(tmp_path / "page.html")])
    assert code == 0 and text.startswith(f"run {BLOCKED}: FAILED in phase preflight")
    assert "no step of 2 trained here" in text and "trained here (steps" not in text
    assert "RPT-E005" not in text and "RPT-E006" not in text
    assert "(PRE-E046)" in text  # what did fail is still there
    assert "steps 1..2" not in (tmp_path / "page.html").read_text()


def test_a_run_that_trained_still_reports_its_missing_scalars(resumed_root, tmp_path):
    import shutil
    folder = RunFolder.at(resumed_root, RESUMED).path
    shutil.rmtree(folder / "tensorboard")
    (folder / "tensorboard").mkdir()
    code, text = quiet(["report", "--storage-root", str(resumed_root), "--run-id", RESUMED,
                        "--html", str(tmp_path / "page.html")])
    assert "(RPT-E005) no events.out.tfevents.* file" in text
