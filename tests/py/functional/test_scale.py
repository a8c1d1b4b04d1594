"""Postflight at the size of real runs: a 512-node x 8-GPU run whose preflight.json holds each
node's whole probe (megabytes), and finding text that stays linear in the ranks."""
import json

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.run.profile import load_profile, with_overrides
from verification import failed_ids

NODES, GPUS = 512, 8
PROBE = {"env": {f"VAR_{i:03d}": "x" * 40 for i in range(100)}}  # about 6 KB a node, as a real probe


def big_profile(tmp_path):
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=NODES, GPUS_PER_NODE=GPUS,
                             TRAIN_BATCH_SIZE=NODES * GPUS, PPO_MINI_BATCH_SIZE=NODES * GPUS)
    path = tmp_path / "big-512x8.env"
    path.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()).replace(
        "PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=big-512x8"))
    return profile, path


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    profile, path = big_profile(tmp)
    hosts = [{"hostname": f"node-{i:04d}", "ip": f"10.{i >> 8}.{i & 255}.1"} for i in range(NODES)]
    run = tmp / "runs" / "verl" / "two-worker-grpo" / "exp-big"
    synthrun.write_run(run, profile, "exp-big", "/mnt/verl-reproduction", hosts, noise=2)
    record = json.loads((run / "preflight.json").read_text())
    record["nodes"] = [dict(PROBE, hostname=h["hostname"]) for h in hosts]
    (run / "preflight.json").write_text(json.dumps(record, indent=2))
    return run, path


def test_a_healthy_512_by_8_run_passes_though_preflight_json_is_megabytes(big_run):
    run, profile = big_run
    assert (run / "preflight.json").stat().st_size > 2 << 20
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    placement = json.loads((run / "actor-placement.json").read_text())
    assert len(placement["actors"]) == NODES * GPUS and set(placement["node_counts"].values()) == {GPUS}


def test_unknown_hosts_are_named_once_not_once_per_rank(big_run, tmp_path):
    run, profile = big_run
    record = json.loads((run / "preflight.json").read_text())
    for worker in record["workers"][1:]:  # preflight saw other machines than the log shows
        worker["hostname"] = "other-" + worker["hostname"]
    (run / "preflight.json").write_text(json.dumps(record))
    try:
        assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
        assert failed_ids(run) == {"POST-E010", "POST-E011"}
        text = (run / "verification.json").read_text()
        findings = [f for c in json.loads(text)["checks"] for f in c["findings"]
                    if f["id"] == "POST-E010"]
        assert len(findings) == NODES  # one for each of 511 unknown hosts, one listing preflight's
        assert "8 rank(s) (8-15) ran on host node-0001" in findings[0]["message"]
        assert sum(f["message"].count("other-node-0002") for f in findings) == 1
        # Linear in the ranks: 28 MB at this size when each rank's finding listed every host.
        assert len(json.dumps(findings)) < 256 << 10
    finally:
        (run / "SUCCESS").unlink(missing_ok=True)
        for moved in run.glob("SUCCESS.superseded-*"):
            moved.unlink()


def test_more_nodes_than_a_flat_item_cap_pass_and_a_wrong_shape_is_told_in_brief(tmp_path):
    """4,097 nodes: preflight's workers are read to the run's budget (a flat 4,096 once failed
    the run), and a stranger host's findings name a few nodes and the shape in runs, not all."""
    run, profile = synthrun.healthy_run(tmp_path, 4097, 1, probe_bytes=600)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    record = json.loads((run / "preflight.json").read_text())
    record["workers"][-1]["hostname"] = "stranger"
    (run / "preflight.json").write_text(json.dumps(record))
    (run / "SUCCESS").unlink()
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
    assert failed_ids(run) == {"POST-E010", "POST-E011"}
    messages = {f["id"] + " " + f["obj"]: f["message"] for c in json.loads((run / "verification.json").read_text())["checks"]
                for f in c["findings"]}
    assert messages["POST-E010 preflight.json"].endswith("and 4,081 more")
    assert "expected 1 (x4097), actual 1 (x4096)" in messages["POST-E011 actor placement"]
    assert max(map(len, messages.values())) < 2048


def test_postflight_and_the_report_read_preflight_json_within_one_budget(tmp_path, capsys):
    """A preflight.json past postflight's former bound (16 MiB for up to 256 nodes) but within
    the run's record budget: postflight passes, as the report and make runs read it."""
    run, profile = synthrun.healthy_run(tmp_path, 2, 2, probe_bytes=600)
    record = json.loads((run / "preflight.json").read_text())
    record["padding"] = "x" * ((16 << 20) + (64 << 10))
    (run / "preflight.json").write_text(json.dumps(record, indent=2, sort_keys=True))  # the writer's layout
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    capsys.readouterr()
    main(["report", "--output-dir", str(run), "--profile", str(profile)])
    assert "run exp: SUCCESS" in capsys.readouterr().out
    main(["runs", "--storage-root", str(tmp_path)])
    assert any(line.startswith("exp ") and line.split()[-1] == "SUCCESS" for line in capsys.readouterr().out.splitlines())


def test_a_failed_runs_cause_is_read_within_the_runs_budget(tmp_path):
    """FAILED's cause and make submit's line name the failed check of a preflight.json past the
    flat 16 MiB, as the report does."""
    from twgrpo.run import failedchecks
    run, _ = synthrun.healthy_run(tmp_path, 2, 2, probe_bytes=600)
    record = json.loads((run / "preflight.json").read_text())
    record["status"] = "failed"
    record["checks"] = [{"name": "node-count", "status": "failed", "findings": [{"id": "PRE-E012"}]}]
    record["padding"] = "x" * ((16 << 20) + (64 << 10))
    (run / "preflight.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    assert "preflight: node-count (PRE-E012)" in failedchecks.failed_checks(run)


def test_an_inputs_record_over_a_mebibyte_is_read_within_the_runs_budget(tmp_path):
    run, profile = synthrun.healthy_run(tmp_path, 2, 2, probe_bytes=600)
    record = json.loads((run / "inputs.json").read_text())
    record["padding"] = "x" * (3 << 19)  # 1.5 MiB: a large dataset manifest, say
    (run / "inputs.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
