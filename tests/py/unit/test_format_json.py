"""--format json: the findings a phase prints, one JSON object a line on stdout, then a summary;
the same findings as the text output, one for one, and nothing else on stdout."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from twgrpo.cli import main
from twgrpo.run.catalog import CATALOG
from test_postflight_real import FIXTURE, append_nan_grad_norm, damage_member
from test_recipe import profile_file
from verification import failed_ids

REPO = Path(__file__).resolve().parents[3]
TEXT_FINDING = re.compile(r"^(?P<obj>.*): \((?P<id>[A-Z]{2,6}-[EW]\d{3})\) (?P<message>.*)$")
FIELDS = {"id", "severity", "check", "message", "hint", "object"}


def copy_run(tmp_path, name):
    copy = tmp_path / name / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    for record in ("SUCCESS", "verification.json", "actor-placement.json"):
        (copy / record).unlink()  # the verdict is re-derived from the evidence
    return copy


def text_findings(out):
    """(object, id, message, hint) of every finding in a phase's text output."""
    lines = out.splitlines() + [""]
    return [(m["obj"], m["id"], m["message"], lines[i + 1].partition("    HINT: ")[2])
            for i, line in enumerate(lines[:-1]) if (m := TEXT_FINDING.match(line))]


def json_lines(out):
    """Every stdout line is one JSON object; the findings, then the summary."""
    objects = [json.loads(line) for line in out.splitlines()]
    assert objects, "no JSON on stdout"
    return objects[:-1], objects[-1]


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fault", [None, damage_member, append_nan_grad_norm])
@pytest.mark.parametrize("audit", [[], ["--audit"]])
def test_json_holds_the_text_outputs_findings_one_for_one(tmp_path, capsys, fault, audit):
    runs = [copy_run(tmp_path, name) for name in ("text", "json")]
    for folder in runs:
        if fault:
            fault(folder)
    text_code, text, _ = run(["postflight", "--output-dir", str(runs[0]), *audit], capsys)
    code, out, err = run(["postflight", "--output-dir", str(runs[1]), *audit, "--format",
                          "json"], capsys)
    found, summary = json_lines(out)
    assert code == text_code and summary == {
        "phase": "audit" if audit else "postflight", "exit": code,
        "status": "passed" if code == 0 else "failed"}
    assert all(set(f) == FIELDS for f in found)
    mine = [(f["object"].replace(str(runs[1]), str(runs[0])), f["id"],
             f["message"].replace(str(runs[1]), str(runs[0])), f["hint"]) for f in found]
    assert mine == text_findings(text) and all(f["hint"] == CATALOG[f["id"]][1] for f in found)
    # the person's lines are all on stderr: the same status lines and verdict as text mode
    assert "postflight: training-log " in err and "postflight: training-log " not in out
    assert [line for line in err.splitlines() if line.startswith("postflight: ") and " ..." in line] \
        == [line for line in text.splitlines() if line.startswith("postflight: ") and " ..." in line]


def test_a_failed_runs_json_names_its_failed_ids_and_check(tmp_path, capsys):
    folder = copy_run(tmp_path, "run")
    damage_member(folder)
    code, out, _ = run(["postflight", "--output-dir", str(folder), "--format=json"], capsys)
    found, summary = json_lines(out)
    assert code == 1 and summary == {"phase": "postflight", "status": "failed", "exit": 1}
    errors = {f["id"] for f in found if f["severity"] == "error"}
    assert errors and errors == failed_ids(folder)
    assert {f["check"] for f in found if f["severity"] == "error"} == {"checkpoint"}


def test_check_profile_and_inputs_print_json_too(tmp_path, capsys):
    path = profile_file(tmp_path, EXTRA_OVERRIDES="data.shuffle")
    text_code, text, _ = run(["check-profile", "--profile", str(path)], capsys)
    code, out, _ = run(["check-profile", "--profile", str(path), "--format", "json"], capsys)
    found, summary = json_lines(out)
    assert code == text_code == 1 and summary["phase"] == "check-profile"
    assert [f["id"] for f in found] == [t[1] for t in text_findings(text)] and "GEN-E051" in out
    code, out, _ = run(["inputs", "--storage-root", str(tmp_path), "--format", "json"], capsys)
    found, summary = json_lines(out)
    assert code == 1 and summary == {"phase": "inputs", "status": "failed", "exit": 1}
    assert found and {f["check"] for f in found} <= {"storage-mount", "verl-checkout",
                                                     "model-files", "model-weights", "data-files",
                                                     "dataset-manifest", "parquet-rows",
                                                     "reward-file", "data-converter",
                                                     "storage-writable"}


