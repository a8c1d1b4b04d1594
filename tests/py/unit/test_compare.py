"""make compare on real GPU runs: the fresh 1x1 run, the preempted run and its resumption, the
two-host run. Each comparison must name exactly what really differs between the runs, and
nothing else; a metric drift planted beyond the tolerance is named; the run folders are never
written.

What really differs, from the fixtures' README files and records: the fresh and the two-host run
were recorded by one bundle version, the preempted run and its resumption by an older one
(their run.json's bundle_sums_sha256 and launcher_sha256 differ; the older launcher set no NCCL
flight recorder variables and named the project two-worker-grpo, where the newer one takes
PROJECT_NAME, verl_aistudio by default), the resumed run
inherited step 1 from its parent (run.json's resume record, verl's resume overrides), and the
two-host run ran on 2 Ray hosts with one rank each (profile smoke-2x1: NODES=2,
trainer.nnodes=2). Pins, recipe, packages, python and the NVIDIA driver are the same.
"""
import json
import os

import pytest
from compareruns import FRESH, PARENT, RESUMED, TWO_HOST, planted_copy, storage_with_real_runs
from twgrpo.cli import main

BUNDLE = {("bundle", "bundle SHA256SUMS"), ("bundle", "launcher sha256")}
LINEAGE = {("lineage", "resumed from"), ("lineage", "steps inherited"),
           ("lineage", "override trainer.resume_mode"), ("lineage", "override trainer.resume_from_path"),
           ("lineage", "override trainer.del_local_ckpt_after_load")}
# What the newer launcher adds to the training command (absent from the older fixtures' commands).
NEWER = {("recipe", f"override +ray_kwargs.ray_init.runtime_env.env_vars.{name}") for name in (
    "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_TRACE_BUFFER_SIZE")}
PROJECT = {("recipe", "override trainer.project_name")}
TOPOLOGY = {("topology", w) for w in ("NODES", "world size", "Ray nodes (preflight)", "GPUs (preflight)",
                                      "ranks per node (training.log)", "override trainer.nnodes")}


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare") / "storage"
    runs = storage_with_real_runs(root)
    planted_copy(runs, FRESH, "fresh-copy")
    planted_copy(runs, FRESH, "fresh-drift", "critic/score/mean", 0.5)
    never = planted_copy(runs, FRESH, "never-trained")
    for folder in ("tensorboard", "rollouts", "checkpoints"):
        for path in sorted((never / folder).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (never / folder).rmdir()
    return root


def snapshot(root):
    """Every path under the runs folder with its size and modification time."""
    runs = root / "runs" / "verl" / "two-worker-grpo"
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in runs.rglob("*")}


def compare(capsys, root, run, *against, extra=()):
    argv = ["compare", "--storage-root", str(root), "--run-id", run, "--format", "json", *extra]
    for name in against:
        argv += ["--against", name]
    code = main(argv)
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code in (0, 1) else None), captured.err


def differences(pair):
    return {(d["aspect"], d["what"]) for d in pair["differences"]}


def test_the_resumed_run_against_the_fresh_run_differs_in_lineage_and_its_older_launcher_only(volume, capsys):
    before = snapshot(volume)
    code, data, _ = compare(capsys, volume, RESUMED, FRESH)
    assert code == 1
    pair = data["pairs"][0]
    assert differences(pair) == BUNDLE | LINEAGE | NEWER | PROJECT
    project = next(d for d in pair["differences"] if (d["aspect"], d["what"]) in PROJECT)
    assert (project["run"], project["against"]) == ("two-worker-grpo", "verl_aistudio")
    assert all(d["run"] == "(not set)" for d in pair["differences"] if (d["aspect"], d["what"]) in NEWER)
    steps = next(d for d in pair["differences"] if d["what"] == "steps inherited")
    assert (steps["run"], steps["against"]) == ("1", "0")
    parent = next(d for d in pair["differences"] if d["what"] == "resumed from")
    assert parent["run"] == f"{PARENT} at step 1"
    assert pair["aspects"]["topology"][1] == 0 and pair["aspects"]["pins"][1] == 0
    assert [j["tag"] for j in pair["metrics"]["judged"] if j["verdict"] == "differs"] == []
    assert pair["headline"].startswith("differs first in recipe: override +ray_kwargs")
    assert snapshot(volume) == before  # neither run folder was written


def test_the_two_host_run_against_the_one_host_run_differs_in_topology_only(volume, capsys):
    code, data, _ = compare(capsys, volume, TWO_HOST, FRESH)
    pair = data["pairs"][0]
    assert code == 1
    assert differences(pair) == TOPOLOGY
    ranks = next(d for d in pair["differences"] if d["what"] == "ranks per node (training.log)")
    assert (ranks["run"], ranks["against"]) == ("1 + 1", "1")
    assert pair["aspects"]["lineage"][1] == 0 and pair["aspects"]["environment"][1] == 0
    assert [j["tag"] for j in pair["metrics"]["judged"] if j["verdict"] == "differs"] == []
    assert "CMP-W002" in {n["id"] for n in data["notes"]}  # two profiles: said, not hidden


