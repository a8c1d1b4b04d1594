"""Every-GPU health, node limits, the node-local collective, storage trial, Ray ports and clocks,
judged from reports shaped as their probes answer (test_preflight_checks.report), one planted
fault each; the node-side parsers on the real tools' formats (nvidia-smi's CSV and `nvlink -s`,
the kernel log's records, sysfs's GID tables, /proc/self/cgroup). The same faults on real hosts:
test_multihost_gpus_and_shape.py."""
import os

import pytest
from test_preflight_checks import change, context, ids
from twgrpo.checks.preflight import gpu_health, node_limits
from twgrpo.checks.nodeside import gpu_health_probe, limits_probe
from twgrpo.checks.rounds import job_shape, node_agents, node_collective, storage_trial
from twgrpo.run.profile import with_overrides

GPU1 = ("gpu_health", "query", "gpus", 1)
LIMITS = ("limits",)
ROCE = {"device": "mlx5_0", "port": "1", "state": "ACTIVE", "link_layer": "Ethernet",
        "link_downed": 0, "gids": {"0": {"type": "IB/RoCE v1", "ipv4": False},
                                   "1": {"type": "RoCE v2", "ipv4": False},
                                   "2": {"type": "IB/RoCE v1", "ipv4": True},
                                   "3": {"type": "RoCE v2", "ipv4": True}}}
XID = {"seconds": 812.5, "pci": "0000:01:00", "xid": 79, "text": "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."}

PLANTED = [
    # (fault on node 1, check, path in its report, value, expected ids)
    ("FM44 ECC", gpu_health.check_gpu_health, GPU1 + ("ecc.errors.uncorrected.volatile.total",), "3", ["PRE-E201"]),
    ("FM44 retired pages", gpu_health.check_gpu_health, GPU1 + ("retired_pages.pending",), "Yes", ["PRE-E202"]),
    ("FM44 remap failure", gpu_health.check_gpu_health, GPU1 + ("remapped_rows.failure",), "Yes", ["PRE-E202"]),
    ("FM45 MIG", gpu_health.check_gpu_health, GPU1 + ("mig.mode.current",), "Enabled", ["PRE-E204"]),
    ("FM46 prohibited", gpu_health.check_gpu_health, GPU1 + ("compute_mode",), "Prohibited", ["PRE-E205"]),
    ("FM57 power brake", gpu_health.check_gpu_health, GPU1 + ("clocks_event_reasons.hw_power_brake_slowdown",), "Active", ["PRE-W101"]),
    ("FM43 fabric not started", gpu_health.check_gpu_health, GPU1 + ("fabric.state",), "Not Started", ["PRE-E208"]),
    ("health unreadable", gpu_health.check_gpu_health, ("gpu_health", "query"), {"error": "nvidia-smi did not answer within 30 s"}, ["PRE-W100"]),
    ("health row cut", gpu_health.check_gpu_health, ("gpu_health", "query", "gpus"), [{"index": "0", "unparsed": "0, GPU-0"}], ["PRE-W100"]),
    ("FM44 Xid 79", gpu_health.check_xid_errors, ("gpu_health", "kernel", "xids"), [XID], ["PRE-E203"]),
    ("FM42 link down", gpu_health.check_nvlink, ("gpu_health", "nvlink", "gpus"),
     {"0": {"uuid": "GPU-0", "links": {"0": "26.562 GB/s", "1": "26.562 GB/s"}},
      "1": {"uuid": "GPU-1", "links": {"0": "26.562 GB/s", "1": "<inactive>"}}}, ["PRE-E207"]),
    ("FM47 ulimit -u", node_limits.check_process_limits, LIMITS + ("nproc", "soft"), 1024, ["PRE-W105"]),
    ("FM47 pids.max", node_limits.check_process_limits, LIMITS + ("pids", "max"), 512, ["PRE-E221"]),
    ("FM48 Ray session full", node_limits.check_ray_space, LIMITS + ("ray_dirs", "session", "free_bytes"), 4 << 30, ["PRE-E223"]),
    ("FM53 IPv6 first", node_limits.check_address_families, LIMITS + ("families",), ["ipv6", "ipv4"], ["PRE-E224"]),
    ("FM54 MTU", node_limits.check_mtu, LIMITS + ("interfaces", 1, "mtu"), 1500, ["PRE-E225"]),
]


