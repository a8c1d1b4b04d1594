"""make runs's glance at records of every size: the field is found wherever the writer's sorted
keys put it (the record's head, its tail or its middle), and make runs says what the report says
for healthy synthesized runs from 2 x 2 to 120 x 8 (records of 20 KiB to megabytes)."""
import contextlib
import io
import json
import shutil

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.formats import bounded
from twgrpo.run import budget, glance
from twgrpo.run.profile import load_profile, with_overrides

LIMIT = budget.Size().record_bytes  # a 2 x 2 run's record budget


def write_record(path, before: int, after: int, status="passed"):
    """A record as the bundle writes it (sorted keys, indent 2): `before` bytes of fields that
    sort before status, `after` bytes of fields that sort after it."""
    record = {"aaa": ["x" * 100] * (before // 110), "status": status,
              "zzz": ["y" * 100] * (after // 110)}
    path.write_text(synthrun.record_text(record))
    return path


@pytest.mark.parametrize("before,after", [
    (1 << 10, 1 << 10),        # read whole
    (12 << 10, 8 << 10),       # 20 KiB: was a negative seek (a real 2 x 2 preflight.json)
    (40 << 10, 20 << 10),      # 60 KiB, status in neither end's old window
    (20 << 10, 100 << 10),     # status more than 64 KiB from the end (103 nodes x 8)
    (3 << 20, 2 << 20),        # megabytes each side: found in the middle
    (100, 3 << 20),            # in the head
    (3 << 20, 100),            # in the tail
])
def test_the_status_is_found_wherever_sorted_keys_put_it(tmp_path, before, after):
    path = write_record(tmp_path / "preflight.json", before, after)
    assert glance.fields(path, ("status",), {"status": str}, LIMIT) == {"status": "passed"}


@pytest.mark.parametrize("window", [0, 1, 2, 5])
@pytest.mark.parametrize("shift", range(-8, 9))
def test_a_field_across_a_chunk_boundary_is_found(tmp_path, window, shift):
    """The status line placed across a middle window's end (the first, second, third, sixth),
    byte by byte."""
    edge, chunk = glance.HEAD - glance.OVERLAP, glance.FIRST_CHUNK
    for _ in range(window + 1):
        edge += chunk
        if _ < window:
            edge -= glance.OVERLAP
        chunk = min(2 * chunk, glance.CHUNK)
    record = {"aaa": "x" * (edge + shift - 20), "status": "failed", "zzz": "y" * (1 << 20)}
    path = tmp_path / "verification.json"
    path.write_text(synthrun.record_text(record))
    assert abs(path.read_bytes().find(b'"status"') - edge) < 32
    assert glance.fields(path, ("status",), {"status": str}, LIMIT) == {"status": "failed"}


def test_a_nested_status_is_not_taken_for_the_records_own(tmp_path):
    record = {"aaa": [{"status": "failed"}] * 3000, "status": "passed", "zzz": "y" * (200 << 10)}
    path = tmp_path / "preflight.json"
    path.write_text(synthrun.record_text(record))
    assert glance.fields(path, ("status",), {"status": str}, LIMIT) == {"status": "passed"}


def test_a_field_in_no_part_is_none_and_a_record_past_its_limit_is_unreadable(tmp_path):
    path = write_record(tmp_path / "preflight.json", 200 << 10, 200 << 10)
    assert glance.fields(path, ("phase",), {"phase": str}, LIMIT) == {"phase": None}
    with pytest.raises(bounded.Unreadable, match="more than the 100000"):
        glance.fields(path, ("status",), {"status": str}, limit=100_000)


def _status_lines(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (10, 8), (120, 8)])
def test_make_runs_says_success_like_the_report_for_a_healthy_run(tmp_path, nodes, gpus):
    """On main before this change: UNPROVEN at 2 x 2 (a 23 KiB preflight.json), INCOMPLETE at
    10 x 8 (a 25 KiB verification.json), UNPROVEN at 120 x 8 (status 70 KiB from the end)."""
    name = f"scale-{nodes}x{gpus}"
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=nodes, GPUS_PER_NODE=gpus,
                             TRAIN_BATCH_SIZE=nodes * gpus, PPO_MINI_BATCH_SIZE=nodes * gpus,
                             PROFILE_NAME=name)
    env = tmp_path / f"{name}.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()))
    hosts = [{"hostname": f"node-{i:04d}", "ip": f"10.{i >> 8}.{i & 255}.1"} for i in range(nodes)]
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp"
    synthrun.write_run(run, profile, "exp", "/mnt/verl-reproduction", hosts, noise=1, run_json=True)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    assert (run / "preflight.json").stat().st_size > glance.WHOLE
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path)])
    assert code == 0
    row = [line for line in listing.splitlines() if line.startswith("exp ")]
    assert len(row) == 1 and row[0].split()[-1] == "SUCCESS", listing
    code, report = _status_lines(["report", "--output-dir", str(run), "--profile", str(env)])
    assert code == 0 and "run exp: SUCCESS" in report
    assert json.loads((run / "verification.json").read_text())["status"] == "passed"


