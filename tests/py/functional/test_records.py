"""Every record reader bounded and typed: hostile driver.log phase lines, deeply nested JSON,
fields of the wrong type, Unicode digits in names, huge numbers, huge records, FIFOs, millions
of phase lines or shard files, odd runs among many. Each is a finding of the check or the page
section that needed it (never a traceback, never GEN-E001), and nothing blocks."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import test_resume as resume_tests
from twgrpo.cli import main
from twgrpo.run import budget
from twgrpo.formats import bounded
from twgrpo.report import shardlist, timeline
from twgrpo.run.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
VERIFY = BUNDLE / "verify-two-worker-grpo-v1.py"
FIXTURE = next((REPO / "tests" / "fixtures" / "real-smoke-run").glob("smoke-*"))
PREFIX = "run-two-worker-grpo-v1: phase "
NESTED = "[" * 200_000 + "]" * 200_000


@pytest.fixture
def run(tmp_path, capsys):
    """The real run, judged again by this postflight (its own verification.json predates checks
    a SUCCESS now needs: as recorded, it is UNPROVEN)."""
    copy = tmp_path / "runs" / "verl" / "two-worker-grpo" / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    assert main(["postflight", "--output-dir", str(copy)]) == 0
    capsys.readouterr()
    return copy


def root_of(run):
    return run.parents[3]


def report(run, capsys, *extra):
    code = main(["report", "--output-dir", str(run), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def runs(run, capsys):
    code = main(["runs", "--storage-root", str(root_of(run))])
    return code, capsys.readouterr().out


def postflight(run, capsys):
    code = main(["postflight", "--output-dir", str(run)])
    out = capsys.readouterr().out
    record = json.loads((run / "verification.json").read_text()) if code != 2 else {}
    ids = {f["id"] for c in record.get("checks", []) for f in c["findings"]}
    return code, out, ids


def edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


# --- driver.log phase lines ----------------------------------------------------------------

BAD_PHASE_LINES = {
    "a duration of 20 digits": ["postflight started 2026-12-02T13:10:34Z",
                                "postflight ended with status 0 after 99999999999999999999 s"],
    "a start without Z": ["postflight started 2026-12-02T13:10:34",
                          "postflight ended with status 0 after 1 s"],
    "a start in year 9999": ["postflight started 9999-12-31T23:59:59Z",
                             "postflight ended with status 0 after 100000 s"],
    "a 5000-digit exit status": ["postflight started 2026-12-02T13:10:34Z",
                                 "postflight ended with status " + "9" * 5000 + " after 1 s"],
}


@pytest.mark.parametrize("case", BAD_PHASE_LINES)
def test_a_malformed_phase_line_is_left_out_by_runs_and_named_by_the_report(run, capsys, case):
    with open(run / "driver.log", "a") as log:
        log.writelines(PREFIX + line + "\n" for line in BAD_PHASE_LINES[case])
    code, out = runs(run, capsys)
    assert code == 0 and FIXTURE.name in out and "SUCCESS" in out
    code, out = report(run, capsys)
    assert code == 0 and "(RPT-E021)" in out


def test_millions_of_distinct_phase_names_keep_only_the_launchers_phases(run):
    names = ("".join(chr(97 + int(d)) for d in f"{n:05d}") for n in range(20_000))
    with open(run / "driver.log", "a") as log:  # phase aaaaa, aaaab, ... (3M in the field)
        log.writelines(f"{PREFIX}x{name} started 2026-12-02T13:10:34Z\n" for name in names)
    problems = []
    phases = timeline.phase_timeline(run, problems)
    took = re.search(r"phase training ended with status 0 after (\d+) s", (FIXTURE / "driver.log").read_text())
    assert set(phases) <= set(timeline.PHASES) and phases["training"].seconds == int(took.group(1))
    [bad] = [p for p in problems if p.id == "RPT-E021"]
    assert bad.message.startswith("20000 launcher phase line(s) are malformed")


# --- deeply nested JSON --------------------------------------------------------------------

def test_nesting_is_measured_on_the_bytes_before_json_reads_them():
    with pytest.raises(ValueError, match="nested more than 32 levels"):
        bounded.loads(NESTED)
    with pytest.raises(ValueError, match="do not pair"):
        bounded.loads("[" * 200_000)
    assert bounded.loads('{"a": ["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]}') == {"a": ["[" * 40]}
    with pytest.raises(ValueError, match="5000 digits"):
        bounded.loads("[" + "7" * 5000 + "]")


@pytest.mark.parametrize("name", ["run.json", "verification.json"])
def test_deeply_nested_records_are_findings_in_runs_report_and_postflight(run, capsys, name):
    (run / name).write_text(NESTED)
    code, out = runs(run, capsys)
    assert code == 0 and FIXTURE.name in out
    code, out = report(run, capsys)  # without run.json's profile: a usage error that says why
    assert code == (2 if name == "run.json" else 0)
    assert ("cannot read the run's profile" if name == "run.json" else "(RPT-E002)") in out
    assert "nested more than 32 levels" in out
    code, out, ids = postflight(run, capsys)
    if name == "run.json":  # the profile comes from run.json: a usage error that says why
        assert code == 2
    else:
        assert code == 0 and "GEN-E001" not in ids


def test_a_record_that_would_cost_too_much_memory_to_parse_is_refused_unparsed(run, capsys):
    (run / "verification.json").write_text("[" + "{}," * (3 << 20) + "{}]")  # 9 MiB, some 300 MiB parsed
    code, out = report(run, capsys)
    assert code == 0 and "(RPT-E002)" in out and "MiB of values, more than the 64 MiB" in out


# --- fields of the wrong type ----------------------------------------------------------------

def set_worker(field, value):
    return "preflight.json", lambda d: d["workers"][0].__setitem__(field, value)


WRONG_TYPES = {
    "workers[0].driver = 5": set_worker("driver", 5),
    "a node_id that is a list": set_worker("node_id", ["a", "b"]),
    "checks[0].findings = 5": ("verification.json", lambda d: d["checks"][0].__setitem__("findings", 5)),
    "evidence.checkpoint = []": ("verification.json", lambda d: d["evidence"].__setitem__("checkpoint", [])),
    "gpu_query = [1]": ("preflight.json", lambda d: d["nodes"][0].__setitem__("gpu_query", [1])),
    "started_at a number": ("run.json", lambda d: d.__setitem__("started_at", 10 ** 18)),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_a_field_of_the_wrong_type_is_left_out_of_the_page_with_a_finding(run, capsys, case):
    name, change = WRONG_TYPES[case]
    edit(run / name, change)
    code, out = report(run, capsys)
    assert code == 0 and "(RPT-E020)" in out


def test_postflight_maps_ranks_only_with_well_typed_workers(run, capsys):
    name, change = WRONG_TYPES["a node_id that is a list"]
    edit(run / name, change)
    code, _, ids = postflight(run, capsys)
    assert code == 1 and "POST-E090" in ids and "GEN-E001" not in ids


def test_a_preflight_record_that_is_a_list_is_a_finding_not_a_crash(run, capsys):
    (run / "preflight.json").write_text("[]")
    code, _, ids = postflight(run, capsys)
    assert code == 1 and "POST-E090" in ids and "GEN-E001" not in ids
    code, out = report(run, capsys)
    assert code == 0 and "(RPT-E002)" in out and "a JSON list, not an object" in out


def test_conform_keeps_what_fits_and_says_what_it_dropped():
    from twgrpo.run import typed
    problems = typed.Problems()
    kept = typed.conform({"workers": [{"node_id": ["x"], "hostname": "a", "node_ip": "1"},
                                      {"node_id": "n", "hostname": "b", "node_ip": "2", "driver": 5}]},
                         typed.PLACING_PREFLIGHT, "", problems)
    assert kept == {"workers": [{"node_id": "n", "hostname": "b", "node_ip": "2", "driver": 5}]}
    assert problems == ["workers[0].node_id is a list, not text"]
    assert typed.utc_time("2026-12-02T13:09:38Z") and typed.utc_time("2026-12-02T13:09:38+00:00")
    assert not any(typed.utc_time(t) for t in ("2026-12-02T13:09:38", "9999-12-31T23:59:59Z",
                                                "2026-12-02T13:09:38+02:00", "２０２６-12-02T13:09:38Z"))


# --- digits are ASCII digits -------------------------------------------------------------------

def test_a_rollout_file_named_with_a_superscript_digit_is_not_a_step(run, capsys):
    (run / "rollouts" / "².jsonl").write_text("{}\n")
    code, out = report(run, capsys)
    assert code == 0 and "Traceback" not in out


# --- numbers within range --------------------------------------------------------------------

def test_a_rollout_score_of_10_to_the_400_is_a_bad_row(run, capsys):
    path = run / "rollouts" / "1.jsonl"
    row = json.loads(path.read_text().splitlines()[0])
    text = json.dumps(row).replace(f'"score": {json.dumps(row["score"])}', '"score": 1' + "0" * 400)
    path.write_text(text + "\n" + "\n".join(path.read_text().splitlines()[1:]) + "\n")
    code, _, ids = postflight(run, capsys)
    assert code == 1 and "POST-E020" in ids and "GEN-E001" not in ids
    code, out = report(run, capsys)
    assert code == 0


# --- huge records and FIFOs ------------------------------------------------------------------

def sparse(path, size):
    path.unlink(missing_ok=True)
    with open(path, "wb") as stream:
        stream.truncate(size)


def test_a_1_gib_run_json_is_refused_by_its_size_unread(run, capsys):
    sparse(run / "run.json", 1 << 30)
    for phase in ("report", "postflight"):
        assert main([phase, "--output-dir", str(run)]) == 2
        most = re.search(r"1073741824 bytes, more than the (\d+) a record", capsys.readouterr().err)
        assert most and int(most[1]) < 1 << 30  # the run's own record budget, far below its size
    code, out = report(run, capsys, "--profile", "smoke-1x1")
    assert code == 0 and "(RPT-E002) cannot be read: 1073741824 bytes, more than" in out


def fifo(path):
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def verify(*args, timeout=120):
    """The verifier in a child, as make runs it; a reader that blocks on a FIFO times out."""
    return subprocess.run([sys.executable, "-I", "-B", str(VERIFY), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("what,where,fid", [
    ("dataset-manifest.json", "data", "INP-E010"),
    ("model.safetensors", "model", "INP-E014"),
    ("train.parquet", "data", "INP-E012"),
])
def test_a_fifo_among_the_inputs_is_a_finding_not_a_hang(storage, what, where, fid):
    folder = next((storage / ("datasets" if where == "data" else "models")).rglob(what)).parent
    fifo(folder / what)
    done = verify("inputs", "--profile", storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env",
                  "--storage-root", storage)
    assert done.returncode == 1 and f"({fid})" in done.stdout and "GEN-E001" not in done.stdout


def test_a_huge_dataset_manifest_is_refused_by_its_size(storage):
    folder = next((storage / "datasets").rglob("dataset-manifest.json")).parent
    sparse(folder / "dataset-manifest.json", 20 << 20)
    done = verify("inputs", "--profile", storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env",
                  "--storage-root", storage)
    assert "(INP-E010)" in done.stdout and "20971520 bytes, more than the 1048576" in done.stdout


# --- bounded listings --------------------------------------------------------------------------

def test_a_checkpoint_with_more_files_than_its_ranks_explain_is_cut_with_a_finding(run, capsys):
    actor = run / "checkpoints" / "global_step_2" / "actor"
    size = budget.Size(2, 2, 2)
    most = shardlist.SHARD_NAMES_PER_RANK * size.ranks + 64
    for n in range(most + 100):
        (actor / f"extra_{n}.pt").write_bytes(b"")
    problems = []
    shards = shardlist.checkpoint_shards(run, {"checkpoint": {"shards": {}}}, problems, size)
    assert len(shards) <= most and [p.id for p in problems] == ["RPT-E022"]
    assert f"more than {most} files" in problems[0].message


def test_a_big_runs_shards_are_one_row_per_kind_and_need_no_cut(run, capsys):
    actor = run / "checkpoints" / "global_step_2" / "actor"
    for rank in range(3000):
        (actor / f"model_world_size_3000_rank_{rank}.pt").write_bytes(b"xx")
    problems = []
    shards = shardlist.checkpoint_shards(run, {"checkpoint": {"shards": {}}}, problems,
                                         budget.Size(375, 8, 2))
    assert problems == []
    [row] = [s for s in shards if "world_size_3000" in s[0]]
    assert row == ("checkpoints/global_step_2/actor/model_world_size_3000_rank_{0..2999}.pt", 6000,
                   "3000 not verified")


def test_the_shard_table_reads_names_as_paths_would(run):
    """Names are read as strings (pathlib's relative_to cost 6 s at 16,384 ranks on Python 3.12):
    a dot file '.pt' has no suffix and is left out as Path.suffix leaves it out; 'x..pt' and a
    folder named like a shard count, a verified file by its recorded size."""
    actor = run / "checkpoints" / "global_step_2" / "actor"
    (actor / ".pt").write_bytes(b"x")
    (actor / "x..pt").write_bytes(b"abc")
    (actor / "notes.txt").write_bytes(b"x")
    (actor / "model_world_size_9_rank_3.pt").mkdir()
    verified = {"checkpoints/global_step_2/actor/x..pt": 1000}
    rows = dict((name, (size, state)) for name, size, state in shardlist.checkpoint_shards(
        run, {"checkpoint": {"shards": verified}}, [], budget.Size(2, 1, 2)))
    assert rows["checkpoints/global_step_2/actor/x..pt"] == (1000, "verified")
    assert rows["checkpoints/global_step_2/actor/model_world_size_9_rank_3.pt"] == (0, "not a regular file")
    assert not any(name.endswith(("/.pt", ".txt")) for name in rows)


def test_the_shard_table_names_hostile_entries_without_opening_them(run):
    """A FIFO is never opened (no wait), a symlink loop is named, a name that is not UTF-8 is kept."""
    actor = run / "checkpoints" / "global_step_2" / "actor"
    os.mkfifo(actor / "optim_world_size_9_rank_1.pt")
    (actor / "loop.pt").symlink_to("loop.pt")
    with open(os.path.join(os.fsencode(actor), b"bad\xff.pt"), "wb") as stream:
        stream.write(b"xy")
    rows = {name: (size, state) for name, size, state in shardlist.checkpoint_shards(
        run, {"checkpoint": {"shards": {}}}, [], budget.Size(2, 1, 2))}
    actor_rel = "checkpoints/global_step_2/actor"
    assert rows[f"{actor_rel}/optim_world_size_9_rank_1.pt"] == (0, "not a regular file")
    assert rows[f"{actor_rel}/loop.pt"] == (0, "cannot stat: Too many levels of symbolic links")
    assert rows[f"{actor_rel}/bad\udcff.pt"] == (2, "not verified")


def test_runs_cuts_every_column_whatever_a_run_records(run, capsys):
    other = run.parent / ("x" * 200)
    shutil.copytree(run, other)
    edit(run / "run.json", lambda d: d["profile"].__setitem__("name", "p" * (4 << 20)))
    edit(other / "run.json", lambda d: d["profile"].__setitem__("name", "q" * 200))
    code, out = runs(run, capsys)
    assert code == 0 and len(out.splitlines()) == 4
    assert max(len(line) for line in out.splitlines()) < 300
    # 200 characters is no RUN_ID (runid.MOST), so the name shows quoted, cut like any column
    assert "q" * 39 + "…" in out and "'" + "x" * 126 + "…" in out


def test_runs_reads_only_the_ends_of_a_large_record(run, capsys, monkeypatch):
    code, out = runs(run, capsys)
    [before] = [line for line in out.splitlines() if line.startswith(FIXTURE.name)]
    started = json.loads((FIXTURE / "run.json").read_text())["started_at"]  # 2026-12-04T14:53:42+00:00
    assert before.split()[1:4] == [started[:10], started[11:19], "UTC"] and before.split()[-2:] == [
        "smoke-1x1", "SUCCESS"]

    def pad(data):
        data["evidence"]["padding"] = "x" * (11 << 20)
    edit(run / "verification.json", pad)
    edit(run / "preflight.json", lambda d: d.__setitem__("cluster_resources", {"pad": "y" * (11 << 20)}))
    edit(run / "run.json", lambda d: d.__setitem__("resume", {"files": {"f": "z" * (11 << 20)}}))
    (run / "resume.json").write_text('{"status": "passed"}\n')  # a resumed run keeps its record
    parsed = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **kw: parsed.append(len(text)) or real(text, **kw))
    code, out = runs(run, capsys)
    assert code == 0 and max(parsed) <= 80 << 10
    [row] = [line for line in out.splitlines() if line.startswith(FIXTURE.name)]
    assert row == before


def test_an_unreadable_run_folder_is_listed_as_unreadable(tmp_path):
    """The listing as a user without permission on one run folder (root reads everything, so
    the verifier runs as nobody on a copy of the bundle that nobody can read)."""
    top = Path(tempfile.mkdtemp())
    try:
        os.chmod(top, 0o755)
        shutil.copytree(BUNDLE / "twgrpo", top / "bundle" / "twgrpo")
        shutil.copy(VERIFY, top / "bundle")
        runs_dir = top / "storage" / "runs" / "verl" / "two-worker-grpo"
        shutil.copytree(FIXTURE, runs_dir / FIXTURE.name)
        (runs_dir / "locked").mkdir()
        shutil.copy(FIXTURE / "run.json", runs_dir / "locked")
        for path in [top, *top.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(runs_dir / "locked", 0)
        python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        command = [python, "-I", "-B", str(top / "bundle" / VERIFY.name), "runs",
                   "--storage-root", str(top / "storage")]
        nobody = (lambda: os.setuid(65534)) if os.geteuid() == 0 else None
        done = subprocess.run(command, capture_output=True, text=True, preexec_fn=nobody, timeout=60)
        [row] = [line for line in done.stdout.splitlines() if line.startswith("locked")]
        assert done.returncode == 0 and "UNREADABLE (permission denied" in row
        assert "conflict" not in row
    finally:
        os.chmod(top / "storage" / "runs" / "verl" / "two-worker-grpo" / "locked", 0o755)
        shutil.rmtree(top)


# --- the resume phase: the earlier run's record, its tracker, its global_step names ----------

def test_resume_refuses_a_deeply_nested_earlier_record_with_its_id(tmp_path):
    root = tmp_path / "storage"
    resume_tests.preempted(root, "A", resume_tests.profile_of(2), stop=1)
    (RunFolder.at(root, "A").path / "run.json").write_text(NESTED)
    code, phase = resume_tests.resume(root, "B", "A", resume_tests.profile_of(2))
    assert code == 1 and resume_tests.error_ids(phase) == {"RES-E002"}


def test_a_fifo_as_the_checkpoint_tracker_is_a_finding_not_a_hang(tmp_path):
    root = tmp_path / "storage"
    prof = resume_tests.profile_of(2)
    resume_tests.preempted(root, "A", prof, stop=1)
    fifo(RunFolder.at(root, "A").path / "checkpoints" / "latest_checkpointed_iteration.txt")
    resume_tests.record(root, "B", prof)
    done = verify("resume", "--profile", resume_tests.PROFILE, "--storage-root", root,
                  "--run-id", "B", "--resume-from", "A", timeout=60)
    assert done.returncode == 1 and "(RES-E009)" in done.stdout and "not a regular file" in done.stdout


def test_a_global_step_folder_named_with_a_superscript_digit_is_no_step(tmp_path):
    root = tmp_path / "storage"
    prof = resume_tests.profile_of(2)
    resume_tests.preempted(root, "A", prof, stop=1)
    (RunFolder.at(root, "A").path / "checkpoints" / "global_step_²").mkdir()
    code, phase = resume_tests.resume(root, "B", "A", prof)
    assert code == 0 and phase["lineage"]["step"] == 1


def test_a_global_step_folder_named_with_an_arabic_digit_is_not_step_1(tmp_path):
    root = tmp_path / "storage"
    prof = resume_tests.profile_of(2)
    resume_tests.preempted(root, "A", prof, stop=1)
    checkpoints = RunFolder.at(root, "A").path / "checkpoints"
    (checkpoints / "global_step_1").rename(checkpoints / "global_step_١")
    code, phase = resume_tests.resume(root, "B", "A", prof)
    [refusal] = [f for c in phase["checks"] for f in c["findings"]]
    assert code == 1 and refusal["id"] == "RES-E009" and "global_step_1" not in refusal["message"]


# --- the verifier finds ray where the Driver's Python would ---------------------------------

def test_ray_is_found_on_pythonpath_after_the_standard_library(tmp_path):
    python = shutil.which("python3", path="/usr/bin:/bin")
    if not python or subprocess.run([python, "-I", "-c", "import ray"], capture_output=True).returncode == 0:
        pytest.skip("needs a python3 without ray in /usr/bin or /bin")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(
        "def init(**kw):\n    raise ConnectionError('this ray came from PYTHONPATH')\n")
    (tmp_path / "json.py").write_text("raise SystemExit('PYTHONPATH shadowed the standard library')\n")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import json\n"
             "from twgrpo.checks.preflight.preflight import check_ray_connection\n"
             "print([(f.id, f.message) for f in check_ray_connection(None)], json.__file__)")
    done = subprocess.run([python, "-I", "-B", "-c", probe, str(BUNDLE)], capture_output=True,
                          text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert "PRE-E011" in done.stdout and "this ray came from PYTHONPATH" in done.stdout, done.stderr
    assert str(tmp_path) not in done.stdout.split("]")[-1]  # json is the standard library's
