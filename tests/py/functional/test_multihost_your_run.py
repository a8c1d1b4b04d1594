"""Your own run, end to end on two Ray hosts (dev/netcluster.py), as a new team would set it up
without touching the checkout: a site profile in a folder outside it, data made from CSV files
by the docs' converter script, a reward function file of your own, project and experiment
labels and two overrides, all through the make targets of a clean git clone, then the pasted
Driver command (a stand-in verl writes real-format artifacts). Afterwards `git status` of the
checkout is empty, and the reward file edited after pinning is refused before GPU time."""
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_multihost_cluster import BUNDLE_REL, REASON, up

pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host Ray cluster: {REASON}")
REPO = Path(__file__).resolve().parents[3]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}
REWARD = '''def score(data_source, solution_str, ground_truth, extra_info=None):
    """1 for the right number anywhere in the answer, else a little for trying."""
    return 1.0 if ground_truth.strip() in solution_str else 0.1
'''
OVERRIDES = "data.shuffle=true trainer.log_val_generations=2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = up(tmp_path_factory, "yourrun", 2, 2)
    yield cluster
    cluster.down()


def clean_checkout(dest: Path) -> Path:
    """The checkout's files as a git repository with one commit: its status starts empty."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO / name.decode()
        if source.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name.decode())
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, env=GIT_ENV,
                       capture_output=True)
    return dest


def site_profile(storage: Path) -> str:
    """The cluster's test profile with your data, reward, labels and overrides, unpinned."""
    text = (storage / BUNDLE_REL / "profiles" / "test-fixture.env").read_text()
    text = re.sub(r"(?m)^(TRAIN_ROWS|TEST_ROWS|DATA_SUMS_SHA256)=.*\n", "", text)
    for key, value in (("PROFILE_NAME", "ours"), ("DATASET_ID", "me/arith"),
                       ("DATASET_REVISION", "v1")):
        text = re.sub(rf"(?m)^{key}=.*$", f"{key}={value}", text)
    return text + "".join(f"{line}\n" for line in (
        "DATA_CONVERTER=converters/csv_to_verl.py", "REWARD_FILE=rewards/mine.py",
        "REWARD_FUNCTION=score", "PROJECT_NAME=arith-team", "EXPERIMENT_NAME=first-try",
        f"EXTRA_OVERRIDES={OVERRIDES}"))


def csv_files(folder: Path) -> Path:
    folder.mkdir()
    for split, rows in (("train", 24), ("test", 8)):
        lines = ["question,answer"] + [f'"What is {i} + 2?",{i + 2}' for i in range(rows)]
        (folder / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return folder


def make(repo: Path, *words: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(repo), *words, f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, timeout=300)


def launch(cluster, command: str, run_id: str):
    env = {"STANDIN_MODE": "artifacts", "STANDIN_LIB": str(REPO / "tests/lib"),
           "COLLECTIVE_PROBE": "gloo", "RUN_ID": run_id}
    out = cluster.driver(["bash", "-c", command], env=env, check=False, timeout=600)
    return out, cluster.storage / "runs/verl/two-worker-grpo" / run_id


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None,
                    reason="needs git and make")
def test_a_site_profile_with_your_data_reward_labels_and_overrides_runs_on_two_hosts(
        cluster, tmp_path):
    storage = cluster.storage
    repo = clean_checkout(tmp_path / "checkout")
    site = tmp_path / "site"
    site.mkdir()
    (site / "ours.env").write_text(site_profile(storage))
    (storage / "converters").mkdir()
    shutil.copy(REPO / "docs/examples/csv_to_verl.py", storage / "converters")
    (storage / "rewards").mkdir()
    (storage / "rewards/mine.py").write_text(REWARD)
    knobs = [f"SITE={site}", "PROFILE=ours", f"PREP_ROOT={storage}"]
    for target, extra in (("prepare-inputs", [f"DATA_SOURCE={csv_files(tmp_path / 'csv')}"]),
                          ("pin-inputs", []), ("check-profile", []), ("verify-inputs", []),
                          ("install-tools", [])):
        out = make(repo, target, *knobs, *extra)
        assert out.returncode == 0, f"{target}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    pinned = (site / "ours.env").read_text()
    assert re.search(r"(?m)^TRAIN_ROWS=24$", pinned) and re.search(r"(?m)^TEST_ROWS=8$", pinned)
    assert re.search(r"(?m)^REWARD_SHA256=[0-9a-f]{64}$", pinned)
    assert re.search(r"(?m)^DATA_CONVERTER_SHA256=[0-9a-f]{64}$", pinned)
    command = make(repo, "driver-command", f"SITE={site}", "PROFILE=ours",
                   f"STORAGE_ROOT={storage}")
    assert command.returncode == 0, command.stderr

    out, run = launch(cluster, command.stdout, "yours-1")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "run-two-worker-grpo-v1: SUCCESS yours-1" in out.stdout
    record = json.loads((run / "run.json").read_text())
    digest = record["profile"]["sha256"]
    assert record["profile"]["path"] == str(
        storage / "tools/verl/two-worker-grpo-profiles/ours" / f"{digest}.env")
    assert (site / "ours.env").read_bytes() == Path(record["profile"]["path"]).read_bytes()
    assert record["profile"]["values"]["PROJECT_NAME"] == "arith-team"
    words = shlex.split((run / "resolved-command.txt").read_text())
    for word in (f"custom_reward_function.path={storage}/rewards/mine.py",
                 "custom_reward_function.name=score", "trainer.project_name=arith-team",
                 "trainer.experiment_name=first-try", *OVERRIDES.split()):
        assert word in words, word
    inputs = (run / "inputs.json").read_text()
    assert hashlib_of(storage / "rewards/mine.py") in inputs
    assert hashlib_of(storage / "converters/csv_to_verl.py") in inputs
    # nothing of the site's run touched the checkout
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True,
                            capture_output=True, text=True, env=GIT_ENV).stdout
    assert status == ""

    # the reward edited after pinning: the next run stops in the inputs phase, naming the file
    with open(storage / "rewards/mine.py", "a") as stream:
        stream.write("# tuned by hand\n")
    out, run = launch(cluster, command.stdout, "yours-2")
    assert out.returncode == 1, (out.stdout + out.stderr)[-4000:]
    assert f"{storage}/rewards/mine.py: (INP-E081)" in out.stdout + out.stderr
    failed = dict(line.split("=", 1) for line in (run / "FAILED").read_text().splitlines())
    assert failed["phase"] == "inputs"
    assert not (run / "preflight.json").exists()


def hashlib_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
