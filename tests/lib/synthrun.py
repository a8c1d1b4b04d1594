"""Synthesize a finished run folder in the formats a real verl 0.6.0 run writes (tests only).

Line formats follow a real run's training.log (Ray prefixes with ANSI colour, NCCL 2.28 INFO
lines, torch 2.11 Gloo lines); W ranks over N hosts. Options plant faults in the log; other
faults are injected into the files afterwards by the tests.
"""
import json
import math
import random
import shlex
import struct
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


from tbwrite import write_events
from twgrpo.run import command

CYAN, RESET = "\x1b[36m", "\x1b[0m"
TAGS = ["training/global_step", "actor/pg_loss", "actor/grad_norm", "actor/lr", "critic/score/mean",
        "critic/score/max", "critic/score/min", "response_length/mean", "actor/entropy", "timing_s/gen"]
NOISE = (  # NCCL 2.28 INFO lines as a real run prints them, many per rank
    "Channel {c:02d}/64 : {r}",
    "Trees [0] -1/-1/-1->{r}->-1 [1] -1/-1/-1->{r}->-1 [2] -1/-1/-1->{r}->-1",
    "P2P Chunksize set to 524288",
    "Bootstrap: Using eth0:{ip}<0>",
    "64 coll channels, 64 collnet channels, 0 nvls channels, 64 p2p channels, 64 p2p channels per peer",
    "CC Off, workFifoBytes 1048576",
)


def prefix(actor: str, pid: int, ip: Optional[str]) -> str:
    return f"{CYAN}({actor} pid={pid}{', ip=' + ip if ip else ''}){RESET} "


