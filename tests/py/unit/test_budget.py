"""The run's budget (run/budget.py): limits that grow with the run's own size, read from its
run.json, and ceilings that a hostile run.json cannot lift."""
import json

from twgrpo.run import budget, runrecord


def test_limits_grow_with_nodes_ranks_and_steps():
    small, wide, long = budget.Size(), budget.Size(2048, 8, 2), budget.Size(2, 2, 100_000)
    assert small.record_bytes == budget.RECORD_BASE + 2 * budget.RECORD_PER_NODE + \
        4 * budget.RECORD_PER_RANK + 2 * budget.RECORD_PER_STEP
    assert wide.record_bytes > 19 << 20 and wide.items > 3 * 16384 and wide.evidence > 16384 * 9
    assert long.items > 100_000 and long.evidence > 3 * 100_000
    assert small.record_memory < wide.record_memory


def test_a_hostile_run_json_cannot_lift_the_ceilings(tmp_path):
    values = {"NODES": "999999999", "GPUS_PER_NODE": "4096", "TARGET_STEPS": "999999999"}
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": values}}))
    size = runrecord.size(tmp_path)
    assert (size.nodes, size.gpus_per_node, size.steps) == \
        (budget.MOST_NODES, budget.MOST_GPUS_PER_NODE, budget.MOST_STEPS)
    assert size.record_bytes == budget.CEILING_BYTES and size.record_memory == budget.CEILING_MEMORY
    assert size.evidence == budget.CEILING_EVIDENCE
    assert size.items == budget.CEILING_ITEMS  # a file list of 42 million names was allowed once
    assert budget.Size(2048, 8, 100_000).items < budget.CEILING_ITEMS  # no healthy run meets it


