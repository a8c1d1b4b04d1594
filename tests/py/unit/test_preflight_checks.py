"""Preflight's judgement of node reports, without a cluster: reports shaped as probe_node
writes them (the real probes run in test_multihost_cluster.py), one planted difference each;
and what a check with nothing to judge says."""
import copy
import json
import re
import sys

import pytest
from twgrpo.checks.preflight import preflight
from twgrpo.checks.nodeside import probe
from twgrpo.run.findings import Check, Skip, finding, run_checks
from twgrpo.run.profile import load_profile, with_overrides

ID = "ab" * 28


def node_id(ordinal):
    return f"{ordinal + 1:02x}" * 28


def report(ordinal, profile):
    return {
        "ordinal": ordinal, "expected_node_id": node_id(ordinal), "node_id": node_id(ordinal),
        "node_ip": f"10.0.0.{10 + ordinal}", "hostname": f"node-{ordinal}", "pid": 100,
        "sentinel_ok": True, "marker": "m",
        "gpu_query": {"gpus": [{"index": i, "name": profile.GPU_MODEL, "memory_mib": 81920,
                                "driver": "535.104.05", "bus_id": f"00000000:0{i}:00.0",
                                "uuid": f"GPU-{ordinal}-{i}"} for i in range(profile.GPUS_PER_NODE)]},
        "mount": {"target": "/mnt", "fstype": "nfs4", "options": "rw,relatime", "source": "srv:/v"},
        "env": {"NCCL_IB_DISABLE": "1"},
        "python": {"version": "3.12.3", "implementation": "CPython", "executable": "/usr/bin/python3"},
        "packages": {"torch": {"version": "2.8.0", "origin": "/usr/lib/python3/torch/__init__.py"}},
        "engine_importable": True,
        "system": system(ordinal),
        "gpu_health": gpu_health(profile),
        "limits": limits(ordinal),
        "inputs": {"findings": [], "evidence": {"verl_commit": "c" * 40, "verl_clean": True,
                                                "model_sums_sha256": "a" * 64,
                                                "data_sums_sha256": "d" * 64,
                                                "parquet_rows": {"train": 7473, "test": 1319}}},
    }


def system(ordinal):
    """A healthy node's operating system, as probe_system.system_report answers."""
    ip = f"10.0.0.{10 + ordinal}"
    return {
        "network": {"hostname": f"node-{ordinal}", "node_ip": ip,
                    "resolved": {"addresses": [ip]},
                    "interfaces": [{"name": "lo", "up": True, "ipv4": "127.0.0.1"},
                                   {"name": "eth0", "up": True, "ipv4": ip},
                                   {"name": "docker0", "up": True, "ipv4": "172.17.0.1"}],
                    "socket_env": {"NCCL_SOCKET_IFNAME": None, "GLOO_SOCKET_IFNAME": None}},
        "shm": {"path": "/dev/shm", "total_bytes": 64 << 30, "free_bytes": 64 << 30,
                "free_inodes": 10 ** 6, "total_inodes": 10 ** 6},
        "storage": {"path": "/mnt", "total_bytes": 1 << 42, "free_bytes": 1 << 41,
                    "free_inodes": 10 ** 8, "total_inodes": 10 ** 8},
        "nofile": {"soft": 1048576, "hard": 1048576}, "cpus": 64,
        "memory": {"MemTotal": 1 << 40, "MemAvailable": 1 << 39, "cgroup_limit": None},
        "compute_apps": {"apps": []},
        "versions": {"vllm": None, "flash_attn": "2.8.3", "nvidia-nccl-cu12": "2.27.3",
                     "nvidia-cuda-runtime-cu12": "12.8.90", "torch-cuda": "12.8"},
        "port_range": [32768, 60999], "rdma_devices": [],
    }


def gpu_health(profile):
    """Healthy GPUs as gpu_health_probe.health_report answers (the real tool's A100 values)."""
    from dev.stubgpus import HEALTHY
    return {"query": {"gpus": [{"index": str(i), "uuid": f"GPU-{i}", "bus_id": f"00000000:0{i}:00.0",
                                **HEALTHY} for i in range(profile.GPUS_PER_NODE)], "dropped": []},
            "nvlink": {"gpus": {}}, "kernel": {"readable": True, "xids": []}}


