"""What each test-cluster host's processes see: the stub nvidia-smi in a clean environment, or,
with real GPUs, the machine's own environment and GPU 0 (no root needed: nothing starts)."""
import pytest

from dev import hostenv, netcluster


def cluster_of_two(tmp_path, stub_gpus, node_envs=None):
    cluster = netcluster.Cluster(tmp_path, tag="twgtest", stub_gpus=stub_gpus)
    cluster.nodes = [netcluster.Node(i, f"twgtest-n{i}", f"10.231.0.{10 + i}", f"node-{i}") for i in (0, 1)]
    cluster.env = {"NCCL_DEBUG": "INFO", "PYTHONPATH": "/storage/code/verl/abc"}
    cluster.node_envs = node_envs or []
    return cluster


def test_stub_hosts_get_a_clean_environment_with_the_stub_first(tmp_path, monkeypatch):
    monkeypatch.setenv("SOMETHING_OF_THE_CALLER", "1")
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    cluster = cluster_of_two(tmp_path, stub_gpus=True)
    env = cluster.node_env(cluster.nodes[1])
    assert env["PATH"].split(":")[0] == str(hostenv.STUBS)
    assert env["NVIDIA_SMI_STUB"] == str(tmp_path / "n1" / "gpus.csv")
    assert "SOMETHING_OF_THE_CALLER" not in env
    assert env["PYTHONPATH"] == "/storage/code/verl/abc:/opt/site"  # the job's first, the machine's after
    assert env["NCCL_IB_DISABLE"] == "1" and env["NCCL_DEBUG"] == "INFO"


def test_real_gpu_hosts_keep_the_machines_environment_and_share_gpu_0(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    monkeypatch.setenv("PATH", "/usr/local/nvidia/bin:/usr/bin:/bin")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    cluster = cluster_of_two(tmp_path, stub_gpus=False, node_envs=[netcluster.SHARED_GPU0] * 2)
    for node in cluster.nodes:
        env = cluster.node_env(node)
        assert str(hostenv.STUBS) not in env["PATH"] and "NVIDIA_SMI_STUB" not in env
        assert env["PATH"].endswith(":/usr/local/nvidia/bin:/usr/bin:/bin")
        assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
        assert env["CUDA_VISIBLE_DEVICES"] == "0"
        assert "RAY_ADDRESS" not in env  # a host finds the head by its own --address
        assert env["PYTHONPATH"] == "/storage/code/verl/abc"


@pytest.mark.parametrize("extra, key, expected", [
    ({"NCCL_IB_DISABLE": None}, "NCCL_IB_DISABLE", None),   # a test unsets it on one node
    ({"NCCL_IB_DISABLE": "0"}, "NCCL_IB_DISABLE", "0"),
])
def test_a_node_can_differ(tmp_path, extra, key, expected):
    cluster = cluster_of_two(tmp_path, stub_gpus=True)
    assert cluster.node_env(cluster.nodes[0], extra).get(key) == expected
    assert cluster.node_env(cluster.nodes[1]).get(key) == "1"


def test_the_state_file_keeps_the_gpu_mode_and_cpus(tmp_path):
    cluster = netcluster.Cluster(tmp_path, tag="twgtest", stub_gpus=False, cpus_per_node=8)
    cluster.save()
    again = netcluster.Cluster(tmp_path)
    assert (again.tag, again.stub_gpus, again.cpus_per_node) == ("twgtest", False, 8)



def test_a_python_without_ray_is_named_without_importing_it(monkeypatch):
    """The prerequisite check finds ray without loading it into the test process: a Python that
    lacks it gets the reason."""
    assert netcluster.ray_missing() is None  # the test venv has ray
    monkeypatch.setattr(netcluster.importlib.util, "find_spec", lambda name: None)
    assert netcluster.ray_missing() == "needs ray in this Python (make test installs it in .venv)"
