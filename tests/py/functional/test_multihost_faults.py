"""Operating-system and network faults of real failure reports, injected into one host of a real
multi-host Ray cluster (dev/netcluster.py): each gets its own finding, on that host, before
any GPU time. One 2-node x 2-GPU cluster serves the module; each test puts the host back.
"""
import subprocess
import sys
import time

import pytest
from test_multihost_cluster import BUNDLE_REL, Preflight, gpus_file, node_variant, stub_table, up

from dev import netcluster

REASON = netcluster.missing_prerequisites()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host Ray cluster: {REASON}")
NODE0 = "node 0 (head node-0 10.231.0.10)"
NODE1 = "node 1 (worker node-1 10.231.0.11)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = up(tmp_path_factory, "faults2", 2, 2)
    yield cluster
    cluster.down()


def preflight(cluster, request, **kw):
    result = Preflight(cluster, "f-" + request.node.name[:50], **kw).run()
    found = [f for c in result.record["checks"] for f in c["findings"]]
    result.errors = {(f["id"], f["obj"]) for f in found if f["level"] == "error"}
    result.warnings = {(f["id"], f["obj"]) for f in found if f["level"] == "warning"}
    return result


def on_node(cluster, index, *command):
    return subprocess.run(cluster.enter(cluster.nodes[index]) + list(command), check=True,
                          capture_output=True, text=True)


def test_a_healthy_cluster_passes_every_new_check_and_reaches_all_pairs(cluster, request):
    result = preflight(cluster, request)
    assert result.code == 0, result.output
    checks = {c["name"]: c["status"] for c in result.record["checks"]}
    for name in ("gpus-free", "hostname-resolution", "distinct-identity", "interfaces",
                 "reachability", "shared-memory", "open-files", "host-memory", "storage-space",
                 "gpu-processes", "same-versions"):
        assert checks[name] == "passed", name
    nodes = result.record["nodes"]
    assert nodes[1]["system"]["network"]["resolved"]["addresses"] == ["10.231.0.11"]


def test_hostname_mapped_to_127_0_1_1(cluster, request):
    cluster.write_hosts(override={1: "127.0.0.1 localhost\n127.0.1.1 node-1\n10.231.0.10 node-0\n"})
    try:
        result = preflight(cluster, request)
    finally:
        cluster.write_hosts()
    assert result.errors == {("PRE-E040", NODE1)}
    assert "hostname 'node-1' resolves only to 127.0.1.1" in result.output


def test_two_hosts_with_one_hostname(cluster, request):
    on_node(cluster, 1, "hostname", "node-0")
    try:
        result = preflight(cluster, request)
    finally:
        on_node(cluster, 1, "hostname", "node-1")
    assert result.errors == {("PRE-E041", "node 1 (worker node-0 10.231.0.11)")}


def test_nccl_interface_no_peer_can_reach(cluster, request):
    with cluster.isolated_interface(1, "10.232.0.11"):
        unset = preflight(cluster, request)
        with node_variant(cluster, 1, env={"NCCL_SOCKET_IFNAME": "eth1"}):
            blocked = preflight(cluster, request)
    assert unset.code == 0, unset.output
    assert ("PRE-W011", NODE1) in unset.warnings
    assert blocked.errors == {("PRE-E046", NODE1)}
    assert "cannot open a TCP connection to it at 10.232.0.11:" in blocked.output
    assert "(interface eth1)" in blocked.output


def test_tiny_dev_shm(cluster, request):
    on_node(cluster, 1, "mount", "-o", "remount,size=64m", "/dev/shm")
    try:
        result = preflight(cluster, request)
    finally:
        on_node(cluster, 1, "mount", "-o", "remount,size=1g", "/dev/shm")
    assert result.errors == {("PRE-E048", NODE1)}
    assert "/dev/shm has 64 MiB free, less than 512 MiB" in result.output


def test_low_ulimit_n_in_the_ray_worker(cluster, request):
    cluster.wrappers[1] = ["prlimit", "--nofile=1024:1024"]
    cluster.restart_node(1, 2)
    try:
        result = preflight(cluster, request)
    finally:
        cluster.wrappers.pop(1)  # before the restart that puts the node back
        cluster.restart_node(1, 2)
    assert result.errors == {("PRE-E049", NODE1)}
    assert "ulimit -n in the Ray worker is 1024" in result.output


def test_a_process_outside_ray_holds_a_gpu(cluster, request):
    apps = gpus_file(cluster, 1).with_suffix(".csv.apps")
    apps.write_text("gpu_uuid,pid,process_name,used_memory\n"
                    "GPU-00000001-0000-4000-8000-000000000000,4242,python3,30000\n")
    try:
        result = preflight(cluster, request)
    finally:
        apps.unlink()
    assert result.errors == {("PRE-E054", NODE1)}
    assert "pid 4242 python3 30000 MiB" in result.output


HOLDER = """
import ray, sys, time
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "10.231.0.11")
@ray.remote(num_gpus=2, num_cpus=0)
class Holder:
    def ready(self):
        return True
h = Holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
ray.get(h.ready.remote())
print("holding", flush=True)
time.sleep(600)
"""