def limits(ordinal):
    """A healthy node's limits, as limits_probe.limits_report answers."""
    ip = f"10.0.0.{10 + ordinal}"
    return {"nproc": {"soft": None, "hard": None}, "memlock": {"soft": None, "hard": None},
            "pids": {"path": "/sys/fs/cgroup", "max": None, "current": 300},
            "ray_dirs": {"session": {"path": "/tmp/ray/session_1", "total_bytes": 100 << 30,
                                     "free_bytes": 80 << 30, "free_inodes": 10 ** 6, "total_inodes": 10 ** 6}},
            "families": ["ipv4"], "rdma_ports": [], "uid": 0,
            "interfaces": [{"name": "lo", "up": True, "ipv4": "127.0.0.1", "mtu": 65536},
                           {"name": "eth0", "up": True, "ipv4": ip, "mtu": 9000}]}


def context(tmp_path, nodes=2, answered=None):
    profile = with_overrides(load_profile(), NODES=nodes)
    ctx = preflight.PreflightContext(profile, "exp-001", tmp_path, tmp_path, tmp_path, tmp_path,
                                     tmp_path, 5.0)
    ctx.ray = object()  # connected: these checks only read the reports
    ctx.driver_node_id = node_id(0)
    ctx.nodes = [{"NodeID": node_id(i), "NodeManagerHostname": f"node-{i}",
                  "NodeManagerAddress": f"10.0.0.{10 + i}",
                  "Resources": {"GPU": float(profile.GPUS_PER_NODE)}} for i in range(nodes)]
    ctx.token = "exp-001 token\n"
    (tmp_path / "setup.py").write_text('install_requires = ["ray[default]>=2.41.0", "torch"]\n')
    (tmp_path / "preflight-nodes").mkdir()
    for i in range(nodes if answered is None else answered):
        ctx.reports[i] = report(i, profile)
        (tmp_path / "preflight-nodes" / f"node-{i}.json").write_text(
            json.dumps({"node_id": node_id(i), "token": ctx.token}))
    return ctx


def ids(found):
    return sorted(f.id for f in found)


def test_healthy_reports_pass_every_node_check(tmp_path):
    ctx = context(tmp_path)
    checks = [c for c in preflight.CHECKS if preflight.PROBED == c.needs]
    results = run_checks("preflight", [Check("node-probes", lambda c: []), *checks], ctx)
    # The tutorial's socket profile has no IB and no NCCL interface variable to judge.
    assert [(r.name, r.findings, r.skipped) for r in results if r.findings or r.skipped] == [
        ("nccl-passthrough", [], "the profile sets no NCCL interface variable"),
        ("infiniband", [], "NCCL_TRANSPORT=socket: IB is off"),
        ("locked-memory", [], "NCCL_TRANSPORT=socket: nothing registers memory for RDMA"),
        ("roce-gids", [], "NCCL_TRANSPORT=socket: NCCL uses no RDMA port")]


def change(ctx, ordinal, path, value):
    target = ctx.reports[ordinal]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


PLANTED = [
    # (what differs on node 1, check, path in its report, value, expected ids)
    ("probe ran elsewhere", preflight.received, None, None, ["PRE-E016"]),
    ("nvidia-smi failed", preflight.check_gpus, ("gpu_query",), {"error": "nvidia-smi exited 9"}, ["PRE-E019"]),
    ("overlay storage", preflight.check_storage_mount, ("mount", "fstype"), "overlay", ["PRE-E023"]),
    ("read-only storage", preflight.check_storage_mount, ("mount", "options"), "ro,relatime", ["PRE-E023"]),
    ("no rollout engine", preflight.check_rollout_engine, ("engine_importable",), False, ["PRE-E025"]),
    ("another Python", preflight.check_same_packages, ("python", "version"), "3.11.9", ["PRE-E027"]),
    ("a package elsewhere", preflight.check_same_packages, ("packages", "torch", "origin"), "/opt/torch/__init__.py", ["PRE-W001"]),
    ("another package version", preflight.check_same_packages, ("packages", "torch", "version"), "2.7.1", ["PRE-E026"]),
    ("other inputs", preflight.check_same_inputs, ("inputs", "evidence", "data_sums_sha256"), "e" * 64, ["PRE-E028"]),
    ("IB not disabled", preflight.check_nccl_env, ("env", "NCCL_IB_DISABLE"), None, ["PRE-E024"]),
    ("old driver", preflight.check_driver_version, ("gpu_query", "gpus", 0, "driver"), "470.1", ["PRE-E022"]),
]