@pytest.mark.parametrize("name,check,path,value,expected", PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_fault_is_named_on_its_node(tmp_path, name, check, path, value, expected):
    ctx = context(tmp_path)
    assert check(ctx) == []  # healthy first
    change(ctx, 1, path, value)
    found = check(ctx)
    assert ids(found) == expected
    assert all(f.obj.startswith("node 1 (worker ") for f in found), [f.obj for f in found]


def test_fm43_a_fabric_registration_that_completed_with_a_failure(tmp_path):
    ctx = context(tmp_path)
    for ordinal in ctx.reports:  # an H100 HGX node: every GPU registered with the fabric
        for row in ctx.reports[ordinal]["gpu_health"]["query"]["gpus"]:
            row.update({"fabric.state": "Completed", "fabric.status": "Success"})
    assert gpu_health.check_gpu_health(ctx) == []
    change(ctx, 1, GPU1 + ("fabric.status",), "Failure")
    [found] = gpu_health.check_gpu_health(ctx)
    assert found.id == "PRE-E208" and "fabric.state Completed, fabric.status Failure" in found.message


def test_a_node_of_one_gpu_needs_no_fabric(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, GPU1 + ("fabric.state",), "Not Started")
    assert ids(gpu_health.check_gpu_health(ctx)) == ["PRE-E208"]
    del ctx.reports[1]["gpu_health"]["query"]["gpus"][0]  # a VM given one GPU of an HGX board
    assert gpu_health.check_gpu_health(ctx) == []


def test_the_xid_names_its_gpu_by_bus_and_application_xids_are_left_alone(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, ("gpu_health", "kernel", "xids"), [XID, {**XID, "xid": 13}, {**XID, "xid": 43}])
    [found] = gpu_health.check_xid_errors(ctx)
    assert "1 hardware Xid error(s) in the kernel log: Xid 79 (GPU has fallen off the bus) on GPU 1 " \
           "(0000:01:00) at 812 s after boot" in found.message


def test_fm47_a_low_ulimit_u_binds_a_worker_that_is_not_root(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, LIMITS + ("uid",), 1000)
    change(ctx, 1, LIMITS + ("nproc", "soft"), 1024)
    [found] = node_limits.check_process_limits(ctx)
    assert found.id == "PRE-E220" and "runs as root" not in found.message
    assert "ulimit -u (processes and threads) in the Ray worker is 1024, less than 4096 " \
           "(2048 + 1024 x 2 GPUs)" in found.message


def test_the_mtu_is_read_on_the_interface_nccl_socket_ifname_picks(tmp_path):
    ctx = context(tmp_path)
    for ordinal in ctx.reports:  # a second NIC, eth1, where NCCL is told to go
        ctx.reports[ordinal]["limits"]["interfaces"].append(
            {"name": "eth1", "up": True, "ipv4": f"192.168.0.{ordinal}", "mtu": 9000})
        change(ctx, ordinal, ("env", "NCCL_SOCKET_IFNAME"), "eth1")
    change(ctx, 1, LIMITS + ("interfaces", 1, "mtu"), 1500)  # eth0 differs: NCCL does not use it
    assert node_limits.check_mtu(ctx) == []
    change(ctx, 1, LIMITS + ("interfaces", 2, "mtu"), 1500)
    [found] = node_limits.check_mtu(ctx)
    assert "interface eth1 has MTU 1500, the other nodes' 9000" in found.message


def test_gloo_socket_ifname_settles_the_address_family(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, LIMITS + ("families",), ["ipv6"])
    change(ctx, 1, ("system", "network", "socket_env", "GLOO_SOCKET_IFNAME"), "eth0")
    assert node_limits.check_address_families(ctx) == []


def ib(ctx, **values):
    ctx.profile = with_overrides(ctx.profile, NCCL_TRANSPORT="ib", **values)
    for ordinal in ctx.reports:
        change(ctx, ordinal, LIMITS + ("rdma_ports",), [dict(ROCE, gids=dict(ROCE["gids"]))])
        change(ctx, ordinal, LIMITS + ("memlock",), {"soft": None, "hard": None})


def test_fm55_locked_memory_counts_on_ib_profiles_only(tmp_path):
    ctx = context(tmp_path)
    change(ctx, 1, LIMITS + ("memlock",), {"soft": 65536, "hard": 65536})
    with pytest.raises(Exception, match="nothing registers memory"):
        node_limits.check_locked_memory(ctx)
    ib(ctx)
    change(ctx, 1, LIMITS + ("memlock",), {"soft": 65536, "hard": 65536})
    assert ids(node_limits.check_locked_memory(ctx)) == ["PRE-E222"]


def test_fm26_fm56_a_gid_index_that_holds_no_roce_v2_gid_on_one_node(tmp_path):
    ctx = context(tmp_path)
    ib(ctx, NCCL_IB_GID_INDEX="3")
    assert node_limits.check_roce_gids(ctx) == []
    gids = ctx.reports[1]["limits"]["rdma_ports"][0]["gids"]
    gids["5"] = gids.pop("3")  # this pod's table has the RoCE v2 IPv4 GID at 5 (NVIDIA/nccl #718)
    [found] = node_limits.check_roce_gids(ctx)
    assert found.id == "PRE-E226" and found.obj.startswith("node 1 ")
    assert "mlx5_0 port 1 has no GID at NCCL_IB_GID_INDEX=3; its RoCE v2 IPv4 GID is at index 5" in found.message
    ctx.profile = with_overrides(ctx.profile, NCCL_IB_GID_INDEX="")  # NCCL picks per node
    assert node_limits.check_roce_gids(ctx) == []
    change(ctx, 1, LIMITS + ("rdma_ports", 0, "link_downed"), 4)
    assert ids(node_limits.check_roce_gids(ctx)) == ["PRE-W103"]


# ---------------------------------------------------------------- the node-side parsers
def test_the_health_query_drops_fields_an_old_driver_refuses(tmp_path, monkeypatch):
    from dev import stubgpus
    table = tmp_path / "gpus.csv"
    stubgpus.gpus_csv(table, 2, health={1: {"mig.mode.current": "Enabled"}})
    # An R470 driver: no fabric fields, clock reasons under their old name.
    text = table.read_text().replace("clocks_event_reasons", "clocks_throttle_reasons")
    lines = [",".join(v for v, h in zip(line.split(","), text.splitlines()[0].split(","))
                      if not h.startswith("fabric")) for line in text.splitlines()]
    table.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PATH", f"{os.path.dirname(__file__)}/../../stubs:{os.environ['PATH']}")
    monkeypatch.setenv("NVIDIA_SMI_STUB", str(table))
    answer = gpu_health_probe.query_health()
    assert answer["dropped"] == ["fabric.state", "fabric.status"]
    assert [g["mig.mode.current"] for g in answer["gpus"]] == ["Disabled", "Enabled"]
    assert answer["gpus"][0]["clocks_event_reasons.hw_slowdown"] == "Not Active"  # old name read


def test_nvlink_status_as_the_real_tool_prints_it():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4a2b)\n\t Link 0: 26.562 GB/s\n"
            "\t Link 1: <inactive>\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77c1)\n")
    assert gpu_health_probe.parse_nvlink(text) == {
        "0": {"uuid": "GPU-4a2b", "links": {"0": "26.562 GB/s", "1": "<inactive>"}},
        "1": {"uuid": "GPU-77c1", "links": {}}}


