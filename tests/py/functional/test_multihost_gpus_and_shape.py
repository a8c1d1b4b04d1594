"""Every GPU, each node's own collective, the job's real shape, limits, clocks and storage,
planted on one host of a real multi-host Ray cluster (dev/netcluster.py): each fault of
FM41-FM59 that a test host can carry is made for real (a process limit, a cgroup pids.max, a
full Ray temp folder, an MTU, an IPv6-only hostname, a clock offset, a CPU-hogging actor, a
hung local rank; a clock shifted by tests/lib/clockshift.c); the GPU-only ones are the stub nvidia-smi replaying the real tool's formats.
One 2-node x 2-GPU cluster serves the module; each test puts the host back.
"""
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_multihost_cluster import BUNDLE_REL, gpus_file, node_variant, stub_table, up
from test_multihost_faults import NODE0, NODE1, on_node, preflight

from dev import netcluster

REASON = netcluster.missing_prerequisites()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host Ray cluster: {REASON}")
CLOCKSHIFT = Path(__file__).resolve().parents[2] / "lib" / "clockshift.c"
NEW_CHECKS = ("gpu-health", "xid-errors", "nvlink", "process-limits", "ray-space",
              "address-families", "mtu", "job-shape", "ray-ports-and-clocks", "storage-trial",
              "node-collective")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = up(tmp_path_factory, "shape2", 2, 2)
    yield cluster
    cluster.down()


def test_a_healthy_cluster_passes_and_records_every_gpu_and_shape(cluster, request):
    result = preflight(cluster, request, collective="gloo")
    assert result.code == 0, result.output
    checks = {c["name"]: c["status"] for c in result.record["checks"]}
    assert {name: checks[name] for name in NEW_CHECKS} == {name: "passed" for name in NEW_CHECKS}
    local = result.record["node_collective"]
    assert local["backend"] == "gloo"
    assert [(n["ordinal"], n["world"], n["stages"]) for n in local["nodes"]] == [
        (0, 2, {"0": "done", "1": "done"}), (1, 2, {"0": "done", "1": "done"})]
    assert result.record["job_shape"]["placed"] == 3  # the TaskRunner's group and one per node
    trial = result.record["storage_trial"]["nodes"]
    assert [(n["ordinal"], n["seen"], n["unseen"]) for n in trial] == [(0, 1, {}), (1, 1, {})]
    plans = result.record["peer_plans"]  # every pair on two nodes, drawn from the run id
    assert {round_: (p["seed"], p["pairs"], p["targets"]) for round_, p in plans.items()} == {
        round_: (result.record["run_id"], 2, {"0": [1], "1": [0]})
        for round_ in ("reachability", "storage-trial", "ray-ports")}
    offsets = result.record["node_agents"]["clock_offsets"]
    assert all(abs(c["offset"]) < 1 for c in offsets.values()), offsets
    health = result.record["nodes"][1]["gpu_health"]["query"]["gpus"]
    assert [g["index"] for g in health] == ["0", "1"]


BAD_GPU = [
    # (mode, GPU 1's answers on node 1, expected error ids, expected warning ids, text)
    ("FM44 uncorrectable ECC", {"ecc.errors.uncorrected.volatile.total": "2"}, {"PRE-E201"}, set(),
     "GPU 1 (00000000:0B:00.0) has 2 uncorrectable ECC error(s)"),
    ("FM44 pending row remap", {"remapped_rows.pending": "Yes"}, {"PRE-E202"}, set(),
     "has remapped_rows.pending: memory waits for a GPU reset"),
    ("FM45 MIG", {"mig.mode.current": "Enabled"}, {"PRE-E204"}, set(), "is in MIG mode"),
    ("FM46 exclusive", {"compute_mode": "Exclusive_Process"}, {"PRE-E205"}, set(),
     "compute mode is Exclusive_Process"),
    ("FM57 slowdown", {"clocks_event_reasons.hw_slowdown": "Active"}, set(), {"PRE-W101"},
     "clocks are held down now: hw_slowdown active"),
    ("FM43 fabric", {"fabric.state": "In Progress", "fabric.status": "N/A"}, {"PRE-E208"}, set(),
     "fabric.state In Progress"),
]


@pytest.mark.parametrize("mode,answers,errors,warnings,text", BAD_GPU, ids=[b[0] for b in BAD_GPU])
def test_a_bad_gpu_that_the_probe_does_not_hold_is_named(cluster, request, mode, answers, errors,
                                                         warnings, text):
    with stub_table(cluster, 1, health={1: answers}):
        result = preflight(cluster, request)
    assert result.errors == {(e, NODE1) for e in errors}, result.output
    assert {(w, NODE1) for w in warnings} <= result.warnings
    assert text in result.output


NVLINK = """GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-4000-8000-000000000000)
\t Link 0: 25 GB/s
\t Link 1: 25 GB/s
\t Link 2: 25 GB/s
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-00000001-0000-4000-8000-000000000000)
\t Link 0: 25 GB/s
\t Link 1: <inactive>
\t Link 2: 25 GB/s
"""