def test_gpus_held_by_another_ray_job(cluster, request):
    env = {**cluster.node_env(cluster.nodes[0]), "RAY_ADDRESS": "10.231.0.10:6379"}
    holder = subprocess.Popen(cluster.enter(cluster.nodes[0]) + [sys.executable, "-c", HOLDER],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        result = preflight(cluster, request, timeout=8)
    finally:
        holder.kill()
        holder.wait()
        free = ("import ray; ray.init(address='auto', logging_level='ERROR'); "
                "print(ray.available_resources().get('GPU', 0))")
        for _ in range(60):  # the job's actor goes with its driver
            if cluster.driver([sys.executable, "-c", free]).stdout.strip() == "4.0":
                break
            time.sleep(1)
    assert result.errors == {("PRE-E053", NODE1), ("PRE-E015", NODE1)}
    assert "2 of 2 Ray GPUs are already held by another job" in result.output


def test_driver_differs_between_nodes(cluster, request):
    with stub_table(cluster, 1, driver="550.54.15"):
        result = preflight(cluster, request)
    assert result.errors == {("PRE-E055", NODE1)}
    assert "NVIDIA driver (vs node 0 (head node-0 10.231.0.10)): expected 535.104.05, actual 550.54.15" in result.output


def test_nccl_library_differs_on_one_node(cluster, request, tmp_path):
    shadow = tmp_path / "shadow"
    meta = shadow / "nvidia_nccl_cu12-2.21.5.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n")
    rollout = cluster.storage / BUNDLE_REL / "rollout"
    with node_variant(cluster, 1, env={"PYTHONPATH": f"{shadow}:{rollout}"}):
        result = preflight(cluster, request)
    assert result.errors == {("PRE-E056", NODE1)}
    assert "nvidia-nccl-cu12 version (vs node 0 (head node-0 10.231.0.10)): expected absent, actual 2.21.5" in result.output


def test_storage_root_nearly_full(cluster, request):
    import os
    filler = cluster.storage / "filler"
    st = os.statvfs(cluster.storage)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as stream:
        os.posix_fallocate(stream.fileno(), 0, max(free - (600 << 20), 1))
    try:
        result = preflight(cluster, request)
    finally:
        filler.unlink()
    assert result.errors == {("PRE-E051", NODE1), ("PRE-E051", "node 0 (head node-0 10.231.0.10)")}


def test_ephemeral_ports_over_rays_worker_ports(cluster, request):
    ports = "/proc/sys/net/ipv4/ip_local_port_range"  # one per network namespace: per host
    on_node(cluster, 1, "sh", "-c", f"echo '1024 65000' > {ports}")
    try:
        result = preflight(cluster, request)
    finally:
        on_node(cluster, 1, "sh", "-c", f"echo '32768 60999' > {ports}")
    assert result.code == 0, result.output
    assert ("PRE-W015", NODE1) in result.warnings
    assert "the ephemeral port range 1024-65000 holds Ray's worker ports 10002-19999 and the GCS port 6379" in result.output


# --- the collective probe (checks/rounds/collective.py), over Gloo: the stub GPUs cannot run NCCL ---

def test_the_collective_probe_meets_over_gloo_on_both_hosts(cluster, request):
    result = preflight(cluster, request, collective="gloo")
    assert result.code == 0, result.output
    record = result.record["collective"]
    assert (record["backend"], record["world"]) == ("gloo", 2)
    assert [(r["rank"], r["stage"], r["address"]) for r in record["ranks"]] == [
        (0, "done", "10.231.0.10"), (1, "done", "10.231.0.11")]
    assert record["seconds"] < 30


def test_a_peer_whose_torch_is_broken_fails_its_rank_and_rank_0_waits(cluster, request, tmp_path):
    rollout = cluster.storage / BUNDLE_REL / "rollout"
    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("raise ImportError('libcudart.so.12: cannot open')\n")
    with node_variant(cluster, 1, env={"PYTHONPATH": f"{shadow}:{rollout}"}):
        result = preflight(cluster, request, collective="gloo")
    # rank 1 failed at once; rank 0, waiting for it at the rendezvous, got 10 s more, not 30 + 15;
    # node 1's own group (one rank per local GPU, before) failed on the same import
    assert result.errors == {("PRE-E070", f"{NODE1} rank 1"), ("PRE-E071", f"{NODE0} rank 0"),
                             ("PRE-E210", f"{NODE1} local rank 0 of 2"),
                             ("PRE-E210", f"{NODE1} local rank 1 of 2")}, result.output
    assert "rank 1: (PRE-E070) the collective probe failed after stage started: ImportError: " \
           "libcudart.so.12: cannot open" in result.output
    assert "rank 0: (PRE-E071) had not finished the collective probe when it stopped waiting (1" \
           in result.output and "its last stage was rendezvous" in result.output
    assert result.record["collective"]["seconds"] < 25


def test_a_peer_that_hangs_is_named_with_the_stage_it_reached(cluster, request, tmp_path):
    rollout = cluster.storage / BUNDLE_REL / "rollout"
    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("import time\ntime.sleep(600)\n")  # a wedged driver
    with node_variant(cluster, 1, env={"PYTHONPATH": f"{shadow}:{rollout}"}):
        result = preflight(cluster, request, collective="gloo")
    # rank 0 gave up waiting for rank 1 at the rendezvous (its own timeout), rank 1 never got
    # past its import: each named with the stage it reached
    assert result.errors == {("PRE-E070", f"{NODE0} rank 0"), ("PRE-E071", f"{NODE1} rank 1"),
                             ("PRE-E211", f"{NODE1} local rank 0 of 2"),
                             ("PRE-E211", f"{NODE1} local rank 1 of 2")}, result.output
    assert "rank 0: (PRE-E070) the collective probe failed after stage rendezvous: DistStoreError" \
           in result.output
    assert f"{NODE1} rank 1: (PRE-E071) had not finished the collective probe when it stopped " \
           "waiting (" in result.output and "its last stage was started" in result.output
    assert result.record["collective"]["seconds"] < 30 + 15 + 5
