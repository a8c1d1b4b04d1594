"""Postflight on synthesized runs (real line formats, W ranks over N hosts) and injected faults.

One table: each fault, the finding id it must raise, and that no other check failed.
Runs on artifacts captured from a real GPU run are in test_postflight_real.py.
"""
import json
import math
import re

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.run.profile import load_profile, with_overrides
from verification import failed_ids

HOSTS = [{"hostname": f"worker-{i}", "ip": f"10.231.0.{10 + i}"} for i in range(8)]


def make(tmp_path, profile="tutorial-2x2-a100", hosts=None, **options):
    prof = load_profile(profile)
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    synthrun.write_run(run, prof, "exp-001", "/mnt/verl-reproduction",
                       hosts or HOSTS[:prof.NODES], **options)
    return run


def postflight(run, *extra):
    return main(["postflight", "--output-dir", str(run), *extra])



def shard(run, kind="model", rank=3, world=4):
    return run / "checkpoints" / "global_step_2" / "actor" / f"{kind}_world_size_{world}_rank_{rank}.pt"


def remove_shard(run):
    shard(run).unlink()


def truncate_shard(run):
    data = shard(run, "optim").read_bytes()
    shard(run, "optim").write_bytes(data[: len(data) // 2])


def damage_zip_crc(run):
    path = shard(run, "extra_state", 0)
    data = bytearray(path.read_bytes())
    data[data.index(bytes(range(256))) + 100] ^= 0xFF  # inside a stored member's bytes
    path.write_bytes(bytes(data))


def wrong_fsdp_config(run):
    path = run / "checkpoints" / "global_step_2" / "actor" / "fsdp_config.json"
    path.write_text(json.dumps({"FSDP_version": 1, "world_size": 4}))


def tracker_mismatch(run):
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")


def missing_scalar(run):
    path = next((run / "tensorboard").iterdir())
    path.unlink()
    synthrun.write_events(path, [(s, {t: 1.0 for t in synthrun.TAGS if t != "actor/grad_norm"})
                                 for s in (1, 2)])


def tb_bad_crc(run):
    path = next((run / "tensorboard").iterdir())
    data = bytearray(path.read_bytes())
    data[14] ^= 0x01  # inside the first record's data (the file_version event)
    path.write_bytes(bytes(data))


def short_rollout(run):
    path = run / "rollouts" / "2.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:5]))


def wrong_rollout_step(run):
    path = run / "rollouts" / "1.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[3]["step"] = 2
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def nan_rollout_score(run):
    path = run / "rollouts" / "2.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["score"] = math.nan
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def drop_validate_line(run):
    log = run / "training.log"
    log.write_text("".join(l for l in log.read_text().splitlines(keepends=True) if "validate_config" not in l))


def engine_changed(run):
    path = run / "resolved-command.txt"
    path.write_text(path.read_text().replace("rollout.name=sglang", "rollout.name=vllm"))


def no_event_file(run):
    for path in (run / "tensorboard").iterdir():
        path.unlink()


def no_dataloader_state(run):
    (run / "checkpoints" / "global_step_2" / "data.pt").unlink()


def second_comm_other_placement(run):
    """A second world-size communicator whose ranks 0 and 1 sit in each other's processes."""
    log = run / "training.log"
    lines = log.read_text().splitlines(keepends=True)
    swap = {"0": "1", "1": "0"}
    extra = []
    for line in lines:
        if "ncclCommInitRankConfig" in line and "commId 0x" in line:
            line = re.sub(r"commId 0x[0-9a-f]{4}", "commId 0xfeed", line)  # same length: 16 digits
            extra.append(re.sub(r"rank ([01]) nranks", lambda m: f"rank {swap[m.group(1)]} nranks", line))
    log.write_text("".join(lines + extra))


def complete_on_another_device(run):
    """Rank 2's Init COMPLETE names another device than its START: two processes claim it."""
    log = run / "training.log"
    text = log.read_text()
    complete = next(line for line in text.splitlines()
                    if " rank 2 nranks " in line and line.endswith("Init COMPLETE"))
    moved = re.sub(r"cudaDev (\d+) nvmlDev (\d+)", "cudaDev 9 nvmlDev 9", complete)
    assert moved != complete
    log.write_text(text.replace(complete, moved))


def failed_preflight(run):
    path = run / "preflight.json"
    record = json.loads(path.read_text())
    record["status"] = "failed"
    path.write_text(json.dumps(record))


FAULTS = [
    # (name, options for the synthesized log, injection, expected finding id)
    ("missing rank shard", {}, remove_shard, "POST-E021"),
    ("truncated .pt", {}, truncate_shard, "POST-E022"),
    ("zip CRC damage", {}, damage_zip_crc, "POST-E022"),
    ("wrong fsdp_config", {}, wrong_fsdp_config, "POST-E023"),
    ("tracker mismatch", {}, tracker_mismatch, "POST-E025"),
    ("NaN scalar", {"nan_loss": True}, None, "POST-E017"),
    ("missing scalar", {}, missing_scalar, "POST-E016"),
    ("TB record with bad CRC", {}, tb_bad_crc, "POST-E015"),
    ("short rollout file", {}, short_rollout, "POST-E019"),
    ("wrong step in a rollout row", {}, wrong_rollout_step, "POST-E020"),
    ("non-finite rollout score", {}, nan_rollout_score, "POST-E020"),
    ("NCCL WARN line", {"nccl_warn": True}, None, "POST-E002"),
    ("a rank missing COMPLETE", {"drop_complete": 3}, None, "POST-E008"),
    ("a duplicated rank", {"duplicate_rank": 1}, None, "POST-E009"),
    ("a rank's COMPLETE on another device", {}, complete_on_another_device, "POST-E009"),
    ("3+1 ranks per node", {"per_node": [3, 1]}, None, "POST-E011"),
    ("IB not disabled", {"ib_value": "0"}, None, "POST-E013"),
    ("IB network used", {"network": "IB"}, None, "POST-E013"),
    ("no Gloo mesh lines", {"gloo": "none"}, None, "POST-E012"),
    ("no validate_config line", {}, drop_validate_line, "POST-E003"),
    ("rollout engine changed", {}, engine_changed, "POST-E006"),
    ("preflight did not pass", {}, failed_preflight, "POST-E007"),
    ("no TensorBoard event file", {}, no_event_file, "POST-E014"),
    ("no dataloader state", {}, no_dataloader_state, "POST-E024"),
    ("two communicators disagree", {}, second_comm_other_placement, "POST-E026"),
]


@pytest.mark.parametrize("name,options,inject,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_raises_its_finding_and_nothing_else(tmp_path, capsys, name, options, inject, expected):
    run = make(tmp_path, **options)
    if inject:
        inject(run)
    assert postflight(run) == 1
    assert failed_ids(run) == {expected}
    assert f"({expected})" in capsys.readouterr().out
    assert not (run / "SUCCESS").exists()


@pytest.mark.parametrize("gloo", ["new", "old"])
def test_both_gloo_line_forms_prove_the_full_mesh(tmp_path, gloo):
    run = make(tmp_path, gloo=gloo)
    assert postflight(run) == 0


def test_complete_lines_with_extra_fields_are_accepted(tmp_path):
    run = make(tmp_path, complete_extra=" localSize 2 used 1234 bytes on core 0")
    assert postflight(run) == 0


def test_a_clean_run_passes_and_writes_success_placement_and_verification(tmp_path):
    run = make(tmp_path)
    assert postflight(run) == 0
    placement = json.loads((run / "actor-placement.json").read_text())
    assert placement["status"] == "passed"
    assert sorted(placement["node_counts"].values()) == [2, 2]
    assert [a["rank"] for a in placement["actors"]] == [0, 1, 2, 3]
    assert all(a["connected_peer_ranks"] == 3 and a["nccl_transport"] == "Socket" for a in placement["actors"])
    assert json.loads((run / "verification.json").read_text())["status"] == "passed"
    assert re.match(r"^\d{4}-\d\d-\d\dT", (run / "SUCCESS").read_text())


def test_four_nodes_of_two_gpus_use_the_same_code(tmp_path):
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=4)
    path = tmp_path / "four-nodes.env"
    path.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()).replace(
        "PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=four-nodes"))
    run = make(tmp_path, profile=str(path), hosts=HOSTS[:4])
    assert postflight(run, "--profile", str(path)) == 0
    placement = json.loads((run / "actor-placement.json").read_text())
    assert sorted(placement["node_counts"].values()) == [2, 2, 2, 2]