def test_kernel_log_records_give_xids_and_nothing_else():
    record = "3,1822,812500000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=2291, GPU has fallen off the bus."
    assert gpu_health_probe.parse_kmsg_record(record) == {
        "seconds": 812.5, "pci": "0000:3b:00", "xid": 79, "text": record.split(";", 1)[1]}
    assert gpu_health_probe.parse_kmsg_record("6,1823,812600000,-;eth0: link up") is None


def test_an_unreadable_kernel_log_is_said(tmp_path):
    answer = gpu_health_probe.recent_xids(tmp_path / "kmsg")
    assert answer["readable"] is False and "No such file" in answer["why"]


def test_pids_max_of_a_v1_pids_hierarchy_and_of_cgroup_v2(tmp_path):
    (tmp_path / "pids" / "job").mkdir(parents=True)
    (tmp_path / "pids" / "job" / "pids.max").write_text("3000\n")
    (tmp_path / "pids" / "job" / "pids.current").write_text("212\n")
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("9:name=systemd:/\n8:pids:/job\n0::/\n")
    assert limits_probe.pids_limit(cgroup, tmp_path) == {"path": str(tmp_path / "pids" / "job"),
                                                         "max": 3000, "current": 212}
    (tmp_path / "pids.max").write_text("max\n")
    cgroup.write_text("0::/\n")
    assert limits_probe.pids_limit(cgroup, tmp_path)["max"] is None  # no limit