def test_a_refusal_in_json_is_one_object(tmp_path, capsys):
    code, out, err = run(["postflight", "--output-dir", str(tmp_path / "none"), "--format",
                          "json"], capsys)
    (refusal,) = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and refusal["status"] == "refused" and refusal["exit"] == 2
    assert refusal["id"] is None and "no run folder" in refusal["message"] and "no run folder" in err
    assert set(refusal) == FIELDS | {"phase", "status", "exit"}


def test_preflight_refuses_in_json_before_it_asks_ray(tmp_path, capsys):
    code, out, _ = run(["preflight", "--storage-root", str(tmp_path), "--format", "json"], capsys)
    (refusal,) = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and refusal["phase"] == "preflight" and "name the run" in refusal["message"]


def test_a_refusal_with_an_id_carries_its_hint(tmp_path, capsys):
    folder = copy_run(tmp_path, "run")
    os.symlink(tmp_path / "elsewhere.json", folder / "verification.json")
    code, out, _ = run(["postflight", "--output-dir", str(folder), "--format", "json"], capsys)
    *found, refusal = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and refusal["id"] == "GEN-E004" and refusal["exit"] == 1
    assert refusal["hint"] == CATALOG["GEN-E004"][1] and refusal["phase"] == "postflight"
    assert refusal["message"].startswith(f"{folder / 'verification.json'} is a symlink")
    assert not (tmp_path / "elsewhere.json").exists()


def test_an_argparse_refusal_in_json_is_one_object(capsys):
    code, out, err = run(["postflight", "--world-size", "two", "--format", "json"], capsys)
    (refusal,) = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and refusal["exit"] == 2 and "--world-size" in refusal["message"]
    assert "invalid int value" in err


@pytest.mark.parametrize("word", ["yaml", "JSON", ""])
def test_a_bad_format_is_refused_and_nothing_is_written(tmp_path, capsys, word):
    folder = copy_run(tmp_path, "run")
    code, out, err = run(["postflight", "--output-dir", str(folder), "--format", word], capsys)
    assert code == 2 and out == "" and "argument --format: invalid choice" in err
    assert not (folder / "verification.json").exists() and not (folder / "SUCCESS").exists()


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    folder = copy_run(tmp_path, "run")
    damage_member(folder)
    verify = REPO / "tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py"
    child = subprocess.Popen([sys.executable, str(verify), "postflight", "--output-dir",
                              str(folder), "--format", "json"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    child.stdout.close()  # `| head -0`: whatever comes, nobody reads it
    err = child.stderr.read()
    assert child.wait() == 1 and "Traceback" not in err and "postflight: FAILED" in err


def test_text_stays_the_default(tmp_path, capsys):
    code, out, _ = run(["check-profile"], capsys)
    assert code == 0 and out.startswith("check-profile: ") and "{" not in out


def make(*words):
    return subprocess.run(["make", "--no-print-directory", *words], cwd=REPO, capture_output=True,
                          text=True)


@pytest.mark.parametrize("target, phase", [("postflight", "postflight"), ("audit", "postflight"),
                                           ("verify-inputs", "inputs"),
                                           ("check-profile", "check-profile")])
def test_make_passes_format_through(target, phase):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    assert '--format="json"' in make("-n", target, "RUN_ID=r1", "FORMAT=json").stdout
    assert '--format="text"' in make("-n", target, "RUN_ID=r1").stdout


def test_make_json_prints_json_alone_on_stdout(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = make("verify-inputs", f"PREP_ROOT={tmp_path}", "FORMAT=json")
    found, summary = json_lines(done.stdout)  # no echoed recipe: every line is JSON
    assert done.returncode != 0 and summary["phase"] == "inputs" and found
    assert "inputs: storage-mount " in done.stderr
