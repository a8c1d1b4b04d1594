"""NCCL over InfiniBand and a CPU-only Ray head, without a cluster: the environment an IB profile
exports, preflight's judgement of node reports (IB devices, NCCL variables, GPU and CPU nodes),
and postflight of a synthesized 4 x 8 IB run in NCCL's real line formats (src/transport/net_ib
init.cc "NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB eth0:<ip><0>", src/init.cc "Using network IB").
The same layout on a real multi-host Ray cluster is in test_multihost_cluster.py."""
import json
from pathlib import Path

import pytest
import synthrun
from test_preflight_checks import context, report
from twgrpo.checks.preflight import network, preflight
from twgrpo.cli import main
from twgrpo.formats.trainlines import LogScan, _parse_line
from twgrpo.run import command
from twgrpo.run.findings import Check, run_checks
from twgrpo.run.profile import load_profile, with_overrides
from verification import failed_ids

ROOT = Path("/mnt/verl-reproduction")
IB = dict(NCCL_TRANSPORT="ib", NCCL_IB_HCA="mlx5", NCCL_SOCKET_IFNAME="eth0")


def ib_profile(**values):
    return with_overrides(load_profile(None), **{**IB, **values})


def test_an_ib_profile_leaves_ib_on_and_passes_its_interface_choices_to_every_node():
    p = ib_profile(NCCL_IB_GID_INDEX=3)
    env = command.runtime_env(p, ROOT)["env_vars"]
    assert (env["NCCL_IB_DISABLE"], env["NCCL_IB_HCA"], env["NCCL_SOCKET_IFNAME"],
            env["NCCL_IB_GID_INDEX"]) == ("0", "mlx5", "eth0", "3")
    argv = command.training_command(p, ROOT, "exp-001")
    worker = "+ray_kwargs.ray_init.runtime_env.env_vars"
    for word in ("NCCL_IB_DISABLE='0'", "NCCL_IB_HCA='mlx5'", "NCCL_SOCKET_IFNAME='eth0'",
                 "NCCL_IB_GID_INDEX='3'"):
        assert f"{worker}.{word}" in argv
    # The tutorial's socket profile: IB forced off, no interface variable at all.
    tutorial = command.runtime_env(load_profile(None), ROOT)["env_vars"]
    assert tutorial["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in tutorial


def sysfs(root, ports):
    """/sys/class/infiniband as the kernel lays it out: name -> [(state, link layer)]."""
    for name, states in ports.items():
        for number, (state, layer) in enumerate(states, 1):
            port = root / name / "ports" / str(number)
            port.mkdir(parents=True)
            (port / "state").write_text(f"{4 if state == 'ACTIVE' else 1}: {state}\n")
            (port / "link_layer").write_text(f"{layer}\n")
            (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    return root


def test_the_probe_reads_ib_devices_and_port_state_from_sysfs(tmp_path):
    root = sysfs(tmp_path / "ib", {"mlx5_0": [("ACTIVE", "InfiniBand")],
                                   "mlx5_1": [("DOWN", "InfiniBand")]})
    assert network.infiniband(root) == {"devices": [
        {"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                                      "rate": "400 Gb/sec (4X NDR)"}]},
        {"name": "mlx5_1", "ports": [{"port": 1, "state": "DOWN", "link_layer": "InfiniBand",
                                      "rate": "400 Gb/sec (4X NDR)"}]}]}
    assert network.infiniband(tmp_path / "absent") == {"devices": []}


@pytest.mark.parametrize("spec,name,port,selected", [
    ("", "mlx5_3", 1, True), ("mlx5", "mlx5_3", 1, True), ("mlx5_0,mlx5_1", "mlx5_3", 1, False),
    ("=mlx5_1", "mlx5_10", 1, False), ("=mlx5_1", "mlx5_1", 1, True),
    ("^mlx5_0", "mlx5_0", 1, False), ("^mlx5_0", "mlx5_2", 1, True),
    ("mlx5_0:1", "mlx5_0", 2, False), ("mlx5_0:1", "mlx5_0", 1, True),
])
def test_nccl_ib_hca_selects_devices_as_nccl_does(spec, name, port, selected):
    assert network.hca_selected(spec, name, port) is selected


def hcas(count, state="ACTIVE"):
    return {"devices": [{"name": f"mlx5_{d}", "ports": [{"port": 1, "state": state,
                                                         "link_layer": "InfiniBand"}]}
                        for d in range(count)]}


def ib_context(tmp_path, nodes=2, cpu_head=False):
    """Preflight's context for an IB profile; with cpu_head, node 0 has no GPU (Ray or nvidia-smi)."""
    ctx = context(tmp_path, nodes=nodes + cpu_head)
    ctx.profile = ib_profile(NODES=nodes)
    for ordinal, rep in ctx.reports.items():
        rep["env"] = {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"}
        rep["infiniband"] = hcas(8)
    if cpu_head:
        ctx.nodes[0]["Resources"] = {"CPU": 8.0}
        ctx.reports[0]["gpu_query"] = {"error": "nvidia-smi is not on PATH"}
        ctx.reports[0]["infiniband"] = {"devices": []}
    ctx.cluster_resources = {"GPU": float(ctx.profile.world_size)}
    return ctx


NODE_CHECKS = [c for c in preflight.CHECKS if c.needs == preflight.PROBED]


def run_node_checks(ctx):
    results = run_checks("preflight", [Check("node-probes", lambda c: []), *NODE_CHECKS], ctx)
    return {r.name: r for r in results}


def test_healthy_ib_nodes_pass_every_node_check(tmp_path):
    results = run_node_checks(ib_context(tmp_path))
    assert [(n, r.findings, r.skipped) for n, r in results.items() if r.findings or r.skipped] == []


@pytest.mark.parametrize("path,value,ident,words", [
    (("env", "NCCL_IB_DISABLE"), "1", "PRE-E024", "NCCL_IB_DISABLE: expected 0, actual '1'"),
    (("env", "NCCL_IB_HCA"), None, "PRE-E103", "NCCL_IB_HCA: expected mlx5, actual unset"),
    (("infiniband",), hcas(8, "DOWN"), "PRE-E104", "no active IB port on the HCAs NCCL_IB_HCA=mlx5"
                                                   " selects; the node has: mlx5_0:1 DOWN"),
    (("infiniband",), {"devices": []}, "PRE-E104", "no RDMA device in /sys/class/infiniband"),
    (("infiniband",), hcas(4), "PRE-E105", "active IB ports (vs node 0 (head node-0 10.0.0.10)): "
                                           "expected 8 (mlx5_0:1"),
])
def test_each_ib_fault_is_named_on_its_node(tmp_path, path, value, ident, words):
    ctx = ib_context(tmp_path)
    target = ctx.reports[1]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    found = [f for r in run_node_checks(ctx).values() for f in r.findings]
    assert [f.id for f in found] == [ident]
    assert found[0].obj == "node 1 (worker node-1 10.0.0.11)"
    assert words in found[0].message


def test_a_cpu_only_head_is_recorded_and_allowed(tmp_path):
    ctx = ib_context(tmp_path, nodes=2, cpu_head=True)
    assert preflight.check_node_count(ctx) == [] and preflight.check_gpu_resources(ctx) == []
    results = run_node_checks(ctx)
    assert [(n, r.findings) for n, r in results.items() if r.findings or r.skipped] == []
    rows = preflight.topology(ctx)
    assert [(r["hostname"], r["is_head"], r["gpu_node"], r["gpu_count"]) for r in rows] == [
        ("node-0", True, False, 0), ("node-1", False, True, 2), ("node-2", False, True, 2)]


def test_nodes_and_gpus_per_node_count_the_gpu_nodes(tmp_path):
    ctx = ib_context(tmp_path, nodes=2, cpu_head=True)
    ctx.profile = with_overrides(ctx.profile, NODES=3)
    ctx.cluster_resources = {"GPU": 4.0}
    found = preflight.check_node_count(ctx)
    assert [f.id for f in found] == ["PRE-E012"]
    assert found[0].message == "live Ray nodes with GPUs: expected 3, actual 2"
    assert found[0].evidence["cpu_only_nodes"] == ["10.0.0.10"]
    # A GPU node with the wrong count is still refused, a CPU node is not judged by it.
    (tmp_path / "b").mkdir()
    ctx = ib_context(tmp_path / "b", nodes=2, cpu_head=True)
    ctx.nodes[2]["Resources"] = {"GPU": 1.0}
    ctx.cluster_resources = {"GPU": 3.0}
    assert [(f.id, f.obj) for f in preflight.check_gpu_resources(ctx)] == [
        ("PRE-E013", "node 2 (worker node-2 10.0.0.12)"), ("PRE-E013", "cluster")]


def test_the_nccl_ib_line_is_read_in_its_real_formats():
    scan = LogScan()
    head = "(WorkerDict pid=4100, ip=10.0.0.2) gpu-1:4100:4107 [0] NCCL INFO "
    for number, line in enumerate([
            head + "NCCL_IB_DISABLE set by environment to 0.",
            head + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [2]mlx5_2:1:0/IB [RO]; "
                   "OOB eth0:10.0.0.2<0>",
            head + "NET/IB : Using [0]={[0] mlx5_4:1/IB, [1] mlx5_5:1/IB} ; OOB ib0:10.0.0.2<0>",
            head + "Using network IB"]):
        _parse_line(scan, number, line)
    t = scan.transport[("gpu-1", 4100)]
    assert t.ib_disable == ["0"] and t.networks == {"IB"}
    assert t.ib_devices == {"mlx5_0:1/IB", "mlx5_1:1/RoCE", "mlx5_2:1/IB", "mlx5_4:1/IB",
                            "mlx5_5:1/IB"}


# A 4 x 8 H100 IB run with a CPU-only head: the head holds no rank.
HOSTS = [{"hostname": "head-cpu", "ip": "10.10.0.2", "gpus": 0}] + \
    [{"hostname": f"gpu-{i}", "ip": f"10.10.0.{10 + i}"} for i in range(4)]


def four_by_eight(tmp_path):
    text = load_profile(None).path.read_text().replace(
        "PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=h100-4x8-ib")
    values = {"NODES": 4, "GPUS_PER_NODE": 8, "GPU_MODEL": "NVIDIA H100 80GB HBM3",
              "TRAIN_BATCH_SIZE": 32, "PPO_MINI_BATCH_SIZE": 32, **IB}
    lines = [line for line in text.splitlines() if line.split("=", 1)[0] not in values]
    path = tmp_path / "h100-4x8-ib.env"
    path.write_text("\n".join(lines + [f"{k}={v}" for k, v in values.items()]) + "\n")
    return path


def synth(tmp_path, **options):
    path = four_by_eight(tmp_path)
    run = tmp_path / "runs/verl/two-worker-grpo/ib-001"
    synthrun.write_run(run, load_profile(str(path)), "ib-001", str(ROOT), HOSTS,
                       transport="ib", **options)
    return run, path


def test_a_4x8_ib_run_with_a_cpu_only_head_passes_postflight(tmp_path):
    run, profile = synth(tmp_path)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    placement = json.loads((run / "actor-placement.json").read_text())
    assert len(placement["actors"]) == 32
    assert sorted(placement["node_counts"].values()) == [8, 8, 8, 8]
    assert {a["hostname"] for a in placement["actors"]} == {f"gpu-{i}" for i in range(4)}
    assert all(a["nccl_transport"] == "IB" and not a["rdma_disabled"] and
               len(a["ib_devices"]) == 8 for a in placement["actors"])


def test_an_ib_run_whose_ranks_fell_back_to_socket_names_them(tmp_path, capsys):
    run, profile = synth(tmp_path, socket_ranks=(5, 17))
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
    assert failed_ids(run) == {"POST-E150"}
    out = capsys.readouterr().out
    assert "2 of 32 ranks: (POST-E150) NCCL_TRANSPORT=ib, but ranks 5 (gpu-0), 17 (gpu-2) used " \
           "NCCL's Socket network, not IB" in out


def test_an_ib_run_without_ib_evidence_is_a_finding(tmp_path):
    run, profile = synth(tmp_path)
    log = run / "training.log"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()
                           if "NET/IB : Using" not in line or "gpu-3:" not in line))
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
    assert failed_ids(run) == {"POST-E151"}


def test_a_socket_run_judged_by_an_ib_profile_fails_and_vice_versa(tmp_path):
    run, profile = synth(tmp_path)
    socket_profile = profile.read_text().replace("NCCL_TRANSPORT=ib", "NCCL_TRANSPORT=socket") \
        .replace("NCCL_IB_HCA=mlx5\n", "")
    profile.write_text(socket_profile)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
    assert "POST-E013" in failed_ids(run)


def test_postflight_judges_the_nccl_variables_on_the_command_verl_ran(tmp_path):
    run, profile = synth(tmp_path)
    command_file = run / "resolved-command.txt"
    import shlex
    words = [w.replace("NCCL_IB_HCA='mlx5'", "NCCL_IB_HCA='mlx4'")
             for w in shlex.split(command_file.read_text())]
    command_file.write_text(" ".join(shlex.quote(w) for w in words) + "\n")
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 1
    assert failed_ids(run) == {"POST-E006"}
    record = json.loads((run / "verification.json").read_text())
    found = [f for c in record["checks"] for f in c["findings"] if f["id"] == "POST-E006"]
    assert [(f["evidence"]["expected"], f["evidence"]["actual"]) for f in found] == [("'mlx5'", "'mlx4'")]
