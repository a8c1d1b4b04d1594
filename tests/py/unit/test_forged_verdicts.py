"""A verdict the files alone cannot forge: SUCCESS needs the launcher's record of every phase and
a verification.json with every postflight check passed; postflight never writes SUCCESS beside
FAILED or over inputs evidence that contradicts the pins; and no tool writes over a device,
FIFO or folder in place of a regular file."""
import json
import os
import re
import stat
from pathlib import Path

import pytest
import synthrun
from twgrpo.checks.postflight import postflight
from twgrpo.cli import main
from twgrpo.run import runverdict
from twgrpo.run.catalog import CATALOG
from twgrpo.run.profile import load_profile
from twgrpo.run.records import RecordError, write_json

HOSTS = [{"hostname": "worker-a", "ip": "10.0.0.1"}, {"hostname": "worker-b", "ip": "10.0.0.2"}]
PROFILE = "tutorial-2x2-a100"


def make(parent, name="exp-001"):
    run = parent / "runs" / "verl" / "two-worker-grpo" / name
    synthrun.write_run(run, load_profile(PROFILE), name, "/mnt/verl-reproduction", HOSTS)
    return run


def postflight_ids(run, capsys):
    capsys.readouterr()
    code = main(["postflight", "--output-dir", str(run)])
    return code, set(re.findall(r"\((POST-E\d+)\)", capsys.readouterr().out))


def test_the_verdicts_check_list_is_postflights():
    assert runverdict.POSTFLIGHT_CHECKS == tuple(c.name for c in postflight.CHECKS)


def test_a_whole_synthetic_run_passes_and_is_a_success(tmp_path, capsys):
    run = make(tmp_path)
    assert postflight_ids(run, capsys) == (0, set())
    assert runverdict.latest_verdict(run).status == "SUCCESS"


def test_postflight_never_writes_success_beside_a_failed_training_phase(tmp_path, capsys):
    run = make(tmp_path)
    (run / "FAILED").write_text("time=2026-12-03T00:00:00Z\nphase=training\nexit_status=3\n"
                                "signal=none\nrun_id=exp-001\ncause=\n")
    with open(run / "driver.log", "a") as log:
        log.write("run-two-worker-grpo-v1: phase training ended with status 3 after 5 s\n")
    code, ids = postflight_ids(run, capsys)
    assert code == 1 and ids == {"POST-E070", "POST-E071"}
    assert not (run / "SUCCESS").exists()
    assert runverdict.latest_verdict(run).status == "FAILED"


def test_postflight_needs_the_launchers_line_that_training_ended_0(tmp_path, capsys, monkeypatch):
    from twgrpo.checks.postflight import launcher_records
    monkeypatch.setattr(launcher_records, "DRIVER_LOG_WAIT_S", 0.1)
    run = make(tmp_path)
    (run / "driver.log").unlink()
    code, ids = postflight_ids(run, capsys)
    assert code == 1 and ids == {"POST-E071"}
    assert not (run / "SUCCESS").exists()


@pytest.mark.parametrize("key,value", [
    ("verl_commit", "f" * 40), ("verl_sums_sha256", "e" * 64), ("model_sums_sha256", "d" * 64),
    ("data_sums_sha256", None), ("verl_commit", "f" * (1 << 20)), ("model_sums_sha256", {"a": ["b"] * 9999})])
def test_an_inputs_record_edited_against_the_pins_fails_postflight(tmp_path, capsys, key, value):
    run = make(tmp_path)
    record = json.loads((run / "inputs.json").read_text())
    if value is None:
        del record["evidence"][key]
    else:
        record["evidence"][key] = value
    (run / "inputs.json").write_text(json.dumps(record))
    code, ids = postflight_ids(run, capsys)
    assert code == 1 and ids == {"POST-E072"}
    assert not (run / "SUCCESS").exists()
    said = [f for c in json.loads((run / "verification.json").read_text())["checks"] for f in c["findings"]]
    assert len(json.dumps(said)) < 4000  # a megabyte in the record is not copied into its finding


def test_a_hand_written_success_is_unproven_in_runs_and_report(tmp_path, capsys):
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "forged"
    run.mkdir(parents=True)
    (run / "SUCCESS").write_text("2026-12-03T00:00:00+00:00\n")
    (run / "verification.json").write_text('{"status": "passed"}')
    verdict = runverdict.latest_verdict(run)
    assert verdict.status == "UNPROVEN", verdict.summary
    assert "inputs.json is missing" in verdict.summary and "training ended" in verdict.summary
    capsys.readouterr()
    assert main(["runs", "--storage-root", str(tmp_path)]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"forged\s.*UNPROVEN", listing) and "SUCCESS" not in listing.replace(
        "UNPROVEN", "")
    assert main(["report", "--output-dir", str(run), "--profile", PROFILE]) == 0
    out = capsys.readouterr().out
    page = (run / "report.html").read_text()
    assert 'class="banner UNPROVEN"' in page and 'class="banner SUCCESS"' not in page
    assert "(RPT-E010)" in out