def test_gid_tables_and_link_downed_from_sysfs(tmp_path):
    port = tmp_path / "mlx5_0" / "ports" / "1"
    for folder in ("gids", "gid_attrs/types", "counters"):
        (port / folder).mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("Ethernet\n")
    (port / "counters" / "link_downed").write_text("2\n")
    (port / "gids" / "0").write_text("fe80:0000:0000:0000:0000:0000:0000:0001\n")
    (port / "gid_attrs" / "types" / "0").write_text("IB/RoCE v1\n")
    (port / "gids" / "1").write_text(limits_probe.ZERO_GID + "\n")  # an empty slot
    (port / "gids" / "3").write_text("0000:0000:0000:0000:0000:ffff:0a00:000b\n")  # 10.0.0.11
    (port / "gid_attrs" / "types" / "3").write_text("RoCE v2\n")
    [found] = limits_probe.rdma_ports(tmp_path)
    assert found == {"device": "mlx5_0", "port": "1", "state": "ACTIVE", "link_layer": "Ethernet",
                     "link_downed": 2, "gids": {"0": {"type": "IB/RoCE v1", "ipv4": False},
                                                "3": {"type": "RoCE v2", "ipv4": True}}}


def test_a_big_nodes_answers_stay_small_in_preflight_json():
    """An 8-GPU NVLink node with 8 RoCE HCAs: what preflight.json keeps per node stays well
    under the per-node share of the run's record budget (budget.RECORD_PER_NODE)."""
    import json
    from dev.stubgpus import HEALTHY
    from twgrpo.run.budget import RECORD_PER_NODE as PER_NODE_LIMIT
    links = "".join(f"\t Link {k}: 26.562 GB/s\n" for k in range(18))
    nvlink = "".join(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g:08d})\n{links}" for g in range(8))
    health = {"query": {"gpus": [{"index": str(g), "uuid": f"GPU-{g:08d}-0000-4000-8000-000000000000",
                                  "bus_id": "00000000:18:00.0", **HEALTHY} for g in range(8)]},
              "nvlink": {"gpus": gpu_health_probe.parse_nvlink(nvlink)},
              "kernel": {"readable": True, "xids": [XID] * gpu_health_probe.XID_KEEP}}
    ports = [dict(ROCE, device=f"mlx5_{d}", gids={str(i): {"type": "RoCE v2", "ipv4": True}
                                                  for i in range(limits_probe.MAX_GIDS)}) for d in range(8)]
    limits = {**limits_probe.limits_report(), "rdma_ports": ports}
    assert len(json.dumps({"gpu_health": health, "limits": limits})) < PER_NODE_LIMIT // 2


def test_this_hosts_limits_are_read():
    report = limits_probe.limits_report()
    assert report["families"] and "lo" in {i["name"] for i in report["interfaces"]}
    assert next(i for i in report["interfaces"] if i["name"] == "lo")["mtu"] > 0


# ---------------------------------------------------------------- judged from results
def test_a_node_local_rank_that_failed_or_summed_wrong(tmp_path):
    good = {"stage": "done", "small_sum": 2.0, "gloo_sum": 2.0, "big_ok": True}
    found = node_collective.judge_node("node 1", {0: {"stage": "initialised", "error": "DistBackendError: NCCL error"},
                                                  1: dict(good, small_sum=1.0)}, tmp_path, 12)
    assert [(f.id, f.obj) for f in found] == [("PRE-E210", "node 1 local rank 0 of 2"),
                                              ("PRE-E212", "node 1 local rank 1 of 2")]
    assert "failed after stage initialised: DistBackendError" in found[0].message


def test_fm57_a_node_far_below_the_others_is_named_degraded(tmp_path):
    ctx = context(tmp_path, nodes=3)
    nodes = [{"ordinal": 0, "bus_gbps": 180.0}, {"ordinal": 1, "bus_gbps": 40.0},
             {"ordinal": 2, "bus_gbps": 175.0}]
    [found] = node_collective.judge_degraded(ctx, nodes)
    assert (found.id, found.obj) == ("PRE-W102", "node 1 (worker node-1 10.0.0.11)")
    assert node_collective.judge_degraded(ctx, nodes[:1]) == []


def test_fm50_a_volume_too_slow_for_the_checkpoint_and_fm51_a_rename_not_seen(tmp_path):
    ctx = context(tmp_path)
    ctx.model_root = tmp_path / "model"
    ctx.model_root.mkdir()
    with open(ctx.model_root / ctx.profile.MODEL_WEIGHTS, "wb") as stream:
        stream.truncate(16 << 30)  # a 16 GB checkpoint body: 112 GB to save
    ctx.storage_record = {}
    fast = {"bytes": 64 << 20, "write_seconds": 0.1, "unseen": {}}
    assert storage_trial.judge(ctx, {0: fast, 1: dict(fast)}) == []
    slow = dict(fast, write_seconds=1.0)  # 67 MB/s: 56 GB take 836 s
    found = storage_trial.judge(ctx, {0: fast, 1: dict(slow, unseen={"0": "No such file or directory"})})
    assert [(f.id, f.obj[:6]) for f in found] == [("PRE-E231", "node 1"), ("PRE-E230", "node 1")]
    assert "longer than verl's 600 s NCCL timeout" in found[1].message
    assert ids(storage_trial.judge(ctx, {0: fast, 1: {"error": "OSError: [Errno 5] EIO"}})) == ["PRE-E232"]
    # a run that gives verl's collectives more time (EXTRA_OVERRIDES) is judged against it
    ctx.profile = with_overrides(ctx.profile, EXTRA_OVERRIDES="actor_rollout_ref.nccl_timeout=1800")
    assert storage_trial.nccl_timeout(ctx.profile) == 1800.0
    assert storage_trial.judge(ctx, {0: fast, 1: dict(slow)}) == []