def test_postflight_is_rerunnable_and_keeps_success(tmp_path):
    run = make(tmp_path)
    assert postflight(run) == 0
    first = (run / "SUCCESS").read_text()
    assert postflight(run) == 0
    assert (run / "SUCCESS").read_text() == first


def test_a_failing_rerun_supersedes_success_and_deletes_nothing(tmp_path):
    run = make(tmp_path)
    assert postflight(run) == 0
    first = (run / "SUCCESS").read_text()
    tracker_mismatch(run)
    assert postflight(run) == 1
    assert not (run / "SUCCESS").exists()  # SUCCESS never outlives its verification ...
    [moved] = run.glob("SUCCESS.superseded-*")
    assert moved.read_text() == first  # ... and nothing is deleted
    record = json.loads((run / "verification.json").read_text())
    assert record["status"] == "failed" and record["superseded_success"] == moved.name


def test_tutorial_flags_override_the_profile(tmp_path):
    run = make(tmp_path)
    assert postflight(run, "--target-steps", "3") == 1
    # Every finding that a third step which never ran must raise, and nothing else.
    assert failed_ids(run) == {"POST-E004", "POST-E005", "POST-E006", "POST-E017", "POST-E018",
                               "POST-E021", "POST-E023", "POST-E024", "POST-E025"}


