"""Preflight and the whole launcher against a real Ray cluster of separate hosts (dev/netcluster.py).

One 2-node x 2-GPU cluster serves the module; each test plants one fault (a node's GPUs,
driver, storage, environment or packages, or the shared inputs), runs the bundle's
preflight on the head host, asserts the fault's finding ids and that nothing else failed,
then restores the cluster. A 4-node cluster shows the same code serves any topology.
"""
import json
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
from dev import netcluster, stubgpus

REASON = netcluster.missing_prerequisites()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host Ray cluster: {REASON}")
BUNDLE_REL = Path("tools/verl/two-worker-grpo")


def build_storage(nodes, gpus, values):
    def prepare(storage: Path) -> None:
        subprocess.run([sys.executable, str(REPO / "tests/lib/fixture.py"), str(storage),
                        "--nodes", str(nodes), "--gpus-per-node", str(gpus),
                        *[f"--set={k}={v}" for k, v in values.items()]],
                       check=True, capture_output=True)
    return prepare


def up(tmp_path_factory, name, nodes, gpus, head_gpus=None, **values):
    """nodes Ray hosts; with head_gpus=0 the head is CPU-only and the profile counts the others."""
    root = tmp_path_factory.mktemp(name)
    cluster = netcluster.Cluster(root)
    rollout = root / "storage" / BUNDLE_REL / "rollout"  # the fixture profile's engine is hf
    gpu_nodes = nodes - (head_gpus == 0)
    cluster.up(nodes, gpus, env={"PYTHONPATH": str(rollout)},
               prepare=build_storage(gpu_nodes, gpus, values), head_gpus=head_gpus)
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = up(tmp_path_factory, "cluster2", 2, 2)
    yield cluster
    cluster.down()


class Preflight:
    def __init__(self, cluster, run_id, profile="test-fixture", timeout=60, collective="off"):
        """collective: the stub GPUs cannot run NCCL; gloo runs the collective probe for real."""
        self.cluster, self.run_id = cluster, run_id
        storage = cluster.storage
        self.run_dir = storage / "runs/verl/two-worker-grpo" / run_id
        self.command = [sys.executable, str(storage / BUNDLE_REL / "verify-two-worker-grpo-v1.py"),
                        "preflight", "--profile", str(profile), "--run-id", run_id,
                        "--storage-root", str(storage), "--output-dir", str(self.run_dir),
                        "--probe-timeout", str(timeout), "--collective", collective,
                        "--collective-timeout", "30"]

    def run(self):
        out = self.cluster.driver(self.command, check=False, timeout=300)
        self.output = out.stdout + out.stderr
        self.code = out.returncode
        self.record = json.loads((self.run_dir / "preflight.json").read_text())
        return self

    def ids(self):
        return {f["id"] for c in self.record["checks"] for f in c["findings"] if f["level"] == "error"}


def preflight(cluster, request, **kw):
    return Preflight(cluster, request.node.name.replace("[", "-").replace("]", "")[:60], **kw).run()


def gpus_file(cluster, index):
    return cluster.root / f"n{index}" / "gpus.csv"


@contextmanager
def node_variant(cluster, index, gpus=2, env=None, model="NVIDIA A100-SXM4-80GB", driver="535.104.05"):
    """Restart one node with other GPUs or environment; put it back afterwards."""
    stubgpus.gpus_csv(gpus_file(cluster, index), gpus, model, driver)
    cluster.restart_node(index, gpus, env)
    try:
        yield
    finally:
        stubgpus.gpus_csv(gpus_file(cluster, index), 2)
        cluster.restart_node(index, 2)


@contextmanager
def stub_table(cluster, index, **kw):
    """Change what nvidia-smi reports on a node without restarting Ray."""
    stubgpus.gpus_csv(gpus_file(cluster, index), kw.pop("count", 2), **kw)
    try:
        yield
    finally:
        stubgpus.gpus_csv(gpus_file(cluster, index), 2)


def test_two_nodes_of_two_gpus_pass_and_record_what_postflight_needs(cluster, request):
    result = preflight(cluster, request)
    assert result.code == 0, result.output
    assert result.record["status"] == "passed"
    workers = result.record["workers"]
    assert [w["hostname"] for w in workers] == ["node-0", "node-1"]
    assert [w["node_ip"] for w in workers] == ["10.231.0.10", "10.231.0.11"]
    assert [w["is_head"] for w in workers] == [True, False]
    assert all(len(w["node_id"]) == 56 for w in workers)
    lines = [json.loads(line.split(" ", 1)[1]) for line in result.output.splitlines()
             if line.startswith("WORKER_TOPOLOGY ")]
    assert [line["hostname"] for line in lines] == ["node-0", "node-1"]
    markers = sorted(p.name for p in (result.run_dir / "preflight-nodes").iterdir())
    assert markers == ["node-0.json", "node-1.json"]