def test_fm42_an_nvlink_link_down(cluster, request):
    links = gpus_file(cluster, 1).with_suffix(".csv.nvlink")
    links.write_text(NVLINK)
    try:
        result = preflight(cluster, request)
    finally:
        links.unlink()
    assert result.errors == {("PRE-E207", NODE1)}, result.output
    assert "GPU 1 has 2 active NVLink link(s), its node's best GPU 3; links down: [1]" in result.output


def test_fm47_low_process_limits_in_the_ray_worker(cluster, request):
    group = f"/sys/fs/cgroup/pids/{cluster.tag}-pids"
    cluster.wrappers[1] = ["sh", "-c", f'mkdir -p {group} && echo 3000 > {group}/pids.max && '
                           f'echo $$ > {group}/cgroup.procs && exec prlimit --nproc=512:512 "$@"', "sh"]
    cluster.restart_node(1, 2)
    try:
        result = preflight(cluster, request)
    finally:
        cluster.wrappers.pop(1)
        cluster.restart_node(1, 2)
        for _ in range(50):  # empty once node 1's old processes are gone
            try:
                os.rmdir(group)
                break
            except OSError:
                time.sleep(0.2)
    # root: the kernel does not apply ulimit -u to it, so that is a warning; pids.max binds anyone
    assert result.errors == {("PRE-E221", NODE1)}, result.output
    assert ("PRE-W105", NODE1) in result.warnings
    assert "ulimit -u (processes and threads) in the Ray worker is 512, less than 4096" in result.output
    assert "the cgroup's pids.max is 3000" in result.output


def test_fm48_a_full_ray_temp_folder(cluster, request):
    filler = cluster.ray_temp / "filler"
    # node 1's own tmpfs on that path (its mount namespace), not this host's /tmp
    free = int(on_node(cluster, 1, "stat", "-f", "-c", "%a %S", str(cluster.ray_temp)).stdout.split()[0]) * \
        int(on_node(cluster, 1, "stat", "-f", "-c", "%S", str(cluster.ray_temp)).stdout)
    on_node(cluster, 1, "fallocate", "-l", str(free - (60 << 20)), str(filler))
    try:
        result = preflight(cluster, request)
    finally:
        on_node(cluster, 1, "rm", "-f", str(filler))
    assert result.errors == {("PRE-E223", NODE1)}, result.output
    assert "Ray's session folder" in result.output and "% full (" in result.output


HOG = """
import ray, time
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "10.231.0.11")
@ray.remote(num_cpus=3, num_gpus=0)
class Hog:
    def ready(self):
        return True
h = Hog.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
ray.get(h.ready.remote())
print("hogging", flush=True)
time.sleep(600)
"""


def test_fm49_cpus_held_while_the_gpus_are_free(cluster, request):
    env = {**cluster.node_env(cluster.nodes[0]), "RAY_ADDRESS": "10.231.0.10:6379"}
    hog = subprocess.Popen(cluster.enter(cluster.nodes[0]) + [sys.executable, "-c", HOG], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert hog.stdout.readline().strip() == "hogging"
        result = preflight(cluster, request)
    finally:
        hog.kill()
        hog.wait()
        free = ("import ray; ray.init(address='auto', logging_level='ERROR'); "
                "print(ray.available_resources().get('CPU', 0))")
        for _ in range(60):
            if cluster.driver([sys.executable, "-c", free]).stdout.strip() == "6.0":
                break
            time.sleep(1)
    assert result.errors == {("PRE-E215", "cluster")}, result.output
    assert f"{NODE1} has 0 of 3 CPUs free, its group needs 2 while its 2 GPUs are free" in result.output


def test_fm53_one_node_resolves_its_hostname_to_ipv6(cluster, request):
    from pyroute2 import IPRoute
    with IPRoute(netns=cluster.nodes[1].ns) as ns:
        eth0 = ns.link_lookup(ifname="eth0")[0]
        ns.addr("add", index=eth0, address="fd00::11", prefixlen=64)
    cluster.write_hosts(override={1: "127.0.0.1 localhost\nfd00::11 node-1\n10.231.0.10 node-0\n"})
    try:
        result = preflight(cluster, request)
    finally:
        cluster.write_hosts()
        with IPRoute(netns=cluster.nodes[1].ns) as ns:
            ns.addr("del", index=eth0, address="fd00::11", prefixlen=64)
    assert result.errors == {("PRE-E224", NODE1)}, result.output
    assert "its hostname resolves first to ipv6, the other nodes' to ipv4" in result.output


@contextmanager
def mtu(cluster, index, value):
    from pyroute2 import IPRoute
    with IPRoute(netns=cluster.nodes[index].ns) as ns:
        ns.link("set", index=ns.link_lookup(ifname="eth0")[0], mtu=value)
    try:
        yield
    finally:
        with IPRoute(netns=cluster.nodes[index].ns) as ns:
            ns.link("set", index=ns.link_lookup(ifname="eth0")[0], mtu=1500)


def test_fm54_another_mtu_on_one_node(cluster, request):
    with mtu(cluster, 1, 1400):
        result = preflight(cluster, request)
    assert result.errors == {("PRE-E225", NODE1)}, result.output
    assert "interface eth0 has MTU 1400, the other nodes' 1500" in result.output


def test_fm55_low_locked_memory_on_an_ib_profile(cluster, request):
    installed = cluster.storage / BUNDLE_REL / "profiles" / "test-fixture.env"
    profile = cluster.storage / "test-ib.env"
    profile.write_text(installed.read_text().replace("PROFILE_NAME=test-fixture", "PROFILE_NAME=test-ib")
                       + "NCCL_TRANSPORT=ib\n")
    cluster.wrappers[1] = ["prlimit", "--memlock=4096:4096"]  # this host's own may be low too
    cluster.restart_node(1, 2)
    try:
        result = preflight(cluster, request, profile=str(profile))
    finally:
        cluster.wrappers.pop(1)
        cluster.restart_node(1, 2)
    assert ("PRE-E222", NODE1) in result.errors, result.output
    assert f"{NODE1}: (PRE-E222) ulimit -l (locked memory) in the Ray worker is 4 KiB" in result.output


def test_fm59_a_clock_offset_on_one_node(cluster, request, tmp_path):
    shim = tmp_path / "clockshift.so"  # node 1's wall clock 90 s ahead, its sleeps untouched
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(CLOCKSHIFT), "-ldl"],
                   check=True, capture_output=True)
    with node_variant(cluster, 1, env={"LD_PRELOAD": str(shim), "CLOCK_SHIFT_SECONDS": "90"}):
        result = preflight(cluster, request)
    assert result.code == 0, result.output
    assert ("PRE-W104", NODE1) in result.warnings
    assert "its clock is +90." in result.output
    assert abs(result.record["node_agents"]["clock_offsets"]["0"]["offset"]) < 1