def test_a_copy_of_a_run_is_the_same_and_exits_0(volume, capsys):
    code, data, _ = compare(capsys, volume, "fresh-copy", FRESH)
    assert code == 0 and data["same"]
    assert data["pairs"][0]["differences"] == []
    assert data["pairs"][0]["not_compared"] == ["reward", "image"]  # said, not hidden
    assert data["pairs"][0]["headline"].startswith("same inputs and recipe; metrics within tolerance")


def test_a_planted_metric_drift_beyond_tolerance_is_named(volume, capsys):
    code, data, _ = compare(capsys, volume, "fresh-drift", FRESH)
    pair = data["pairs"][0]
    assert code == 1 and pair["differences"] == []
    drifted = [j for j in pair["metrics"]["judged"] if j["verdict"] == "differs"]
    assert [j["tag"] for j in drifted] == ["critic/score/mean"]
    assert drifted[0]["mean"] == [0.5, 0.0] and drifted[0]["difference"] == 0.5
    assert "1 metric beyond tolerance: critic/score/mean" in pair["headline"]


def test_a_tolerance_wider_than_the_drift_lets_it_pass(volume, capsys):
    code, data, _ = compare(capsys, volume, "fresh-drift", FRESH, extra=["--tolerance", "100%"])
    assert code == 0 and data["tolerance"] == 1.0


def test_the_text_summary_names_the_drift_and_the_page_lies_outside_both_runs(volume, capsys):
    assert main(["compare", "--storage-root", str(volume), "--run-id", "fresh-drift",
                 "--against", FRESH]) == 1
    out = capsys.readouterr().out
    assert "differs  critic/score/mean: 0.5 vs 0" in out
    page = volume / "runs" / "verl" / "two-worker-grpo-compare" / f"fresh-drift-vs-{FRESH}.html"
    assert f"compare: {page}" in out and page.is_file()
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "Content-Security-Policy" in text
    assert 'data-tag="critic/score/mean" data-verdict="differs"' in text


def test_a_run_that_never_trained_compares_on_what_it_has(volume, capsys):
    code, data, _ = compare(capsys, volume, "never-trained", FRESH)
    pair = data["pairs"][0]
    assert code == 0 and pair["differences"] == []
    assert pair["metrics"]["judged"] == [] and len(pair["metrics"]["only_other"]) > 30
    assert "CMP-W001" in {n["id"] for n in data["notes"]}
    assert "no metrics to compare" in pair["headline"]
    assert data["rollouts"] is None


def test_several_references_are_compared_one_by_one(volume, capsys):
    code, data, _ = compare(capsys, volume, FRESH, "fresh-copy", RESUMED, TWO_HOST)
    assert code == 1 and [p["against"] for p in data["pairs"]] == ["fresh-copy", RESUMED, TWO_HOST]
    assert [p["same"] for p in data["pairs"]] == [True, False, False]
    assert differences(data["pairs"][2]) == TOPOLOGY
    assert data["rollouts"]["step"] == 2 and data["rollouts"]["shared"] == 4


@pytest.mark.parametrize("extra, fid", [
    (["--run-id", "no-such-run", "--against", FRESH], "CMP-E001"),
    (["--run-id", FRESH, "--against", f"{FRESH} {FRESH}"], "CMP-E002"),
    (["--run-id", FRESH, "--against", RESUMED, "--tolerance", "abc"], "CMP-E003"),
    (["--run-id", FRESH, "--against", RESUMED, "--tolerance", "nan"], "CMP-E003"),
    (["--run-id", FRESH, "--against", RESUMED, "--html", "INSIDE/page.html"], "CMP-E004"),
])
def test_bad_requests_exit_2_with_their_id_and_write_nothing(volume, capsys, extra, fid):
    extra = [a.replace("INSIDE", str(volume / "runs/verl/two-worker-grpo" / RESUMED)) for a in extra]
    before = snapshot(volume)
    assert main(["compare", "--storage-root", str(volume), *extra]) == 2
    assert f"({fid})" in capsys.readouterr().err
    assert snapshot(volume) == before


def test_a_link_to_a_run_folder_is_not_followed_into(volume, capsys):
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    os.symlink(runs / FRESH, runs / "a-link")
    try:
        assert main(["compare", "--storage-root", str(volume), "--run-id", "a-link", "--against", FRESH]) == 2
        assert "(CMP-E001)" in capsys.readouterr().err
    finally:
        (runs / "a-link").unlink()