@pytest.mark.parametrize("gap,plant", [
    ("preflight", lambda run: (run / "preflight.json").unlink()),
    ("a postflight check", lambda run: _drop_check(run, "checkpoint")),
    ("training line", lambda run: (run / "driver.log").write_text("")),
])
def test_success_with_one_record_missing_is_unproven(tmp_path, capsys, gap, plant):
    run = make(tmp_path)
    assert postflight_ids(run, capsys)[0] == 0
    plant(run)
    assert runverdict.latest_verdict(run).status == "UNPROVEN", gap


def _drop_check(run, name):
    record = json.loads((run / "verification.json").read_text())
    record["checks"] = [c for c in record["checks"] if c["name"] != name]
    (run / "verification.json").write_text(json.dumps(record))


def test_report_html_naming_a_fifo_is_refused_and_the_fifo_stays(tmp_path, capsys):
    run = make(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = main(["report", "--output-dir", str(run), "--profile", PROFILE, "--html", str(fifo)])
    err = capsys.readouterr().err
    assert code == 2 and "(GEN-E020)" in err and "a FIFO" in err
    assert err.splitlines()[1:] == [f"    HINT: {CATALOG['GEN-E020'][1]}"]  # the fix, once
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a device node")
def test_report_html_naming_a_device_is_refused_and_the_device_stays(tmp_path, capsys):
    run = make(tmp_path)
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    code = main(["report", "--output-dir", str(run), "--profile", PROFILE, "--html", str(null)])
    assert code == 2 and "(GEN-E020)" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(null).st_mode)


@pytest.mark.parametrize("make_node", [os.mkfifo, os.mkdir])
def test_a_record_is_never_written_over_a_fifo_or_folder(tmp_path, make_node):
    target = tmp_path / "verification.json"
    make_node(target)
    with pytest.raises(RecordError, match="GEN-E020") as caught:
        write_json(target, {"status": "passed"})
    assert caught.value.hint == CATALOG["GEN-E020"][1] and " — " not in str(caught.value)
    assert not target.is_file()


def test_install_never_writes_through_a_link_or_into_a_fifo(tmp_path, capsys):
    from prep import bundle
    dest = tmp_path / "bundle"
    dest.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (dest / f".{bundle.LAUNCHER_NAME}.installing").symlink_to(victim)  # copyfile would follow it
    os.mkfifo(dest / "SHA256SUMS")
    assert bundle.install_files(dest, force=True) is False
    assert "(GEN-E020)" in capsys.readouterr().err
    assert victim.read_text() == "keep me\n"
    assert stat.S_ISFIFO(os.lstat(dest / "SHA256SUMS").st_mode)
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        ["SHA256SUMS", f".{bundle.LAUNCHER_NAME}.installing"])


def test_the_report_names_the_verl_tree_manifest_it_was_judged_by(tmp_path, capsys):
    run = make(tmp_path)
    assert postflight_ids(run, capsys)[0] == 0
    assert main(["report", "--output-dir", str(run), "--profile", PROFILE]) == 0
    pin = load_profile(PROFILE).VERL_SUMS_SHA256
    assert f"tree SHA256SUMS {pin}" in (run / "report.html").read_text()


@pytest.mark.parametrize("edit", ["inputs root elsewhere", "inputs root gone", "run root elsewhere",
                                  "run root a megabyte long"])
def test_inputs_and_run_json_naming_other_storage_roots_fail_postflight(tmp_path, capsys, edit):
    """Both are written in the job from its STORAGE_ROOT; a resumed run's load is judged against
    run.json's, so a run.json edited to point elsewhere must be caught by the inputs record."""
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(run, load_profile(PROFILE), "exp-001", "/mnt/verl-reproduction", HOSTS,
                       run_json=True)
    name = "inputs.json" if edit.startswith("inputs") else "run.json"
    record = json.loads((run / name).read_text())
    if edit.endswith("gone"):
        del record["storage_root"]
    else:
        record["storage_root"] = "/" + "x" * (1 << 20) if "megabyte" in edit else "/mnt/elsewhere"
    (run / name).write_text(json.dumps(record))
    code, ids = postflight_ids(run, capsys)
    # run.json's root elsewhere: the resolved command names another root too (POST-E006); one
    # past PATH_MAX is no root at all, which the command check does not judge
    expected = {"POST-E073", "POST-E006"} if edit == "run root elsewhere" else {"POST-E073"}
    assert code == 1 and ids == expected, ids
    assert not (run / "SUCCESS").exists()
    message = json.loads((run / "verification.json").read_text())
    said = [f["message"] for c in message["checks"] for f in c["findings"] if f["id"] == "POST-E073"]
    assert len(said) == 1 and len(said[0]) < 1000
    assert ("no storage root" if edit.endswith("gone") else "/mnt/verl-reproduction") in said[0]


def test_a_run_whose_inputs_and_run_json_name_one_storage_root_passes(tmp_path, capsys):
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(run, load_profile(PROFILE), "exp-001", "/mnt/verl-reproduction", HOSTS,
                       run_json=True)
    assert json.loads((run / "inputs.json").read_text())["storage_root"] == "/mnt/verl-reproduction"
    assert postflight_ids(run, capsys) == (0, set())