def test_a_rank_on_a_host_preflight_did_not_see_is_named(tmp_path):
    run = make(tmp_path)
    record = json.loads((run / "preflight.json").read_text())
    record["workers"][1]["hostname"] = "replaced-node"
    (run / "preflight.json").write_text(json.dumps(record))
    assert postflight(run) == 1
    assert "POST-E010" in failed_ids(run)
    placement = json.loads((run / "actor-placement.json").read_text())
    assert any("worker-1" in f["message"] for f in placement["findings"] if f["id"] == "POST-E010")


def test_missing_run_folder_is_a_usage_error(tmp_path, capsys):
    assert postflight(tmp_path / "nope") == 2
    assert "no run folder" in capsys.readouterr().err


def test_the_run_folder_may_be_named_as_dot(tmp_path, monkeypatch, capsys):
    run = make(tmp_path)
    monkeypatch.chdir(run)
    assert postflight(".") == 0, capsys.readouterr().out
    assert json.loads((run / "verification.json").read_text())["status"] == "passed"


def test_dot_inside_a_symlinked_run_folder_is_refused_as_the_link_is(tmp_path, monkeypatch, capsys):
    run = make(tmp_path)
    link = run.parent / "exp-002"
    link.symlink_to(run, target_is_directory=True)
    monkeypatch.chdir(link)
    monkeypatch.setenv("PWD", str(link))  # as the shell sets it after cd into the link
    assert postflight(".") == 2
    assert "(POST-E040)" in capsys.readouterr().err
    assert not (run / "verification.json").exists()
    monkeypatch.chdir(link / "checkpoints")
    monkeypatch.setenv("PWD", str(link / "checkpoints"))
    assert postflight("..") == 2


@pytest.mark.parametrize("pwd", ["/" + "a" * 5000, "relative/x", "/nonexistent", "/", ""])
def test_a_pwd_that_is_not_this_folder_is_not_taken_for_it(tmp_path, monkeypatch, pwd):
    from twgrpo.cli.runargs import logical_absolute
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", pwd)
    assert logical_absolute(".") == tmp_path.resolve()


def test_missing_training_log_skips_the_log_checks(tmp_path, capsys):
    run = make(tmp_path)
    (run / "training.log").unlink()
    assert postflight(run) == 1
    out = capsys.readouterr().out
    assert "(POST-E001)" in out
    assert re.search(r"fatal-markers \.+ skipped \(no training log\)", out)


def test_a_run_without_run_json_says_which_profile_it_assumes(tmp_path, capsys):
    run = make(tmp_path)
    assert postflight(run) == 0
    assert (f"postflight: {run / 'run.json'} is missing; judging with the default profile "
            "tutorial-2x2-a100 (set PROFILE=<name>") in capsys.readouterr().err


def test_postflight_reads_the_event_file_once_for_all_its_checks(tmp_path, monkeypatch):
    from twgrpo.formats import tfevents
    run = make(tmp_path)
    read = []
    real = tfevents.read_records
    monkeypatch.setattr(tfevents, "read_records", lambda path, problems: read.append(path) or real(path, problems))
    assert postflight(run) == 0
    assert len(read) == 1


def test_a_fault_of_every_rank_is_told_once_in_each_view(tmp_path, capsys):
    """24 ranks without a Gloo line: the job log shows the first 10 findings and counts the
    rest, with the hint once; the record keeps all 24; the report counts every finding (these
    and the W020 of a run away from its inputs) and draws the first few."""
    profile = with_overrides(load_profile("tutorial-2x2-a100"), NODES=12)
    path = tmp_path / "twelve-nodes.env"
    path.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()).replace(
        "PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=twelve-nodes"))
    hosts = [{"hostname": f"worker-{i}", "ip": f"10.231.0.{10 + i}"} for i in range(12)]
    run = make(tmp_path, profile=str(path), hosts=hosts, gloo="none")
    assert postflight(run, "--profile", str(path)) == 1
    out = capsys.readouterr().out
    assert len(re.findall(r"^rank \d+ .*\(POST-E012\)", out, re.M)) == 10
    assert "... and 14 more (POST-E012) like these: verification.json and --format json list all 24\n" in out
    assert out.count("HINT: Keep GLOO_LOG_LEVEL") == 1
    record = json.loads((run / "verification.json").read_text())
    assert [f["id"] for c in record["checks"] for f in c["findings"]].count("POST-E012") == 24
    assert main(["report", "--output-dir", str(run), "--profile", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  findings  25\n" in out and len(re.findall(r"\(POST-E012\)", out)) == 4
    assert "    ... and 21 more (POST-E012) like these in verification.json\n" in out
    nodes = [line for line in out.splitlines() if line.startswith("  node ")]
    assert len(nodes) == 12 and all(line[12:].startswith("worker-") for line in nodes), nodes
    page = (run / "report.html").read_text()
    assert '<h2 id="findings">Findings (25)</h2>' in page and page.count("no Gloo full-mesh") == 10
    assert "... and 14 more (POST-E012) like these in verification.json" in page
    (run / "verification.json").unlink()
    assert main(["postflight", "--audit", "--output-dir", str(run), "--profile", str(path)]) == 1
    out = capsys.readouterr().out  # the audit writes no record: only --format json has them all
    assert "... and 14 more (POST-E012) like these: --format json lists all 24\n" in out