def training_log(hosts: Sequence[Dict[str, str]], per_node: Sequence[int], steps: int,
                 run_dir: str, *, gloo: str = "new", ib_value: str = "1", network: str = "Socket",
                 drop_complete: Optional[int] = None, duplicate_rank: Optional[int] = None,
                 nccl_warn: bool = False, noise: int = 20, complete_extra: str = "",
                 nan_loss: bool = False, seed: int = 0, first_step: int = 1,
                 last_step: Optional[int] = None, resume_from: Optional[str] = None,
                 transport: str = "socket", socket_ranks: Sequence[int] = (),
                 metrics: str = "short") -> List[str]:
    """The lines of training.log; per_node[i] ranks on hosts[i] (hosts[0] runs the driver).

    resume_from: the global_step_N folder verl loads (it prints what verl 0.6.0 prints); then
    steps first_step..last_step are trained (default 1..steps).

    transport="ib": each rank logs what NCCL's IB plugin prints (net_ib/init.cc) over 8 HCAs and
    the IB network, except socket_ranks, which log NCCL's fallback (no IB device, Socket).

    metrics="verl": each step's line is the one verl 0.6.0 printed on the real GPU run (64
    metrics, 2 KB), not a short line of the five postflight reads."""
    rng = random.Random(seed)
    world = sum(per_node)
    task = 3773
    lines = [prefix("TaskRunner", task, None) + "[validate_config] All configuration checks passed successfully!",
             prefix("TaskRunner", task, None) + f"Total training steps: {steps}"]
    ranks = []
    for node, count in enumerate(per_node):
        for local in range(count):
            ranks.append((node, local, 4000 + 100 * node + local))
    comm_id = "0x%016x" % rng.getrandbits(64)
    init_lines, gloo_lines = [], []
    for rank, (node, local, pid) in enumerate(ranks):
        host = hosts[node]
        ip = host["ip"] if node else None  # Ray adds ip= only for actors on another node
        head = prefix("WorkerDict", pid, ip) + f"{host['hostname']}:{pid}:{pid + 7} [{local}] NCCL INFO "
        bus = "%x0" % (6 + 4 * local)
        comm = "0x%x" % (0x55d0000000 + rank)
        if transport == "ib" and rank not in socket_ranks:
            hcas = " ".join(f"[{d}]mlx5_{d}:1/IB" for d in range(8))
            net_lines = [head + "NCCL_IB_DISABLE set by environment to 0.",
                         head + f"NET/IB : Using {hcas} [RO]; OOB eth0:{host['ip']}<0>",
                         head + "Using network IB"]
        elif transport == "ib":
            net_lines = [head + "NCCL_IB_DISABLE set by environment to 0.",
                         head + "NET/IB : No device found.",
                         head + f"NET/Socket : Using [0]eth0:{host['ip']}<0>",
                         head + "Using network Socket"]
        else:
            net_lines = [head + f"NCCL_IB_DISABLE set by environment to {ib_value}.",
                         head + f"NET/Socket : Using [0]eth0:{host['ip']}<0>",
                         head + f"Using network {network}"]
        init_lines += net_lines + [
            head + f"ncclCommInitRankConfig comm {comm} rank {rank} nranks {world} cudaDev {local} "
                   f"nvmlDev {local} busId {bus} commId {comm_id} - Init START",
        ]
        init_lines += [head + NOISE[i % len(NOISE)].format(c=i % 64, r=rank, ip=host["ip"])
                       for i in range(noise)]
        if rank != drop_complete:
            init_lines.append(head + f"ncclCommInitRankConfig comm {comm} rank {rank} nranks {world} "
                              f"cudaDev {local} nvmlDev {local} busId {bus} commId {comm_id}"
                              f"{complete_extra} - Init COMPLETE")
        if gloo == "new":
            gloo_lines.append(prefix("WorkerDict", pid, ip) + "[/pytorch/third_party/gloo/gloo/transport/"
                              f"tcp/context.cc:243] INFO Rank {rank} is connected to {world - 1}. "
                              f"Expected number of connected peers is: {world - 1}")
        elif gloo == "old":
            gloo_lines.append(prefix("WorkerDict", pid, ip) + f"[Gloo] Rank {rank} is connected to "
                              f"{world - 1} peer ranks. Expected number of connected peer ranks is : {world - 1}")
    if duplicate_rank is not None:  # a second process claims the rank in the same communicator
        node, local, pid = ranks[duplicate_rank]
        host = hosts[node]
        head = prefix("WorkerDict", pid + 50, host["ip"] if node else None) + \
            f"{host['hostname']}:{pid + 50}:{pid + 57} [{local}] NCCL INFO "
        init_lines.append(head + f"ncclCommInitRankConfig comm 0x1 rank {duplicate_rank} nranks "
                          f"{world} cudaDev {local} nvmlDev {local} busId 7000 commId {comm_id} - Init START")
    rng.shuffle(init_lines)  # ranks interleave in a real log; each rank's own order is not needed
    lines += gloo_lines + init_lines
    if nccl_warn:
        node, local, pid = ranks[-1]
        lines.append(prefix("WorkerDict", pid, hosts[node]["ip"] if node else None)
                     + f"{hosts[node]['hostname']}:{pid}:{pid + 7} [{local}] NCCL WARN NET/Socket : "
                     "peer 10.0.0.9<41235> message truncated")
    if resume_from:
        lines += [prefix("TaskRunner", task, None) + f"Load from checkpoint folder: {resume_from}",
                  prefix("TaskRunner", task, None) + f"Setting global step to {first_step - 1}",
                  prefix("TaskRunner", task, None) + f"Resuming from {resume_from}"]
        for rank, (node, _, pid) in enumerate(ranks):
            for kind, name in (("model", "model"), ("optimizer", "optim"), ("rng", "extra_state"),
                               ("lr_scheduler", "extra_state")):  # the four lines verl 0.6.0 prints
                lines.append(prefix("WorkerDict", pid, hosts[node]["ip"] if node else None)
                             + f"INFO:2026-12-02 13:10:32,375:[Rank {rank}] Loaded {kind} from "
                             f"{resume_from}/actor/{name}_world_size_{world}_rank_{rank}.pt")
    last_step = steps if last_step is None else last_step
    verl_line = verl_metrics_line() if metrics == "verl" else None
    for step in range(first_step, last_step + 1):
        loss = "nan" if nan_loss else f"{0.01 * step:.4f}"
        lines.append(prefix("TaskRunner", task, None) + (
            verl_line.format(step=step) if verl_line else f"step:{step} - actor/pg_loss:{loss} - "
            f"actor/grad_norm:0.0 - training/global_step:{step} - critic/score/mean:0.0"))
    lines.append(prefix("TaskRunner", task, None)
                 + f"local_global_step_folder: {run_dir}/checkpoints/global_step_{last_step}")
    return lines


def verl_metrics_line() -> str:
    """verl's metrics line of step 1 of the real GPU run (tests/fixtures/real-smoke-run), its
    step counters as {step}."""
    log = next((Path(__file__).resolve().parents[1] / "fixtures" / "real-smoke-run").glob("*/training.log"))
    line = next(line for line in log.read_text(encoding="utf-8").splitlines() if "training/global_step:1 " in line)
    body = line[line.index("step:1 - "):].replace("{", "{{").replace("}", "}}")
    return body.replace("step:1 - ", "step:{step} - ", 1).replace("training/global_step:1 ", "training/global_step:{step} ")


def torch_pickle(storages: Sequence[int]) -> bytes:
    """data.pkl as torch.save pickles {name: tensor}, reduced to what a checker reads: each value
    a persistent id ('storage', FloatStorage, key, 'cpu', element count) (protocol 2 opcodes)."""
    out = b"\x80\x02}q\x00(" if storages else b"\x80\x02}q\x00"
    for key, numel in enumerate(storages):
        out += (b"X" + struct.pack("<I", 3) + b"w%02d" % key + b"(X\x07\x00\x00\x00storage"
                b"ctorch\nFloatStorage\n" + b"X" + struct.pack("<I", len(str(key))) + str(key).encode()
                + b"X\x03\x00\x00\x00cpuJ" + struct.pack("<i", numel) + b"tQ")
    return out + (b"u." if storages else b".")