def test_a_big_run_without_run_json_has_one_verdict_in_every_view(tmp_path, monkeypatch):
    """A run whose run.json is gone and whose preflight.json is larger than a 2 x 2 run's record
    budget (a 2,048-node run's is 19 MB; the base budget is made small here): make runs, make
    report and make compare read it within the size postflight recorded, and all say SUCCESS
    (make runs and the report said UNPROVEN: preflight.json unreadable)."""
    monkeypatch.setattr(budget, "RECORD_BASE", 32 << 10)
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=120, GPUS_PER_NODE=8,
                             TRAIN_BATCH_SIZE=960, PPO_MINI_BATCH_SIZE=960, PROFILE_NAME="big")
    env = tmp_path / "big.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()))
    hosts = [{"hostname": f"node-{i:04d}", "ip": f"10.0.{i}.1"} for i in range(120)]
    runs = tmp_path / "runs" / "verl" / "two-worker-grpo"
    synthrun.write_run(runs / "exp", profile, "exp", "/mnt/verl-reproduction", hosts, noise=1, run_json=True)
    assert main(["postflight", "--output-dir", str(runs / "exp"), "--profile", str(env)]) == 0
    (runs / "exp" / "run.json").unlink()
    assert (runs / "exp" / "preflight.json").stat().st_size > budget.Size().record_bytes
    shutil.copytree(runs / "exp", runs / "other")
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path)])
    assert [line.split()[-1] for line in listing.splitlines() if line.startswith(("exp ", "other "))] == \
        ["SUCCESS", "SUCCESS"], listing
    code, report = _status_lines(["report", "--output-dir", str(runs / "exp")])
    assert "run exp: SUCCESS" in report, report
    code, compared = _status_lines(["compare", "--storage-root", str(tmp_path), "--run-id", "exp",
                                    "--against", "other"])
    assert [line.split(None, 1)[1] for line in compared.splitlines()
            if line.split()[:1] == ["verdict"]] == ["SUCCESS | SUCCESS"], compared


@pytest.mark.parametrize("damage", ["bytes after its end", "cut short"])
def test_a_large_record_that_is_not_whole_has_one_verdict_in_every_view(tmp_path, damage):
    """A 10 x 8 run's verification.json (25 KiB: glanced at, not parsed, by make runs) with
    bytes after its closing brace, or its end cut off: make runs said SUCCESS where the report,
    which parses it, said INCOMPLETE."""
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=10, GPUS_PER_NODE=8,
                             TRAIN_BATCH_SIZE=80, PPO_MINI_BATCH_SIZE=80, PROFILE_NAME="wide")
    env = tmp_path / "wide.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()))
    hosts = [{"hostname": f"node-{i:04d}", "ip": f"10.0.{i}.1"} for i in range(10)]
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp"
    synthrun.write_run(run, profile, "exp", "/mnt/verl-reproduction", hosts, noise=1, run_json=True)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    record = run / "verification.json"
    assert record.stat().st_size > glance.WHOLE
    text = record.read_bytes()
    record.write_bytes(text + b"garbage\xff\n" if damage == "bytes after its end" else text[:-40])
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path), "--format", "json"])
    listed = [row["verdict"].split()[0] for row in json.loads(listing)]
    code, report = _status_lines(["report", "--output-dir", str(run), "--profile", str(env)])
    told = [line.split()[2].rstrip(":") for line in report.splitlines() if line.startswith("run exp: ")]
    assert listed == told and told != ["SUCCESS"], (listing, report)