def test_the_storage_trial_writes_renames_and_sees_its_peer(tmp_path):
    spec = {"folder": str(tmp_path), "token": "t", "bytes": 1 << 20, "seconds": 5, "targets": [1]}
    (tmp_path / "node-1.bin").write_bytes(storage_trial._header("t", 1))
    report = storage_trial.storage_trial(dict(spec, ordinal=0))
    assert (report["bytes"], report["seen"], report["unseen"], report["unseen_count"]) == (1 << 20, 1, {}, 0)
    spec["seconds"] = 0.5
    (tmp_path / "node-1.bin").unlink()
    assert storage_trial.storage_trial(dict(spec, ordinal=0))["unseen"] == {"1": "No such file or directory"}


def test_the_storage_trial_never_takes_more_than_a_quarter_of_the_free_space():
    wanted = storage_trial.TRIAL_BYTES
    assert storage_trial.trial_bytes(wanted, 1 << 40, 8) == wanted  # a roomy volume: the full trial
    assert storage_trial.trial_bytes(wanted, 16 << 20, 1) == 4 << 20  # a nearly full one: a quarter
    assert storage_trial.trial_bytes(wanted, 16 << 20, 2) == 2 << 20  # shared by the nodes
    assert storage_trial.trial_bytes(wanted, 0, 2) == storage_trial.HEADER


def test_a_fifo_or_link_planted_in_the_trial_folder_cannot_block_or_redirect(tmp_path):
    spec = {"folder": str(tmp_path), "token": "t", "bytes": 1 << 20, "seconds": 0.5, "targets": [1]}
    os.mkfifo(tmp_path / "node-1.bin")  # another writer of the volume
    report = storage_trial.storage_trial(dict(spec, ordinal=0))
    assert report["unseen"] == {"1": "another header"}
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ".node-2.tmp").symlink_to(victim)
    report = storage_trial.storage_trial(dict(spec, ordinal=2))
    assert "File exists" in report["error"] and victim.read_text() == "keep"


def test_fm52_blocked_ray_ports_are_named(tmp_path):
    ctx = context(tmp_path)
    ctx.nodes[1].update(NodeManagerPort=1, ObjectManagerPort=2)  # nothing listens there
    targets = node_agents.targets_of(ctx, 0, [1])
    assert [t[2] for t in targets] == ["node manager of node 1", "object manager of node 1"]
    failed = node_agents.NodeAgent().connect([("127.0.0.1", 1, "node manager of node 1")])
    assert failed[0]["label"] == "node manager of node 1" and "Connection refused" in failed[0]["error"]
    found = node_agents.judge_ports(ctx, {0: failed, 1: []})
    assert [(f.id, f.obj) for f in found] == [("PRE-E227", "node 0 (head node-0 10.0.0.10)")]
    assert "cannot connect to 1 of the other nodes' Ray ports: node manager of node 1 at 127.0.0.1:1" in found[0].message


def test_fm49_what_each_node_lacks_for_verls_groups(tmp_path):
    ctx = context(tmp_path)
    assert job_shape.bundles(ctx.profile) == [[{"CPU": 1.0, "GPU": 1.0}] * 2] * 2
    for node in ctx.nodes:
        node["Resources"] = {"GPU": 2.0, "CPU": 8.0}
    free = {ctx.nodes[0]["NodeID"]: {"CPU": 8.0, "GPU": 2.0}, ctx.nodes[1]["NodeID"]: {"CPU": 1.0, "GPU": 2.0}}
    assert job_shape.missing(ctx, free) == ("node 1 (worker node-1 10.0.0.11) has 1 of 8 CPUs free, "
                                            "its group needs 2 while its 2 GPUs are free")
    free[ctx.nodes[1]["NodeID"]]["CPU"] = 2.0
    free[ctx.nodes[0]["NodeID"]]["CPU"] = 2.0
    assert job_shape.missing(ctx, free) == "no CPU is left for the TaskRunner beside the groups (0 spare)"