def torch_zip(path: Path, payload: Optional[bytes] = None, storages: Sequence[int] = (1024,)) -> None:
    """A file laid out like torch.save's zip archive: stored entries, data.pkl first, byteorder,
    one data/<key> entry of 4 x numel bytes per storage the pickle references, then version."""
    stem = path.stem
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{stem}/data.pkl", torch_pickle(storages) if payload is None else payload)
        archive.writestr(f"{stem}/byteorder", b"little")
        for key, numel in enumerate(storages):
            archive.writestr(f"{stem}/data/{key}", bytes(range(256)) * (numel * 4 // 256) + b"\0" * (numel * 4 % 256))
        archive.writestr(f"{stem}/version", b"3\n")


def record_text(data) -> str:
    """A record as the bundle writes it (run/records.write_json)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


PREFLIGHT_CHECKS = ("batch-sizes", "ray-connection", "node-count", "gpu-resources", "node-probes",
                    "shared-storage", "gpus", "driver-version", "storage-mount", "nccl-env",
                    "reachability", "collective", "same-packages")


def write_preflight(run_dir: Path, profile, run_id: str, hosts: Sequence[Dict[str, str]],
                    probe_bytes: int = 8000) -> None:
    """preflight.json of a passed preflight: the fields sorted, so `status` lies between each
    node's probe (nodes, before it) and the topology (workers, after it), as in a real one."""
    gpus = profile.GPUS_PER_NODE
    workers = [{"ordinal": i, "hostname": h["hostname"], "node_ip": h["ip"],
                "node_id": h.get("node_id", f"{i:02x}" * 28), "is_head": i == 0,
                "gpu_node": h.get("gpus", gpus) > 0, "gpu_names": [profile.GPU_MODEL] * h.get("gpus", gpus),
                "gpu_count": h.get("gpus", gpus), "driver": ["535.104.05"] if h.get("gpus", 1) else [],
                "mount_source": "storage:/volume"} for i, h in enumerate(hosts)]
    env = {f"VAR_{i:03d}": "x" * 40 for i in range(max(probe_bytes // 56, 0))}
    nodes = [{"hostname": h["hostname"], "node_id": w["node_id"], "node_ip": h["ip"], "env": env,
              "gpu_query": {"gpus": [{"index": g, "name": profile.GPU_MODEL, "driver": "535.104.05",
                                      "bus_id": f"00000000:{g:02x}:00.0", "memory_mib": 81920}
                                     for g in range(w["gpu_count"])]}}
             for h, w in zip(hosts, workers)]
    checks = [{"name": name, "status": "passed", "findings": [], "skipped": 0} for name in PREFLIGHT_CHECKS]
    (run_dir / "preflight.json").write_text(record_text({
        "phase": "preflight", "status": "passed", "checked_at": "2026-12-02T13:00:00+00:00",
        "run_id": run_id, "checks": checks, "passed_checks": ",".join(PREFLIGHT_CHECKS),
        "profile": profile.to_json(), "expected_nodes": len(hosts), "world_size": sum(w["gpu_count"] for w in workers),
        "expected_gpus_per_node": gpus, "workers": workers, "nodes": nodes}))


def write_run_json(run_dir: Path, profile, run_id: str, storage_root: str) -> None:
    (run_dir / "run.json").write_text(record_text({
        "run_id": run_id, "started_at": "2026-12-02T13:00:00Z", "storage_root": storage_root,
        "driver_host": "node-0000", "profile": profile.to_json()}))


def write_run(run_dir: Path, profile, run_id: str, storage_root: str, hosts: Sequence[Dict[str, str]],
              per_node: Optional[Sequence[int]] = None, with_log: bool = True,
              save_steps: Optional[Sequence[int]] = None, val_steps: Sequence[int] = (),
              probe_bytes: int = 8000, run_json: bool = False, **log_options) -> Path:
    """A complete run folder that postflight passes, unless log_options plant a fault.

    first_step/last_step (log_options) cut the run short or start it later; save_steps are the
    steps with a checkpoint (default the last). preflight.json and run.json are laid out as the
    bundle's writer lays them out (sorted keys, indent 2), each node's probe about probe_bytes
    (a real one is 4-8 KB), so that readers meet their fields where a real run has them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    # A host with "gpus": 0 (a CPU-only head) holds no rank.
    per_node = list(per_node or [h.get("gpus", profile.GPUS_PER_NODE) for h in hosts])
    world, steps = sum(per_node), profile.TARGET_STEPS
    first = log_options.get("first_step", 1)
    last = log_options.get("last_step") or steps
    lines = training_log(hosts, per_node, steps, str(run_dir), **log_options)
    if with_log:
        (run_dir / "training.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = command.training_command(profile, Path(storage_root), run_id)
    (run_dir / "resolved-command.txt").write_text(" ".join(shlex.quote(a) for a in argv) + " \n")
    evidence = {"verl_commit": profile.VERL_COMMIT,
                "verl_sums_sha256": profile.values.get("VERL_SUMS_SHA256", ""),
                "model_sums_sha256": profile.MODEL_SUMS_SHA256,
                "data_sums_sha256": profile.DATA_SUMS_SHA256}
    (run_dir / "inputs.json").write_text(json.dumps({"phase": "inputs", "status": "passed",
                                                     "storage_root": storage_root,
                                                     "checks": [], "evidence": evidence}, indent=2))
    (run_dir / "driver.log").write_text("".join(  # the launcher's phase lines
        f"run-two-worker-grpo-v1: phase {phase} ended with status 0 after 1 s\n"
        for phase in ("inputs", "preflight", "training")))
    write_preflight(run_dir, profile, run_id, hosts, probe_bytes)
    if run_json:  # as the launcher writes it (most tests write their own or none)
        write_run_json(run_dir, profile, run_id, storage_root)
    tb = run_dir / "tensorboard"
    tb.mkdir(exist_ok=True)
    nan = log_options.get("nan_loss", False)
    write_events(tb / "events.out.tfevents.1764676800.host0.3773.0",
                 [(s, {t: (math.nan if nan and t == "actor/pg_loss" and s == last else
                           float(s) if t == "training/global_step" else 0.01 * s)
                       for t in TAGS}) for s in range(first, last + 1)]
                 # verl's validation scalars (val-core/<data source>/<variable>/<metric>)
                 + [(s, {"val-core/openai/gsm8k/reward/mean@1": 0.25 * s}) for s in val_steps])
    rollouts = run_dir / "rollouts"
    rollouts.mkdir(exist_ok=True)
    for step in range(first, last + 1):
        rows = [{"input": f"<|im_start|>user\nproblem {i}<|im_end|>\n", "output": f"answer {i}",
                 "gts": str(i), "score": 0.0, "step": step}
                for i in range(profile.TRAIN_BATCH_SIZE * profile.ROLLOUT_N)]
        (rollouts / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ckpt = run_dir / "checkpoints"
    for step in (save_steps if save_steps is not None else [last]):
        actor = ckpt / f"global_step_{step}" / "actor"
        (actor / "huggingface").mkdir(parents=True, exist_ok=True)
        for kind in ("model", "optim", "extra_state"):
            for rank in range(world):
                torch_zip(actor / f"{kind}_world_size_{world}_rank_{rank}.pt")
        (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}, indent=4))
        (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        torch_zip(ckpt / f"global_step_{step}" / "data.pt")
        (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
    return run_dir


def healthy_run(root: Path, nodes: int, gpus: int, steps: int = 2, transport: str = "socket",
                probe_bytes: int = 8000, noise: int = 1, run_id: str = "exp",
                metrics: str = "short") -> Tuple[Path, Path]:
    """(run folder, profile file) of a healthy synthesized run of nodes x gpus for steps, under
    root's runs/, with a profile named scale-<nodes>x<gpus>[-ib][-<steps>] beside them
    (metrics: training_log's)."""
    from twgrpo.run.profile import load_profile, with_overrides
    name = f"scale-{nodes}x{gpus}{'-ib' if transport == 'ib' else ''}{f'-{steps}' if steps != 2 else ''}"
    values = {"NODES": nodes, "GPUS_PER_NODE": gpus, "TRAIN_BATCH_SIZE": nodes * gpus,
              "PPO_MINI_BATCH_SIZE": nodes * gpus, "TARGET_STEPS": steps, "PROFILE_NAME": name}
    if transport == "ib":
        values.update(NCCL_TRANSPORT="ib", NCCL_IB_HCA="mlx5", NCCL_SOCKET_IFNAME="eth0")
    profile = with_overrides(load_profile("tutorial-2x2-a100"), **values)
    root.mkdir(parents=True, exist_ok=True)
    env = root / f"{name}.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in profile.values.items()))
    hosts = [{"hostname": f"node-{i:04d}", "ip": f"10.{i >> 8}.{i & 255}.1"} for i in range(nodes)]
    run = root / "runs" / "verl" / "two-worker-grpo" / run_id
    write_run(run, profile, run_id, "/mnt/verl-reproduction", hosts, noise=noise, run_json=True,
              probe_bytes=probe_bytes, transport=transport, metrics=metrics)
    return run, env