def test_what_is_not_a_count_gives_the_default_size(tmp_path):
    for values in ({"NODES": "-3"}, {"NODES": "1e9"}, {"NODES": "٣"}, {"NODES": "0" * 40}, "x"):
        (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": values}}))
        assert runrecord.size(tmp_path).nodes == budget.Size().nodes
    (tmp_path / "run.json").write_text("{")
    assert runrecord.size(tmp_path) == budget.Size()
    (tmp_path / "run.json").unlink()
    assert runrecord.size(tmp_path) == budget.Size()


def test_a_run_json_over_a_mebibyte_gives_its_size_from_the_profile_in_its_head(tmp_path):
    """A resumed run's lineage hashes every checkpoint file: past MOST_BYTES the record is not
    parsed for its size; the profile the writer puts before the lineage is."""
    from twgrpo.run.records import write_json
    files = {f"actor/shard_{n:06d}.pt": "0" * 64 for n in range(12_000)}
    write_json(tmp_path / "run.json", {"profile": {"name": "big", "values": {"NODES": "1500", "GPUS_PER_NODE": "8"}},
                                       "resume": {"files": files}, "run_id": "B"})
    assert (tmp_path / "run.json").stat().st_size > runrecord.MOST_BYTES
    assert (runrecord.size(tmp_path).nodes, runrecord.size(tmp_path).ranks) == (1500, 12_000)
    assert len(runrecord.read(tmp_path)["resume"]["files"]) == 12_000  # read whole, within its budget
    # No profile in the head (a lineage first, or a hostile file of openings): the default size.
    for head in (b'{\n  "resume": {\n' + b"x" * (300 << 10), b'\n  "profile": {\n' * (200 << 10)):
        (tmp_path / "run.json").write_bytes(head + b"\n}")
        assert runrecord.size(tmp_path) == budget.Size()


def test_without_a_readable_run_json_the_size_is_the_profile_postflight_recorded(tmp_path):
    """verification.json holds the profile after its evidence: its last bytes are searched, at
    any size; run.json's profile, where it can be read, comes first."""
    from twgrpo.run.records import write_json
    evidence = {"pad": ["x" * 100] * ((2 << 20) // 110)}  # the profile past the head's window
    write_json(tmp_path / "verification.json", {"evidence": evidence, "profile": {
        "name": "big", "values": {"NODES": "700", "GPUS_PER_NODE": "8"}}, "status": "passed"})
    assert runrecord.size(tmp_path).ranks == 5600
    (tmp_path / "run.json").write_text("{")  # unreadable: postflight's record still tells
    assert runrecord.size(tmp_path).ranks == 5600
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": {"NODES": "8"}}}))
    assert runrecord.size(tmp_path).nodes == 8
    (tmp_path / "run.json").unlink()
    # No profile in the tail (a hostile file of openings, or one past the window): the default.
    for tail in (b'\n  "profile": {\n' * (200 << 10), b'\n  "profile": {\n    "values": {"NODES": "9"}\n  }'
                 + b" " * (300 << 10)):
        (tmp_path / "verification.json").write_bytes(b"{" + tail + b"\n}")
        assert runrecord.size(tmp_path) == budget.Size()


def test_a_rewritten_run_json_is_read_again(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": {"NODES": "8"}}}))
    assert runrecord.size(tmp_path).nodes == 8
    (tmp_path / "run.json").write_text(json.dumps({"profile": {"values": {"NODES": "300"}}}))
    assert runrecord.size(tmp_path).nodes == 300


def test_the_reports_rollout_summary_counts_every_row_of_a_big_batch(tmp_path):
    from twgrpo.report import runview
    rows = "".join('{"input": "q", "output": "a", "score": 1.0, "step": 1}\n' for _ in range(30_000))
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "1.jsonl").write_text(rows)
    size = budget.of_values({"TRAIN_BATCH_SIZE": "15000", "ROLLOUT_N": "2"})
    assert size.rows == 30_000
    samples = runview.rollout_samples(tmp_path, [], size)
    assert samples[1]["count"] == 30_000
    assert runview.rollout_samples(tmp_path, [], budget.Size())[1]["count"] == runview.MAX_ROLLOUT_ROWS


def test_the_log_evidence_kept_grows_with_the_ranks_so_a_big_healthy_run_passes(tmp_path, monkeypatch):
    """With a base of 50 items (a constant cap far below 40 ranks' evidence), a healthy 5 x 8
    run passes: its budget adds EVIDENCE_PER_RANK a rank. A constant cap failed it with false
    missing-evidence findings (POST-E005, E008, E033)."""
    import synthrun
    from twgrpo.cli import main
    from twgrpo.formats import trainlines
    monkeypatch.setattr(budget, "EVIDENCE_BASE", 50)
    monkeypatch.setattr(trainlines, "KEEP", 50)
    run, env = synthrun.healthy_run(tmp_path, 5, 8)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    monkeypatch.setattr(budget, "EVIDENCE_PER_RANK", 0)  # a constant cap: fails the same run
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 1
    checks = json.loads((run / "verification.json").read_text())["checks"]
    failed = {f["id"] for c in checks for f in c["findings"]}
    assert "POST-E033" in failed


def test_a_rank_in_twenty_communicators_over_ib_stays_within_its_evidence_budget(tmp_path, monkeypatch):
    """Megatron-style process groups (tensor, pipeline, data, expert parallel, rollout) put a rank
    in many NCCL communicators besides the world's: each one's Init START and COMPLETE are
    evidence items. Twenty of them a rank over IB (its eight devices held too) pass; half the
    per-rank budget, enough for about ten, fails the same healthy run."""
    import re
    import synthrun
    from twgrpo.cli import main
    from twgrpo.formats import trainlines
    monkeypatch.setattr(budget, "EVIDENCE_BASE", 50)
    monkeypatch.setattr(trainlines, "KEEP", 50)
    run, env = synthrun.healthy_run(tmp_path, 5, 8, transport="ib")
    log = run / "training.log"
    lines = log.read_text().splitlines(True)
    groups = []
    for line in lines:
        if "Init COMPLETE" in line or "Init START" in line:
            for group in range(20):  # a communicator of 2 ranks: its own commId, nranks and rank
                groups.append(re.sub(r"commId 0x[0-9a-f]+", f"commId 0x{0xabc0 + group:x}",
                                     re.sub(r"rank (\d+) nranks \d+", lambda m: f"rank {int(m[1]) % 2} nranks 2", line)))
    log.write_text("".join(lines + groups))
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    monkeypatch.setattr(budget, "EVIDENCE_PER_RANK", budget.EVIDENCE_PER_RANK // 2)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 1