def test_only_one_node(cluster, request):
    node = cluster.nodes[1]
    cluster.stop_ray(node)
    cluster.wait_nodes(1)
    try:
        result = preflight(cluster, request)
    finally:
        cluster.start_ray(node, 2)
        cluster.wait_nodes(2)
    assert result.code == 1
    assert result.ids() == {"PRE-E012"}
    assert "live Ray nodes: expected 2, actual 1" in result.output


def test_three_gpus(cluster, request):
    with node_variant(cluster, 1, gpus=1):
        result = preflight(cluster, request)
    assert result.ids() == {"PRE-E013", "PRE-E020"}
    assert "Ray GPUs on the node: expected 2, actual 1.0" in result.output
    assert "Ray GPUs in total: expected 4, actual 3.0" in result.output


def test_wrong_gpu_model(cluster, request):
    with stub_table(cluster, 1, model="NVIDIA H100 80GB HBM3"):
        result = preflight(cluster, request)
    assert result.ids() == {"PRE-E021"}
    assert "node 1 (worker node-1 10.231.0.11): (PRE-E021) GPU model: expected NVIDIA A100-SXM4-80GB, actual NVIDIA H100 80GB HBM3" in result.output


def test_old_driver_on_one_node(cluster, request):
    with stub_table(cluster, 1, driver="470.57.02"):
        result = preflight(cluster, request)
    assert result.ids() == {"PRE-E022", "PRE-E055"}  # too old, and not node 0's driver
    assert "NVIDIA driver 470.57.02 is older than 525.60.13" in result.output


def test_storage_private_to_one_node(cluster, request, tmp_path):
    private = tmp_path / "private"
    shutil.copytree(cluster.storage, private, symlinks=True)
    node = cluster.nodes[1]
    mount = cluster.enter(node) + ["mount", "--bind", str(private), str(cluster.storage)]
    subprocess.run(mount, check=True)
    try:
        result = preflight(cluster, request)
    finally:
        subprocess.run(cluster.enter(node) + ["umount", str(cluster.storage)], check=True)
    assert result.ids() == {"PRE-E017", "PRE-E018"}
    assert "node 1 (worker node-1 10.231.0.11): (PRE-E017)" in result.output


def test_package_version_skew_on_one_node(cluster, request, tmp_path):
    # transformers: on the node's path and never imported by Ray's own worker (pyarrow is)
    shadow = tmp_path / "shadow"
    (shadow / "transformers").mkdir(parents=True)
    (shadow / "transformers" / "__init__.py").write_text("__version__ = '99.0.0'\n")
    (shadow / "transformers-99.0.0.dist-info").mkdir()
    (shadow / "transformers-99.0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: transformers\nVersion: 99.0.0\n")
    rollout = cluster.storage / BUNDLE_REL / "rollout"
    with node_variant(cluster, 1, env={"PYTHONPATH": f"{shadow}:{rollout}"}):
        result = preflight(cluster, request)
    assert result.ids() == {"PRE-E026"}
    assert "transformers version (vs node 0 (head node-0 10.231.0.10)): expected" in result.output
    assert "actual 99.0.0" in result.output


def test_nccl_ib_disable_unset_on_one_node(cluster, request):
    with node_variant(cluster, 1, env={"NCCL_IB_DISABLE": None}):
        result = preflight(cluster, request)
    assert result.ids() == {"PRE-E024"}
    assert "NCCL_IB_DISABLE: expected 1, actual unset" in result.output


def verl_checkout(cluster):
    return next(p for p in (cluster.storage / "code" / "verl").iterdir() if p.is_dir())


def test_dirty_verl_tree(cluster, request):
    stray = verl_checkout(cluster) / "local-patch.py"
    stray.write_text("print('not pinned')\n")
    try:
        result = preflight(cluster, request)
    finally:
        stray.unlink()
    assert result.ids() == {"INP-E005"}
    assert "local-patch.py: (INP-E005) not listed in the verl tree's manifest" in result.output


def git(checkout, *args):
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                                          "HOME": str(checkout), "PATH": "/usr/bin:/bin"}).stdout


def test_wrong_commit(cluster, request):
    checkout = verl_checkout(cluster)
    git(checkout, "commit", "-q", "--allow-empty", "-m", "not the pinned commit")
    try:
        result = preflight(cluster, request)
    finally:
        git(checkout, "reset", "-q", "--hard", "HEAD~1")
    assert result.ids() == {"INP-E004"}


def model_root(cluster):
    return next((cluster.storage / "models").rglob("model.safetensors")).parent


