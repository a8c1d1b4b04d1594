"""Preflight's judgement of each node's operating system and network, without a cluster: healthy
reports (test_preflight_checks.report) with one planted fault each, and the node-side probes
on this machine's own files. The same faults on real hosts: test_multihost_faults.py."""
import json
import os
import threading
import time

import pytest
from test_preflight_checks import change, context, ids
from twgrpo.checks.preflight import node_network, node_system
from twgrpo.checks.nodeside import probe_system
from twgrpo.checks.rounds import peers, reach

GIB = 1 << 30
LOOPBACK_ONLY = {"addresses": ["127.0.1.1"]}
TWO_NICS = [{"name": "lo", "up": True, "ipv4": "127.0.0.1"},
            {"name": "eth0", "up": True, "ipv4": "10.0.0.11"},
            {"name": "eth1", "up": True, "ipv4": "192.168.5.11"}]
APP = {"gpu_uuid": "GPU-1-0", "pid": 4242, "name": "python3", "used_mib": 30000}
NET = ("system", "network")

PLANTED = [
    # (fault on node 1, check, path in its report, value, expected ids)
    ("hostname maps to 127.0.1.1", node_network.check_hostname_resolution, NET + ("resolved",), LOOPBACK_ONLY, ["PRE-E040"]),
    ("hostname does not resolve", node_network.check_hostname_resolution, NET + ("resolved",), {"error": "gaierror: [Errno -2] Name or service not known"}, ["PRE-E040"]),
    ("hostname resolves elsewhere", node_network.check_hostname_resolution, NET + ("resolved",), {"addresses": ["192.168.5.11"]}, ["PRE-W010"]),
    ("same hostname as node 0", node_network.check_distinct_identity, ("hostname",), "node-0", ["PRE-E041"]),
    ("same node IP as node 0", node_network.check_distinct_identity, ("node_ip",), "10.0.0.10", ["PRE-E042"]),
    ("node IP on no interface", node_network.check_interfaces, ("node_ip",), "10.9.9.9", ["PRE-E043"]),
    ("node IP on the Docker bridge", node_network.check_interfaces, ("node_ip",), "172.17.0.1", ["PRE-E044"]),
    ("NCCL_SOCKET_IFNAME names no interface", node_network.check_interfaces, NET + ("socket_env", "NCCL_SOCKET_IFNAME"), "ib0", ["PRE-E045"]),
    ("two NICs, no socket interface set", node_network.check_interfaces, NET + ("interfaces",), TWO_NICS, ["PRE-W011"]),
    ("tiny /dev/shm", node_system.check_shared_memory, ("system", "shm", "free_bytes"), 64 << 20, ["PRE-E048"]),
    ("unreadable /dev/shm", node_system.check_shared_memory, ("system", "shm"), {"path": "/dev/shm", "error": "No such file or directory"}, ["PRE-E048"]),
    ("/dev/shm below the object store", node_system.check_shared_memory, ("system", "shm", "free_bytes"), 2 * GIB, ["PRE-W012"]),
    ("ulimit -n 1024", node_system.check_open_files, ("system", "nofile", "soft"), 1024, ["PRE-E049"]),
    ("ulimit -n 20000", node_system.check_open_files, ("system", "nofile", "soft"), 20000, ["PRE-W013"]),
    ("cgroup limit 2 GiB", node_system.check_host_memory, ("system", "memory", "cgroup_limit"), 2 * GIB, ["PRE-E050"]),
    ("storage nearly full", node_system.check_storage_space, ("system", "storage", "free_bytes"), 100 << 20, ["PRE-E051"]),
    ("storage out of inodes", node_system.check_storage_space, ("system", "storage", "free_inodes"), 12, ["PRE-E052"]),
    ("a process on our GPU", node_system.check_gpu_processes, ("system", "compute_apps", "apps"), [APP], ["PRE-E054"]),
    ("another driver", node_system.check_same_versions, ("gpu_query", "gpus", 0, "driver"), "550.54.15", ["PRE-E055"]),
    ("another NCCL", node_system.check_same_versions, ("system", "versions", "nvidia-nccl-cu12"), "2.21.5", ["PRE-E056"]),
    ("RDMA devices, NCCL on sockets", node_network.check_rdma_unused, ("system", "rdma_devices"), ["mlx5_0", "mlx5_1"], ["PRE-W014"]),
    ("ephemeral ports from 1024", node_network.check_port_range, ("system", "port_range"), [1024, 65535], ["PRE-W015"]),
    ("an old ray", node_system.check_version_floors, ("packages", "ray"), {"version": "2.10.0", "origin": "x"}, ["PRE-E057"]),
]


