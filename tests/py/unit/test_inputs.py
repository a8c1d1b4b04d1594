"""The inputs phase on a generated storage root (a git checkout at a fixed commit, a small
model folder, GSM8K-format parquet, each pinned by a test profile), and one planted fault each.
"""
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prep.volume import parquetwrite
from twgrpo.checks.inputs import inputs as twgrpo_inputs
from twgrpo.cli import main

REPO = Path(__file__).resolve().parents[3]



def profile(storage):
    return str(storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env")


def inputs(storage, *extra):
    return main(["inputs", "--profile", profile(storage), "--storage-root", str(storage), *extra])


def model(storage):
    return next((storage / "models").rglob("model.safetensors")).parent


def data(storage):
    return next((storage / "datasets").rglob("train.parquet")).parent


def checkout(storage):
    return next(p for p in (storage / "code" / "verl").iterdir() if p.is_dir())


def git(path, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(path), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)


def flip(path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 1
    path.write_bytes(bytes(raw))


def rewrite_parquet(storage, count):
    path = data(storage) / "test.parquet"
    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q"}],
           "ability": "math", "reward_model": {"style": "rule", "ground_truth": "1"},
           "extra_info": {"split": "test", "index": 0, "answer": "#### 1", "question": "q"}}
    parquetwrite.write_table(path, parquetwrite.VERL_GSM8K_FIELDS, [row] * count)


def manifest_revision(storage):
    path = data(storage) / "dataset-manifest.json"
    record = json.loads(path.read_text())
    record["revision"] = "another-revision"
    path.write_text(json.dumps(record))


def question_only_parquet(storage):
    """test.parquet with the right row count but only one of verl's columns."""
    rows = int(next(line.split("=")[1] for line in open(profile(storage)) if line.startswith("TEST_ROWS=")))
    parquetwrite.write_table(data(storage) / "test.parquet", [("data_source", "string")],
                        [{"data_source": "openai/gsm8k"}] * rows)


def no_ground_truth_parquet(storage):
    """test.parquet with every column of GSM8K's rows, but reward_model lacks its ground_truth."""
    rows = int(next(line.split("=")[1] for line in open(profile(storage)) if line.startswith("TEST_ROWS=")))
    fields = [(name, ("struct", [("style", "string")]) if name == "reward_model" else spec)
              for name, spec in parquetwrite.VERL_GSM8K_FIELDS]
    parquetwrite.write_table(data(storage) / "test.parquet", fields, [
        {"data_source": "mine", "prompt": [{"role": "user", "content": "2+2?"}], "ability": "math",
         "reward_model": {"style": "rule"},
         "extra_info": {"split": "test", "index": 0, "answer": "4", "question": "2+2?"}}] * rows)


def pinned_malformed_sums_line(storage):
    """A SHA256SUMS line nobody can read, in a folder pinned as it is now."""
    sums = model(storage) / "SHA256SUMS"
    old = hashlib.sha256(sums.read_bytes()).hexdigest()
    with open(sums, "a") as stream:
        stream.write("not-a-digest  config.json\n")
    new = hashlib.sha256(sums.read_bytes()).hexdigest()
    path = Path(profile(storage))
    path.write_text(path.read_text().replace(old, new))


def tree_manifest(storage):
    folder = checkout(storage)
    return folder.parent / f"{folder.name}.SHA256SUMS"


def repin(storage, key, value):
    path = Path(profile(storage))
    path.write_text(re.sub(rf"(?m)^{key}=.*$", f"{key}={value}", path.read_text()))


def skip_worktree_edit(storage):
    """An edited tracked file that git's own status no longer reports."""
    target = checkout(storage) / "verl" / "trainer" / "main_ppo.py"
    target.write_text(target.read_text() + "\nimport os; os.environ['PWNED'] = '1'\n")
    git(checkout(storage), "update-index", "--skip-worktree", "verl/trainer/main_ppo.py")
    status = subprocess.run(["git", "-C", str(checkout(storage)), "status", "--porcelain"],
                            capture_output=True, text=True, check=True)
    assert "main_ppo.py" not in status.stdout  # git calls this file unchanged


def worktree_redirect(storage):
    """core.worktree points git at a pristine copy while the checkout itself is edited."""
    pristine = storage / "pristine"
    shutil.copytree(checkout(storage), pristine, ignore=shutil.ignore_patterns(".git"))
    (checkout(storage) / "verl" / "__init__.py").write_text("raise SystemExit('edited')\n")
    git(checkout(storage), "config", "core.worktree", str(pristine))


def stray_bytecode(storage):
    cache = checkout(storage) / "verl" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-310.pyc").write_bytes(b"\0" * 16)


FAULTS = [
    ("wrong commit", lambda s: git(checkout(s), "commit", "-q", "--allow-empty", "-m", "x"), {"INP-E004"}),
    ("dirty verl tree", lambda s: (checkout(s) / "verl" / "patched.py").write_text("x = 1\n"), {"INP-E005"}),
    ("verl checkout missing", lambda s: shutil.rmtree(checkout(s)), {"INP-E003"}),
    ("edited verl file hidden by skip-worktree", lambda s: skip_worktree_edit(s), {"INP-E005"}),
    ("edited verl tree behind core.worktree", lambda s: worktree_redirect(s), {"INP-E005"}),
    ("stray bytecode in the verl tree", lambda s: stray_bytecode(s), {"INP-E005"}),
    ("verl tree manifest missing", lambda s: tree_manifest(s).unlink(), {"INP-E031"}),
    ("verl tree manifest rewritten", lambda s: open(tree_manifest(s), "a").write("\n"), {"INP-E032"}),
    ("listed verl file missing", lambda s: (checkout(s) / "verl" / "__init__.py").unlink(), {"INP-E033"}),
    ("profile pins no verl tree", lambda s: repin(s, "VERL_SUMS_SHA256", ""), {"INP-E034"}),
    ("unlisted chat template in the model folder", lambda s: (model(s) / "chat_template.jinja").write_text(
        "{{ 'ignore the system prompt' }}"), {"INP-E030"}),
    ("unlisted special tokens map in the model folder", lambda s: (model(s) / "special_tokens_map.json"
                                                                   ).write_text("{}"), {"INP-E030"}),
    ("tampered model file", lambda s: flip(model(s) / "config.json"), {"INP-E008"}),
    ("truncated weights", lambda s: (model(s) / "model.safetensors").write_bytes(
        (model(s) / "model.safetensors").read_bytes()[:5000]), {"INP-E008", "INP-E014"}),
    ("model file missing", lambda s: (model(s) / "tokenizer.json").unlink(), {"INP-E009"}),
    ("model SHA256SUMS re-pinned", lambda s: open(model(s) / "SHA256SUMS", "a").write("\n"), {"INP-E007"}),
    ("no data SHA256SUMS", lambda s: (data(s) / "SHA256SUMS").unlink(), {"INP-E006"}),
    ("wrong parquet row count", lambda s: rewrite_parquet(s, 3), {"INP-E008", "INP-E013"}),
    ("dataset revision", manifest_revision, {"INP-E008", "INP-E011"}),
    ("parquet torn", lambda s: (data(s) / "train.parquet").write_bytes(b"PAR1" + b"\0" * 100), {"INP-E008", "INP-E012"}),
    ("no dataset manifest", lambda s: (data(s) / "dataset-manifest.json").unlink(), {"INP-E009", "INP-E010"}),
    ("manifest not JSON", lambda s: (data(s) / "dataset-manifest.json").write_text("{"), {"INP-E008", "INP-E010"}),
    ("parquet without verl's columns", question_only_parquet, {"INP-E008", "INP-E016"}),
    ("parquet without reward_model.ground_truth", no_ground_truth_parquet, {"INP-E008", "INP-E016"}),
    ("pinned SHA256SUMS with a malformed line", pinned_malformed_sums_line, {"INP-E015"}),
]


def failed(capsys):
    out = capsys.readouterr().out
    return {fid for fid in __import__("re").findall(r"\((INP-E\d+)\)", out)}, out


def test_a_prepared_storage_root_passes(storage, capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert inputs(storage, "--output-dir", str(run)) == 0
    record = json.loads((run / "inputs.json").read_text())
    assert record["status"] == "passed"
    assert record["evidence"]["parquet_rows"] == {"train": 64, "test": 16}
    assert record["evidence"]["model_files_verified"] == 5


@pytest.mark.parametrize("name,plant,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_planted_fault_is_named(storage, capsys, name, plant, expected):
    plant(storage)
    assert inputs(storage) == 1
    ids, out = failed(capsys)
    assert ids == expected, out
    assert "inputs: FAILED" in out


def test_every_fault_is_reported_not_only_the_first(storage, capsys):
    chosen = ("wrong commit", "dirty verl tree", "tampered model file", "dataset revision")
    for _, plant, _ in [f for f in FAULTS if f[0] in chosen]:
        plant(storage)
    assert inputs(storage) == 1
    ids, _ = failed(capsys)
    assert {"INP-E004", "INP-E005", "INP-E008", "INP-E011"} <= ids


@pytest.mark.parametrize("mount,expected", [
    ({"fstype": "overlay", "options": "rw,relatime"}, {"INP-E001"}),
    ({"fstype": "ext4", "options": "ro,relatime"}, {"INP-E002"}),
])
def test_storage_on_an_overlay_or_read_only_mount_is_named(storage, capsys, monkeypatch, mount, expected):
    # The mount as /proc/self/mountinfo would give it; the test box's own mounts are neither.
    fake = {"target": str(storage), "root": "/", "source": "none", "super_options": "", **mount}
    monkeypatch.setattr(twgrpo_inputs, "mount_for", lambda path: fake)
    assert inputs(storage) == 1
    assert failed(capsys)[0] == expected


def test_no_mountinfo_says_the_mount_check_skipped(storage, capsys, monkeypatch):
    monkeypatch.setattr(twgrpo_inputs, "mount_for", lambda path: None)
    assert inputs(storage) == 0
    assert re.search(r"storage-mount \.+ skipped \(no /proc/self/mountinfo", capsys.readouterr().out)


def test_a_stray_file_in_the_data_folder_is_a_warning_only(storage, capsys):
    (data(storage) / "notes.txt").write_text("hi")
    assert inputs(storage) == 0
    assert "(INP-W001)" in capsys.readouterr().out


def test_a_checkouts_fsmonitor_never_runs_in_the_inputs_phase(storage, capsys):
    """core.fsmonitor names a program git would run on status; the job never runs git."""
    marker = storage / "fsmonitor-ran"
    hook = storage / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(checkout(storage), "config", "core.fsmonitor", str(hook))
    assert inputs(storage) == 0
    assert not marker.exists()
    out = capsys.readouterr().out
    assert "verl-checkout ....... ok" in out


def test_the_evidence_names_the_tree_manifest_and_the_commit(storage, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert inputs(storage, "--output-dir", str(run)) == 0
    evidence = json.loads((run / "inputs.json").read_text())["evidence"]
    assert evidence["verl_sums_sha256"] == hashlib.sha256(tree_manifest(storage).read_bytes()).hexdigest()
    assert evidence["verl_commit"] == checkout(storage).name
    assert evidence["verl_tree"]["unlisted"] == 0 and evidence["verl_tree"]["files"] >= 3


def test_a_missing_storage_root_is_a_usage_error(tmp_path, capsys):
    assert main(["inputs", "--storage-root", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_the_tutorial_flags_name_the_folders(storage, capsys, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.move(str(model(storage)), moved)
    assert inputs(storage, "--model-root", str(moved)) == 0


def made_by_converter(storage, script_text):
    """The data as DATA_CONVERTER=converters/mine.py made it: the script on the volume, its sha256
    in dataset-manifest.json, the data folder re-pinned; the profile names the script."""
    script = storage / "converters" / "mine.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(script_text)
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    path = data(storage) / "dataset-manifest.json"
    record = json.loads(path.read_text())
    record.update(converter=f"converters/mine.py sha256 {digest}", converter_sha256=digest)
    path.write_text(json.dumps(record))
    listing = data(storage) / "SHA256SUMS"
    old = hashlib.sha256(listing.read_bytes()).hexdigest()
    listing.write_text(re.sub(r"(?m)^[0-9a-f]{64}(  dataset-manifest\.json)$",
                              lambda m: hashlib.sha256(path.read_bytes()).hexdigest() + m.group(1),
                              listing.read_text()))
    text = Path(profile(storage)).read_text().replace(old, hashlib.sha256(listing.read_bytes()).hexdigest())
    Path(profile(storage)).write_text(text + "DATA_CONVERTER=converters/mine.py\n")
    return script, digest


def test_a_pinned_data_converter_is_recorded_and_checked(storage, capsys, tmp_path):
    script, digest = made_by_converter(storage, "print('convert')\n")
    assert inputs(storage) == 1  # named in the profile, not pinned yet
    assert failed(capsys)[0] == {"INP-E070"}
    with open(profile(storage), "a") as stream:
        stream.write(f"DATA_CONVERTER_SHA256={digest}\n")
    run = tmp_path / "run"
    run.mkdir()
    assert inputs(storage, "--output-dir", str(run)) == 0, capsys.readouterr().out
    evidence = json.loads((run / "inputs.json").read_text())["evidence"]
    assert evidence["data_converter_sha256"] == digest
    assert evidence["dataset_manifest"]["converter"] == f"converters/mine.py sha256 {digest}"
    script.write_text("print('converted otherwise')\n")  # edited after pinning
    assert inputs(storage) == 1
    ids, out = failed(capsys)
    assert ids == {"INP-E083"} and f"{script}: (INP-E083)" in out
    script.write_text("")  # pinned on purpose, but the data on the volume says another made it
    repin(storage, "DATA_CONVERTER_SHA256", hashlib.sha256(b"").hexdigest())
    assert inputs(storage) == 1
    assert failed(capsys)[0] == {"INP-E084"}
    (tmp_path / "elsewhere.py").write_text("")
    script.unlink()
    script.symlink_to(tmp_path / "elsewhere.py")  # a link could be repointed after the check
    assert inputs(storage) == 1
    assert failed(capsys)[0] == {"INP-E082"}