def test_tampered_model_file(cluster, request):
    weights = model_root(cluster) / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[: len(original) // 2])  # cut short: the header no longer fits
    try:
        result = preflight(cluster, request)
    finally:
        weights.write_bytes(original)
    assert result.ids() == {"INP-E014"}


def test_wrong_parquet_row_count(cluster, request):
    from prep.volume import parquetwrite
    data = next((cluster.storage / "datasets").rglob("test.parquet")).parent
    original = (data / "test.parquet").read_bytes()
    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "1+1?"}],
           "ability": "math", "reward_model": {"style": "rule", "ground_truth": "2"},
           "extra_info": {"split": "test", "index": 0, "answer": "#### 2", "question": "1+1?"}}
    parquetwrite.write_table(data / "test.parquet", parquetwrite.VERL_GSM8K_FIELDS, [row] * 3)
    try:
        result = preflight(cluster, request)
    finally:
        (data / "test.parquet").write_bytes(original)
    assert result.ids() == {"INP-E013"}
    assert "rows: expected 16, actual 3" in result.output


def profile_variant(cluster, tmp_path, **values):
    text = (cluster.storage / BUNDLE_REL / "profiles" / "test-fixture.env").read_text()
    for key, value in values.items():
        text = "".join(f"{key}={value}\n" if line.startswith(f"{key}=") else line + "\n"
                       for line in text.splitlines())
    path = tmp_path / "test-fixture.env"
    path.write_text(text)
    return path


def test_non_dividing_batch_sizes_are_rejected(cluster, request, tmp_path):
    result = preflight(cluster, request, profile=profile_variant(cluster, tmp_path, TRAIN_BATCH_SIZE=5))
    assert result.ids() == {"PRE-E001"}
    assert "5 x 2 = 10 does not divide by the world size 4" in result.output


def test_a_hung_probe_becomes_a_finding_after_the_timeout(cluster, request):
    hang = gpus_file(cluster, 1).with_suffix(".csv.hang")
    hang.write_text("120")
    started = time.monotonic()
    try:
        result = preflight(cluster, request, timeout=8)
    finally:
        hang.unlink()
    assert time.monotonic() - started < 60
    assert result.ids() == {"PRE-E015"}
    assert "did not answer within 8 s" in result.output


def test_a_node_killed_during_the_probe(cluster, request):
    table = gpus_file(cluster, 1)
    called = table.with_suffix(".csv.called")
    hang = table.with_suffix(".csv.hang")
    called.unlink(missing_ok=True)
    hang.write_text("120")
    node = cluster.nodes[1]

    def kill_when_probed():
        for _ in range(600):
            if called.exists():
                cluster.stop_ray(node, grace=0)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_when_probed)
    killer.start()
    try:
        result = preflight(cluster, request, timeout=40)
    finally:
        killer.join()
        hang.unlink()
        cluster.start_ray(node, 2)
        cluster.wait_nodes(2)
    assert result.ids() == {"PRE-E015"}
    assert "node 1 (worker node-1 10.231.0.11): (PRE-E015)" in result.output


def driver_command(cluster, run_id):
    launcher = cluster.storage / BUNDLE_REL / "run-two-worker-grpo-v1.sh"
    return subprocess.run([sys.executable, str(REPO / "prep/bundle.py"), "driver-command",
                           str(cluster.storage), "--profile", "test-fixture", "--run-id", run_id,
                           "--launcher", str(launcher), "--bundle-dir", str(BUNDLE_REL)],
                          capture_output=True, text=True,
                          check=True).stdout


def launch(cluster, run_id, **env):
    """The pasted Driver command on the head host; a stand-in verl writes real-format artifacts."""
    # Gloo: the stub GPUs cannot run NCCL, and the chain runs its collective probe for real.
    env = {"STANDIN_MODE": "artifacts", "STANDIN_LIB": str(REPO / "tests/lib"),
           "COLLECTIVE_PROBE": "gloo", **env}
    out = cluster.driver(["bash", "-c", driver_command(cluster, run_id)], env=env, check=False,
                         timeout=600)
    return out, cluster.storage / "runs/verl/two-worker-grpo" / run_id


def test_the_pasted_driver_command_reaches_success_on_two_hosts(cluster):
    out, run = launch(cluster, "flow-ok")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "run-two-worker-grpo-v1: SUCCESS flow-ok" in out.stdout
    assert (run / "SUCCESS").is_file() and not (run / "FAILED").exists()
    placement = json.loads((run / "actor-placement.json").read_text())
    assert placement["status"] == "passed"
    assert {a["hostname"]: a["node_ip"] for a in placement["actors"]} == {
        "node-0": "10.231.0.10", "node-1": "10.231.0.11"}
    assert sorted(placement["node_counts"].values()) == [2, 2]
    for name in ("driver.log", "training.log", "resolved-command.txt", "preflight.json",
                 "shared-storage-sentinel", "verification.json", "inputs.json", "run.json"):
        assert (run / name).is_file(), name
    assert sorted(p.name for p in (run / "preflight-nodes").iterdir()) == ["node-0.json", "node-1.json"]