@pytest.mark.parametrize("name,check,path,value,expected", PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_difference_is_named_on_its_node(tmp_path, name, check, path, value, expected):
    ctx = context(tmp_path)
    if check is preflight.received:
        other = copy.deepcopy(ctx.reports[1])
        other["node_id"] = ID
        found = preflight.received(ctx, 1, other)
    else:
        change(ctx, 1, path, value)
        found = check(ctx)
    assert ids(found) == expected
    assert all(f.obj.startswith("node 1 (worker node-1") for f in found)


def test_a_node_id_ray_could_not_pin_gets_no_probe(tmp_path):
    ray = pytest.importorskip("ray")  # imported, never initialized: no probe is sent
    ctx = context(tmp_path, answered=0)
    ctx.ray = ray
    ctx.nodes[0]["NodeID"] = "0" * 56
    ctx.nodes[1]["NodeID"] = "not-hex"
    found = preflight.check_node_probes(ctx)
    assert ids(found) == ["PRE-E014", "PRE-E014"]
    assert ctx.reports == {}


def test_nvidia_smi_missing_on_a_node_is_reported_by_the_probe(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    assert probe.query_gpus() == {"error": "nvidia-smi is not on PATH"}


def test_without_ray_every_cluster_check_says_skipped_not_ok(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    ctx = context(tmp_path, answered=0)
    ctx.ray = None
    results = {r.name: r for r in run_checks("preflight", preflight.CHECKS, ctx)}
    assert ids(results["ray-connection"].findings) == ["PRE-E010"]
    judged = [name for name, r in results.items() if not r.skipped]
    assert judged == ["batch-sizes", "rollout-lengths", "extra-overrides",
                      "nccl-values", "ray-connection"]
    out = capsys.readouterr().out
    assert re.search(r"node-count \.+ skipped \(not connected to a Ray cluster\)", out)
    assert re.search(r"gpus \.+ skipped \(needs node-probes, which was skipped\)", out)
    assert " ok\n" not in out.split("ray-connection")[1]


def test_when_no_probe_answers_the_node_checks_say_skipped(tmp_path):
    ctx = context(tmp_path, answered=0)
    checks = [c for c in preflight.CHECKS if c.needs == preflight.PROBED]
    results = run_checks("preflight", [Check("node-probes", lambda c: []), *checks], ctx)
    assert {r.name: r.skipped for r in results if r.name != "node-probes"} == {
        c.name: "no node probe answered" for c in checks}


def test_one_node_has_nothing_to_compare_and_says_so(tmp_path):
    ctx = context(tmp_path, nodes=1)
    for check in (preflight.check_same_inputs, preflight.check_same_packages):
        with pytest.raises(Skip, match="1 node answered: nothing to compare"):
            check(ctx)


def test_no_node_could_read_its_mounts(tmp_path):
    ctx = context(tmp_path)
    for ordinal in ctx.reports:
        change(ctx, ordinal, ("mount",), None)
    with pytest.raises(Skip, match="mountinfo"):
        preflight.check_storage_mount(ctx)


def test_a_crashed_check_is_a_finding_and_its_dependents_are_skipped(capsys):
    def crash(ctx):
        raise KeyError("boom")
    checks = [Check("first", crash), Check("second", lambda ctx: [], needs=("first",)),
              Check("third", lambda ctx: [finding("PRE-E012", "x", "y")])]
    results = run_checks("t", checks, None)
    assert ids(results[0].findings) == ["GEN-E001"]
    assert results[1].skipped == "needs first, which was stopped by a crash"
    assert ids(results[2].findings) == ["PRE-E012"]  # a crash hides no other check


def test_a_check_declared_before_what_it_needs_is_refused():
    checks = [Check("second", lambda ctx: [], needs=("first",)), Check("first", lambda ctx: [])]
    with pytest.raises(ValueError, match="second needs first, which does not come before it"):
        run_checks("t", checks, None)


@pytest.mark.parametrize("module", ["inputs", "preflight", "postflight"])
def test_every_phase_declares_its_checks_in_order(module):
    import importlib
    checks = importlib.import_module(f"twgrpo.checks.{module}.{module}").CHECKS
    from twgrpo.run.findings import order_problems
    assert order_problems(checks) == []


def test_a_run_folder_the_disk_refuses_is_one_line_that_names_the_cause(tmp_path, capsys):
    from twgrpo.cli import main
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = main(["preflight", "--profile", "smoke-1x1", "--storage-root", str(tmp_path),
                 "--output-dir", str(blocker / "run-1")])
    err = capsys.readouterr().err
    assert code == 1
    assert "(GEN-E003)" in err and "a-file" in err and "Traceback" not in err