def test_a_long_postflight_output_after_training_ended_keeps_the_run_a_success_in_make_runs(tmp_path):
    """The launcher's line that training ended is followed in driver.log by postflight's output
    (a line for each node's failed slice at thousands of nodes): make runs, which reads the
    log's end, looked only at its last 64 KiB and called a healthy run UNPROVEN."""
    run, env = synthrun.healthy_run(tmp_path, 2, 2)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    log = run / "driver.log"
    text = log.read_text()
    ended = text.index("phase training ended")
    cut = text.index("\n", ended) + 1
    slices = "".join(f"postflight: a node's slice failed (TimeoutError); checked here instead {n}\n"
                     for n in range(40_000))  # 3 MiB
    log.write_text(text[:cut] + slices + text[cut:])
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path), "--format", "json"])
    assert [row["verdict"].split()[0] for row in json.loads(listing)] == ["SUCCESS"], listing
    code, report = _status_lines(["report", "--output-dir", str(run), "--profile", str(env)])
    assert "run exp: SUCCESS" in report
    log.write_text(text[:ended - 40] + slices)  # no line that training ended: UNPROVEN in both
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path), "--format", "json"])
    assert [row["verdict"].split()[0] for row in json.loads(listing)] == ["UNPROVEN"], listing
    code, report = _status_lines(["report", "--output-dir", str(run), "--profile", str(env)])
    assert "run exp: UNPROVEN" in report


def test_a_small_verification_json_is_judged_by_its_checks_in_make_runs_too(tmp_path):
    """A record the glance reads whole anyway: make runs takes its checks list, as the report
    does, not its passed_checks line (which said every check passed where one had failed)."""
    run, env = synthrun.healthy_run(tmp_path, 2, 2, probe_bytes=500)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    path = run / "verification.json"
    record = json.loads(path.read_text())
    record["checks"][-1]["status"] = "failed"
    path.write_text(synthrun.record_text(record))
    assert path.stat().st_size <= glance.WHOLE
    code, listing = _status_lines(["runs", "--storage-root", str(tmp_path), "--format", "json"])
    code, report = _status_lines(["report", "--output-dir", str(run), "--profile", str(env)])
    assert [row["verdict"].split()[0] for row in json.loads(listing)] == ["UNPROVEN"], listing
    assert "run exp: UNPROVEN" in report, report


def test_every_view_reads_a_record_past_the_former_16_mib_cap_of_a_big_run(tmp_path):
    """A 600-node run's verification.json of 20 MiB (a long run's): within its budget, so the
    whole-record readers (runverdict, report) and the glance agree that it passed."""
    from twgrpo.run import runrecord, runverdict
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=600, GPUS_PER_NODE=8)
    run = tmp_path / "run"
    run.mkdir()
    synthrun.write_run_json(run, profile, "run", "/mnt/verl-reproduction")
    write_record(run / "verification.json", 12 << 20, 8 << 20)
    assert runrecord.size(run).record_bytes > (run / "verification.json").stat().st_size > 16 << 20
    assert runverdict.record_status(run, "verification.json") == "passed"
    within = runrecord.size(run).record_bytes
    assert glance.fields(run / "verification.json", ("status",), {"status": str}, within)["status"] == "passed"
    (run / "run.json").unlink()  # a 2 x 2 run's budget is smaller than this record
    assert runverdict.record_status(run, "verification.json") == "unreadable"
    with pytest.raises(bounded.Unreadable):
        glance.fields(run / "verification.json", ("status",), {"status": str},
                      runrecord.size(run).record_bytes)



def test_a_big_run_without_run_json_is_read_within_the_budget_postflight_recorded(tmp_path):
    """A 2,048-node run whose run.json is gone: its records are larger than a 2 x 2 run's
    budget, and every view reads them within the size of the profile postflight recorded at the
    end of verification.json (make runs said UNPROVEN where the report said SUCCESS)."""
    from twgrpo.run import runrecord, runverdict
    run = tmp_path / "run"
    run.mkdir()
    values = {"NODES": "2048", "GPUS_PER_NODE": "8", "TARGET_STEPS": "2"}
    record = {"evidence": {"pad": ["x" * 100] * ((18 << 20) // 110)}, "phase": "postflight",
              "profile": {"name": "big", "values": values}, "run_id": "run", "status": "passed"}
    (run / "verification.json").write_text(synthrun.record_text(record))
    assert (run / "verification.json").stat().st_size > budget.Size().record_bytes
    assert runrecord.size(run).nodes == 2048
    assert runverdict.record_status(run, "verification.json") == "passed"
    assert glance.fields(run / "verification.json", ("status",), {"status": str},
                         runrecord.size(run).record_bytes)["status"] == "passed"