@pytest.mark.parametrize("name,check,path,value,expected", PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_fault_is_named_on_its_node(tmp_path, name, check, path, value, expected):
    ctx = context(tmp_path)
    ctx.model_root = tmp_path / "model"
    ctx.model_root.mkdir()
    (ctx.model_root / ctx.profile.MODEL_WEIGHTS).write_bytes(b"\0" * 4096)
    for node in ctx.nodes:
        node["Resources"] = {"GPU": 2.0, "CPU": 64.0, "object_store_memory": 8 * GIB}
    assert check(ctx) == []  # healthy first
    change(ctx, 1, path, value)
    found = check(ctx)
    assert ids(found) == expected
    assert all(f.obj.startswith("node 1 (worker ") for f in found), [f.obj for f in found]


def test_gloo_socket_ifname_makes_the_hostname_irrelevant(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, NET + ("resolved",), LOOPBACK_ONLY)
    change(ctx, 1, NET + ("socket_env", "GLOO_SOCKET_IFNAME"), "eth0")
    assert node_network.check_hostname_resolution(ctx) == []


def test_nccl_prefix_and_exclusion_forms_are_understood(tmp_path):
    ctx = context(tmp_path)
    for value in ("eth", "=eth0", "^docker,lo"):
        change(ctx, 1, NET + ("socket_env", "NCCL_SOCKET_IFNAME"), value)
        assert node_network.check_interfaces(ctx) == [], value
    change(ctx, 1, NET + ("socket_env", "NCCL_SOCKET_IFNAME"), "=eth")  # exact: no eth
    assert ids(node_network.check_interfaces(ctx)) == ["PRE-E045"]


def test_the_memory_need_grows_with_the_model_and_offload():
    from twgrpo.run.profile import load_profile, with_overrides
    p = load_profile(None)
    weights = 3_554_214_752  # DeepSeek-R1-Distill-Qwen-1.5B's model.safetensors
    need = node_system.memory_need(p, weights)
    assert 20 * GIB < need < 40 * GIB
    lean = node_system.memory_need(with_overrides(p, OPTIMIZER_OFFLOAD="false", PARAM_OFFLOAD="false"), weights)
    assert lean < need


def test_verl_minimums_come_from_its_setup_py(tmp_path):
    (tmp_path / "setup.py").write_text('install_requires = [\n  "ray[default]>=2.41.0",\n'
                                       '  "torch==2.8.0",\n  "transformers>=4.51",\n  "numpy>=1.0"]\n')
    assert node_system.version_floors(tmp_path) == {"ray": "2.41.0", "transformers": "4.51"}
    (tmp_path / "setup.py").unlink()
    (tmp_path / "requirements.txt").write_text("ray[default]>=2.40\n# comment\n")
    assert node_system.version_floors(tmp_path) == {"ray": "2.40"}


def test_no_minimums_to_read_is_said(tmp_path):
    from twgrpo.run.findings import Skip
    ctx = context(tmp_path)
    (tmp_path / "setup.py").unlink()
    with pytest.raises(Skip, match="no setup.py or requirements.txt"):
        node_system.check_version_floors(ctx)


# ---------------------------------------------------------------- the node-side probes
def test_a_slow_resolver_is_cut_off(monkeypatch):
    monkeypatch.setattr(probe_system.socket, "getaddrinfo", lambda *a, **k: time.sleep(5) or [])
    started = time.monotonic()
    assert probe_system.resolve("node-1", seconds=0.3) == {"error": "no answer within 0.3 s"}
    assert time.monotonic() - started < 2


def test_loopback_resolves_to_loopback():
    assert "127.0.0.1" in probe_system.resolve("localhost")["addresses"]


def test_interfaces_come_from_the_kernel_of_this_network_namespace():
    found = {i["name"]: i for i in probe_system.interfaces()}
    assert found["lo"] == {"name": "lo", "up": True, "ipv4": "127.0.0.1"}
    assert probe_system.ipv4_of("no-such-if0") is None


def test_memory_reads_meminfo_and_the_cgroup_limit(tmp_path):
    proc, cgroup = tmp_path / "proc", tmp_path / "cg"
    proc.mkdir()
    cgroup.mkdir()
    (proc / "meminfo").write_text("MemTotal:  16000000 kB\nMemFree: 1 kB\nMemAvailable: 8000000 kB\n")
    (cgroup / "memory.max").write_text("4294967296\n")
    assert probe_system.memory(proc, cgroup) == {"MemTotal": 16384000000, "MemAvailable": 8192000000,
                                                 "cgroup_limit": 4294967296}
    (cgroup / "memory.max").write_text("max\n")
    assert probe_system.memory(proc, cgroup)["cgroup_limit"] is None


def stub_node(tmp_path, monkeypatch, apps=None):
    from dev import stubgpus
    table = tmp_path / "gpus.csv"
    stubgpus.gpus_csv(table, 2)
    if apps is not None:
        (tmp_path / "gpus.csv.apps").write_text(apps)
    stubs = os.path.join(os.path.dirname(__file__), "..", "..", "stubs")
    monkeypatch.setenv("PATH", f"{stubs}:{os.environ['PATH']}")
    monkeypatch.setenv("NVIDIA_SMI_STUB", str(table))


def test_compute_apps_through_the_nvidia_smi_stand_in(tmp_path, monkeypatch):
    stub_node(tmp_path, monkeypatch)
    assert probe_system.compute_apps() == {"apps": []}
    stub_node(tmp_path, monkeypatch, "gpu_uuid,pid,process_name,used_memory\nGPU-00000001-0000-4000-8000-000000000000,4242,python3,30000\n")
    assert probe_system.compute_apps() == {"apps": [
        {"gpu_uuid": "GPU-00000001-0000-4000-8000-000000000000", "pid": 4242, "name": "python3",
         "used_mib": 30000}]}


def test_the_whole_system_report_on_this_machine(tmp_path, monkeypatch):
    stub_node(tmp_path, monkeypatch)
    report = probe_system.system_report("127.0.0.1", str(tmp_path))
    assert report["storage"]["free_bytes"] > 0 and report["nofile"]["soft"] != 0
    assert any(i["name"] == "lo" for i in report["network"]["interfaces"])
    assert set(report["versions"]) == set(probe_system.VERSIONED) | {"torch-cuda"}
    assert report["seconds"] >= 0  # recorded for bench/preflight.py
    json.dumps(report)  # it travels back through Ray


# ---------------------------------------------------------------- reachability, on one host
def run_reach(tmp_path, ordinals, seconds=3.0, running=None, where=None):
    """Each node's reach in a thread on this host, with the driver's plan (reach.plan)."""
    results = {}
    targets = peers.plan(ordinals, "t")
    incoming = peers.expected_incoming(targets)

    def one(ordinal):
        spec = {"ordinal": ordinal, "targets": targets[ordinal], "expect_in": incoming[ordinal],
                "folder": str(tmp_path), "token": "t", "seconds": seconds}
        results[ordinal] = reach.reach_node(spec) if where is None else reach.reach_from(spec, where)
    threads = [threading.Thread(target=one, args=(o,)) for o in (running or ordinals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_listeners_reach_each_other(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "127.0.0.1")
    results = run_reach(tmp_path, [0, 1])
    assert results[0]["ok"] == 1 and results[1]["ok"] == 1
    assert results[0]["failed"] == {} and results[1]["failed"] == {}
    assert results[0]["incoming"] == 1 and results[1]["incoming"] == 1


def test_a_peer_that_never_publishes_is_named_within_the_bound(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "127.0.0.1")
    started = time.monotonic()
    results = run_reach(tmp_path, [0, 9], seconds=1.0, running=[0])  # node 9 never runs
    assert time.monotonic() - started < 5
    assert results[0]["failed"]["9"] == {"target": None, "ok": False,
                                         "error": "the peer never published its address"}


def test_a_published_port_nobody_listens_on_is_refused(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "127.0.0.1")
    (tmp_path / "node-1.json").write_text(json.dumps({"token": "t", "address": "127.0.0.1", "port": 1}))
    results = run_reach(tmp_path, [0, 1], seconds=1.0, running=[0])
    assert results[0]["failed"]["1"]["ok"] is False and results[0]["failed_count"] == 1
    assert "ConnectionRefusedError" in results[0]["failed"]["1"]["error"]


@pytest.mark.parametrize("nodes", [3, peers.ALL_PAIRS_UP_TO, peers.ALL_PAIRS_UP_TO + 1, 40, 2000])
def test_the_reach_plan_is_every_pair_for_a_few_nodes_and_linear_beyond(nodes):
    targets = peers.plan(list(range(nodes)), "token")
    pairs = sum(len(t) for t in targets.values())
    if nodes <= peers.ALL_PAIRS_UP_TO:
        assert pairs == nodes * (nodes - 1)
    else:
        assert pairs <= nodes * (2 + peers.RANDOM_PEERS)
        for ordinal, tried in targets.items():  # the ring both ways: each node tried by two
            assert ordinal not in tried and (ordinal + 1) % nodes in tried
        assert min(peers.expected_incoming(targets).values()) >= 2
    assert peers.plan(list(range(nodes)), "token") == targets


def test_twenty_nodes_on_this_host_reach_their_planned_peers(tmp_path):
    results = run_reach(tmp_path, list(range(20)), seconds=5.0,
                        where={"address": "127.0.0.1", "interface": ""})
    targets = peers.plan(list(range(20)), "t")
    incoming = peers.expected_incoming(targets)
    for ordinal, result in results.items():
        assert result["failed"] == {} and result["ok"] == len(targets[ordinal])
        assert result["incoming"] == incoming[ordinal]
    assert sum(1 for _ in tmp_path.glob("node-*.json")) == 20


def test_a_node_nobody_can_reach_is_named_by_its_ring_neighbours(tmp_path):
    """Node 7 publishes a port nobody listens on: the nodes planned to reach it name it."""
    ordinals = list(range(12))
    (tmp_path / "node-7.json").write_text(json.dumps({"token": "t", "address": "127.0.0.1", "port": 1}))
    results = run_reach(tmp_path, ordinals, seconds=2.0, running=[o for o in ordinals if o != 7],
                        where={"address": "127.0.0.1", "interface": ""})
    (tmp_path / "ctx").mkdir()
    found = reach.judge(context(tmp_path / "ctx", nodes=12), results)
    named = {f.obj for f in found}
    assert named and all(obj.startswith("node 7 ") for obj in named)
    assert len(found) == sum(7 in t for t in peers.plan(ordinals, "t").values())


def test_a_node_that_cannot_listen_on_its_nccl_address_is_named(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "10.255.255.1")  # not this host's
    cannot = run_reach(tmp_path, [1], seconds=1.0)[1]
    assert cannot["error"].startswith("cannot listen on 10.255.255.1:")
    ctx = context(tmp_path)
    found = reach.judge(ctx, {1: cannot})
    assert ids(found) == ["PRE-E047"]
    assert found[0].obj.startswith("node 1 (worker node-1")


def test_port_range_and_rdma_devices_are_read_from_their_files(tmp_path):
    (tmp_path / "range").write_text("32768\t60999\n")
    assert probe_system.port_range(tmp_path / "range") == [32768, 60999]
    assert probe_system.port_range(tmp_path / "absent") is None
    (tmp_path / "ib" / "mlx5_0").mkdir(parents=True)
    assert probe_system.rdma_devices(tmp_path / "ib") == ["mlx5_0"]
    assert probe_system.rdma_devices(tmp_path / "none") == []


def test_on_one_node_a_loopback_hostname_does_no_harm(tmp_path):
    from twgrpo.run.findings import Skip
    ctx = context(tmp_path, nodes=1)
    change(ctx, 0, NET + ("resolved",), {"addresses": ["127.0.0.1"]})
    with pytest.raises(Skip, match="one node"):
        node_network.check_hostname_resolution(ctx)