def test_in_job_postflight_reads_the_shards_on_every_node_and_names_where_one_failed(cluster):
    out, run = launch(cluster, "flow-fanout")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "checkpoint shards spread over 2 Ray node(s)" in out.stdout + out.stderr
    actor = run / "checkpoints" / "global_step_2" / "actor"
    for shard in sorted(actor.glob("model_world_size_4_rank_*.pt")):  # one damaged shard a rank
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
    verify = [sys.executable, "-I", "-B", str(cluster.storage / BUNDLE_REL / "verify-two-worker-grpo-v1.py"),
              "postflight", "--output-dir", str(run), "--fan-out"]
    result = cluster.driver(verify, check=False, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    verification = json.loads((run / "verification.json").read_text())
    damaged = [f for c in verification["checks"] for f in c["findings"] if f["id"] in ("POST-E022", "POST-E032")]
    assert len(damaged) == 4
    hosts = {f["message"].rsplit("(checked on node ", 1)[1].rstrip(")") for f in damaged}
    assert hosts == {"node-0", "node-1"}  # each node read its own slice and says so


def test_a_fault_in_the_artifacts_leaves_failed_in_postflight(cluster):
    out, run = launch(cluster, "flow-fault", STANDIN_FAULT="missing-shard")
    assert out.returncode == 1
    failed = dict(line.split("=", 1) for line in (run / "FAILED").read_text().splitlines())
    assert (failed["phase"], failed["exit_status"], failed["signal"]) == ("postflight", "1", "none")
    verification = json.loads((run / "verification.json").read_text())
    ids = {f["id"] for c in verification["checks"] for f in c["findings"]}
    assert ids == {"POST-E021"}
    assert not (run / "SUCCESS").exists()


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory, cluster):
    cluster.down()  # one cluster at a time on a small machine
    # 16 x 2 responses over 8 GPUs: the tutorial's batch of 4 would not divide (PRE-E003).
    big = up(tmp_path_factory, "cluster4", 4, 2, TRAIN_BATCH_SIZE=8, PPO_MINI_BATCH_SIZE=8)
    yield big
    big.down()


def test_four_nodes_of_two_gpus_use_the_same_code(cluster4, request):
    result = preflight(cluster4, request)
    assert result.code == 0, result.output
    assert [w["hostname"] for w in result.record["workers"]] == [f"node-{i}" for i in range(4)]
    assert result.record["world_size"] == 8


@pytest.fixture(scope="module")
def cluster_cpu_head(tmp_path_factory, cluster4):
    cluster4.down()
    # A CPU-only head (Ray --num-gpus=0, no GPU in nvidia-smi) and two workers of two GPUs:
    # the profile's NODES=2 x GPUS_PER_NODE=2 describes the GPU workers.
    layout = up(tmp_path_factory, "cpuhead", 3, 2, head_gpus=0)
    yield layout
    layout.down()


def test_a_cpu_only_head_with_gpu_workers_passes_preflight(cluster_cpu_head, request):
    result = preflight(cluster_cpu_head, request)
    assert result.code == 0, result.output
    workers = result.record["workers"]
    assert [(w["hostname"], w["is_head"], w["gpu_node"], w["gpu_count"]) for w in workers] == [
        ("node-0", True, False, 0), ("node-1", False, True, 2), ("node-2", False, True, 2)]
    assert result.record["cluster_resources"]["GPU"] == 4.0


def test_the_driver_command_on_a_cpu_only_head_reaches_success(cluster_cpu_head):
    out, run = launch(cluster_cpu_head, "cpu-head-ok")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    placement = json.loads((run / "actor-placement.json").read_text())
    assert placement["status"] == "passed"
    assert {a["hostname"] for a in placement["actors"]} == {"node-1", "node-2"}
    assert sorted(placement["node_counts"].values()) == [2, 2]


def test_a_gpu_worker_missing_beside_a_cpu_head_is_named(cluster_cpu_head, request):
    node = cluster_cpu_head.nodes[2]
    cluster_cpu_head.stop_ray(node)
    cluster_cpu_head.wait_nodes(2)
    try:
        result = preflight(cluster_cpu_head, request)
    finally:
        cluster_cpu_head.start_ray(node, 2)
        cluster_cpu_head.wait_nodes(3)
    assert result.ids() == {"PRE-E012"}
    assert "live Ray nodes with GPUs: expected 2, actual 1" in result.output