def test_fm51_a_node_whose_view_of_the_folder_differs(cluster, request):
    # node 1 sees its own copy of the trial folder: its renames never reach node 0, as with a
    # client that caches names (NFS attribute caching, a stale handle)
    folder = cluster.storage / "runs/verl/two-worker-grpo" / ("f-" + request.node.name[:50]) / "preflight-storage"
    folder.mkdir(parents=True)
    on_node(cluster, 1, "mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(folder))
    try:
        result = preflight(cluster, request)
    finally:
        subprocess.run(cluster.enter(cluster.nodes[1]) + ["umount", "-l", str(folder)], check=False)
    assert result.errors == {("PRE-E231", NODE0), ("PRE-E231", NODE1)}, result.output
    assert f"{NODE1}: (PRE-E231) did not see {NODE0}'s renamed file within the trial" in result.output


PORTS = ("import ray, json; ray.init(address='auto', logging_level='ERROR'); print(json.dumps("
         "{n['NodeManagerAddress']: n['ObjectManagerPort'] for n in ray.nodes() if n['Alive']}))")


@pytest.mark.skipif(shutil.which("iptables") is None, reason="needs iptables (Debian package)")
def test_fm52_a_firewall_drops_one_nodes_object_manager_port(cluster, request):
    import json
    port = json.loads(cluster.driver([sys.executable, "-c", PORTS]).stdout)["10.231.0.11"]
    rule = ["INPUT", "-p", "tcp", "-s", "10.231.0.10", "--dport", str(port), "-j", "DROP"]
    on_node(cluster, 1, "iptables", "-A", *rule)  # node 1's own firewall, in its namespace
    try:
        result = preflight(cluster, request)
    finally:
        on_node(cluster, 1, "iptables", "-D", *rule)
    assert result.errors == {("PRE-E227", NODE0)}, result.output
    assert f"cannot connect to 1 of the other nodes' Ray ports: object manager of node 1 at " \
           f"10.231.0.11:{port} (TimeoutError" in result.output


def test_fm41_a_node_whose_own_gpus_never_meet(cluster, request, tmp_path):
    rollout = cluster.storage / BUNDLE_REL / "rollout"
    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("import time\ntime.sleep(600)\n")  # a wedged P2P init
    with node_variant(cluster, 1, env={"PYTHONPATH": f"{shadow}:{rollout}"}):
        result = preflight(cluster, request, collective="gloo")
    local = {e for e in result.errors if e[0].startswith("PRE-E21")}
    assert local == {("PRE-E211", f"{NODE1} local rank 0 of 2"),
                     ("PRE-E211", f"{NODE1} local rank 1 of 2")}, result.output
    assert "the node's own collective across its 2 GPUs had not finished" in result.output
    assert "its last stage was started" in result.output
    stages = result.record["node_collective"]["nodes"]
    assert stages[0]["stages"] == {"0": "done", "1": "done"}  # node 0's own GPUs met
