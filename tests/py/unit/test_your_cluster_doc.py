"""docs/your-cluster.md, run as written: its commands in order in a copy of the repository, its
profile lines applied as the reader would edit them. The network stands in locally: the volume is
a scratch folder, and prepare-inputs gets VERL_MIRROR (verl-standin as a git repository whose
commit the copy's tutorial profile pins), MODEL_SOURCE (a sharded model of 4 shards and its index)
and GSM8K_SOURCE (GSM8K-format jsonl with the real split sizes, 7473 and 1319 rows)."""
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_weights import write_shard

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "your-cluster.md"
PROFILES = Path("tools/verl/two-worker-grpo/profiles")
DOC_ROOT = "/mnt/rlinf-reproduction"
DOC_SITE = "/srv/twgrpo-site"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}


def blocks(kind):
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def commands():
    """Every command line of the doc's bash blocks, comments dropped, in order."""
    return [line.split("  #")[0].strip() for block in blocks("bash")
            for line in block.splitlines() if line.strip() and not line.startswith("#")]


def copy_repo(dest):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO / name.decode()
        if source.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name.decode())
    return dest


def sources(tmp_path):
    verl = tmp_path / "verl-origin"
    shutil.copytree(REPO / "tests/fixtures/verl-standin", verl)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "verl"]):
        subprocess.run(["git", "-C", str(verl), *args], check=True, env=GIT_ENV)
    commit = subprocess.run(["git", "-C", str(verl), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True, env=GIT_ENV).stdout.strip()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    weight_map = {}
    for shard in range(1, 5):
        name = f"model-{shard:05d}-of-00004.safetensors"
        tensors = {f"model.layers.{shard}.weight": 16, f"model.layers.{shard}.bias": 4}
        write_shard(model / name, tensors)
        weight_map.update({t: name for t in tensors})
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    gsm8k = tmp_path / "gsm8k"
    gsm8k.mkdir()
    for split, rows in (("train", 7473), ("test", 1319)):
        (gsm8k / f"{split}.jsonl").write_text("".join(
            json.dumps({"question": f"{split} {i}: how many?", "answer": f"So {i}.\n#### {i}"}) + "\n"
            for i in range(rows)))
    return commit, {"VERL_MIRROR": str(verl), "MODEL_SOURCE": str(model), "GSM8K_SOURCE": str(gsm8k)}


def apply_profile_lines(path, block):
    text = path.read_text(encoding="utf-8")
    for line in block.splitlines():
        key, _, value = line.partition("=")
        if re.search(rf"(?m)^{key}=", text):
            text = re.sub(rf"(?m)^{key}=.*$", lambda _: f"{key}={value}", text)
        else:
            text += f"{line}\n"
    path.write_text(text, encoding="utf-8")


def make(repo, line, volume, site, extra=()):
    words = [w.replace(DOC_ROOT, str(volume)).replace(DOC_SITE, str(site)) for w in line.split()]
    assert words[0] == "make", line
    return subprocess.run(["make", "-s", "-C", str(repo), *words[1:], *extra, f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None,
                    reason="needs git and make")
def test_the_worked_example_runs_as_written(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    volume = tmp_path / "vol"
    volume.mkdir()
    site = tmp_path / "site"  # made by new-profile
    commit, local = sources(tmp_path)
    tutorial = repo / PROFILES / "tutorial-2x2-a100.env"
    tutorial.write_text(re.sub(r"(?m)^VERL_COMMIT=.*$", f"VERL_COMMIT={commit}", tutorial.read_text()))
    subprocess.run([sys.executable, "prep/bundle.py", "checksums"], cwd=repo, check=True,
                   capture_output=True)  # the copy's own pin of that commit, then a clean tree
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV)
    lines = commands()
    assert lines[0] == f"make new-profile FROM=tutorial-2x2-a100 NAME=h100-4x8-ib SITE={DOC_SITE}"
    out = make(repo, lines[0], volume, site)
    assert out.returncode == 0, out.stderr
    profile = site / "h100-4x8-ib.env"
    assert not re.search(r"(?m)^\w+_SUMS_SHA256=", profile.read_text())
    (values,) = blocks("env")
    apply_profile_lines(profile, values)
    outputs = {}
    for line in lines[1:]:
        extra = [f"{k}={v}" for k, v in local.items()] if "prepare-inputs" in line else []
        out = make(repo, line, volume, site, extra)
        first_check = line.startswith("make check-profile") and "check-profile" not in outputs
        if first_check:  # before pin-inputs: the pins, and no verl yet to read the keys from
            assert out.returncode != 0
            assert re.findall(r"\((\w+-\w\d+)\)", out.stdout) == ["GEN-W050", "INP-E070"], \
                out.stdout
            assert out.stdout.count("FAIL (") == 1
        else:
            assert out.returncode == 0, f"{line}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        outputs.setdefault(line.split()[1], out.stdout)
        outputs[line.split()[1]] = out.stdout
    assert "check-profile: PASSED (5 checks)" in outputs["check-profile"]
    # the second time, the overrides were read against the verl checkout on the volume
    assert re.search(r"extra-overrides \.+ ok\n", outputs["check-profile"])
    assert "inputs: PASSED" in outputs["verify-inputs"]
    pinned = profile.read_text()
    assert re.search(r"(?m)^MODEL_SUMS_SHA256=[0-9a-f]{64}$", pinned)
    assert re.search(r"(?m)^DATA_SUMS_SHA256=[0-9a-f]{64}$", pinned)
    assert not (repo / PROFILES / "local.env").exists()
    assert not (repo / PROFILES / "h100-4x8-ib.env").exists()
    # the site's profile lives outside the checkout: not one file of it changed
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True,
                            capture_output=True, text=True, env=GIT_ENV).stdout
    assert status == ""
    digest = hashlib.sha256(profile.read_bytes()).hexdigest()
    installed = volume / "tools/verl/two-worker-grpo-profiles/h100-4x8-ib" / f"{digest}.env"
    assert installed.read_bytes() == profile.read_bytes()
    assert f"export PROFILE=h100-4x8-ib PROFILE_SHA256={digest}" in outputs["driver-command"]
    env = json.loads(outputs["runtime-env"])["env_vars"]
    assert (env["NCCL_IB_DISABLE"], env["NCCL_IB_HCA"], env["NCCL_SOCKET_IFNAME"],
            env["WANDB_MODE"]) == ("0", "mlx5", "eth0", "offline")
    assert (volume / "models/huggingface/Qwen/Qwen2.5-7B-Instruct/"
            "a09a35458c702b33eeacc393d103063234e8bc28/model-00004-of-00004.safetensors").is_file()