def test_a_fact_only_one_run_records_is_said_not_compared(volume, capsys):
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    newer = planted_copy(runs, FRESH, "older-bundle")
    record = json.loads((newer / "run.json").read_text())
    del record["bundle_version"]  # as a bundle before that field recorded it
    (newer / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))
    code, data, _ = compare(capsys, volume, "older-bundle", FRESH)
    pair = data["pairs"][0]
    assert code == 0 and pair["differences"] == []
    assert pair["not_compared"] == ["reward", "bundle version", "image"]  # no bundle records those two
    note = next(n for n in data["notes"] if n["id"] == "CMP-W003")
    assert "bundle version" in note["message"]


def test_non_finite_and_huge_scalars_still_give_strict_json(volume, capsys):
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    planted_copy(runs, FRESH, "nan-run", "critic/score/mean", float("nan"))
    planted_copy(runs, FRESH, "huge-run", "actor/pg_loss", 1.7e38)  # float32's largest
    for run in ("nan-run", "huge-run"):
        argv = ["compare", "--storage-root", str(volume), "--run-id", run, "--against", FRESH,
                "--format", "json"]
        assert main(argv) in (0, 1)
        data = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
        assert data["pairs"][0]["differences"] == []
    huge = data["pairs"][0]["metrics"]["judged"]
    assert [j["tag"] for j in huge if j["verdict"] == "differs"] == ["actor/pg_loss"]


def test_a_page_that_cannot_be_written_still_prints_the_summary_then_exits_2(volume, capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    before = snapshot(volume)
    assert main(["compare", "--storage-root", str(volume), "--run-id", "fresh-copy", "--against", FRESH,
                 "--html", str(blocker / "page.html")]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("compare fresh-copy against ") and "COMPARE_HTML" in captured.err
    assert snapshot(volume) == before


def test_a_prompt_of_200_kib_is_matched_by_its_hash_and_shown_cut(volume, capsys):
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    rows = [{"input": "p" * (200 << 10), "output": "o" * 5000, "score": 1.0, "step": 2}] * 3
    for name in ("long-prompt-a", "long-prompt-b"):
        planted_copy(runs, FRESH, name)
        (runs / name / "rollouts" / "2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, data, _ = compare(capsys, volume, "long-prompt-a", "long-prompt-b")
    roll = data["rollouts"]
    assert roll["step"] == 2 and roll["shared"] == 1 and roll["of"] == 1
    assert len(roll["prompts"][0]["prompt"]) < 700 and len(roll["prompts"][0]["runs"][0]) == 2


def test_scalars_past_the_chart_limit_are_said_not_compared(volume, capsys):
    from tbevents import write_events
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    for name in ("many-a", "many-b"):
        run = planted_copy(runs, FRESH, name)
        write_events(run / "tensorboard" / "events.out.tfevents.9999999999.host.1.0",
                     [(s, {f"extra/{i:03d}": 1.0 for i in range(100)}) for s in (1, 2)])
    assert main(["compare", "--storage-root", str(volume), "--run-id", "many-a", "--against", "many-b"]) == 0
    assert "not compared: 68 scalars past the first 96 a run logged" in capsys.readouterr().out


def test_a_folder_without_run_json_cannot_be_called_the_same(volume, capsys):
    runs = volume / "runs" / "verl" / "two-worker-grpo"
    (runs / "log-only").mkdir()
    (runs / "log-only" / "driver.log").write_bytes((runs / FRESH / "driver.log").read_bytes())
    code, data, _ = compare(capsys, volume, "log-only", FRESH)
    pair = data["pairs"][0]
    assert code == 1 and not pair["comparable"] and not data["same"]
    assert pair["headline"].startswith("cannot tell: the inputs and recipe are not recorded by both "
                                       "runs (log-only has no readable run.json)")


def test_a_run_larger_than_the_tutorial_is_read_to_its_own_size(tmp_path, capsys):
    """Two healthy 17 x 8 runs: compare reads each as make report does, within the budget of
    the run's recorded size, so no cap finding (RPT-E022: 136 ranks' shards) is raised; their
    ranks per node are told as one run of eights."""
    import synthrun
    for run_id in ("a", "b"):
        run, profile = synthrun.healthy_run(tmp_path, 17, 8, run_id=run_id)
        assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    capsys.readouterr()
    code, data, _ = compare(capsys, tmp_path, "b", "a")
    assert code == 0
    assert next(r for r in data["how_it_went"] if r["what"] == "verdict")["values"] == ["SUCCESS", "SUCCESS"]
    assert data["read_problems"] == []
    ranks = next(f for f in data["what_ran"] if f["what"] == "ranks per node (training.log)")
    assert ranks["values"] == ["8 (x17)", "8 (x17)"]
