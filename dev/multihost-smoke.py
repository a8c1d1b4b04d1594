#!/usr/bin/env python3
"""Summary: The smoke run across two Ray hosts that share one GPU machine (make smoke-2x1).

Usage: dev/multihost-smoke.py SMOKE_DIR [--profile smoke-2x1] [--fault block-peer|hang]

The tutorial's cross-node chain for real: the test cluster's hosts (dev/netcluster.py:
a network, UTS and mount namespace each, joined by a bridge; `ray start --node-ip-address`),
each `ray start --num-gpus=G` with the machine's real nvidia-smi. With fewer GPUs than NODES x
GPUS_PER_NODE and one GPU a host, every host gets GPU 0: NCCL accepts two ranks on one GPU when
their hostnames differ, and connects them over NET/Socket on the hosts' eth0 with IB disabled.
The storage root (a tmpfs) is shared by all hosts. The profile's generated inputs are written
there, the bundle installed, and the Driver command pasted on the head host as a platform runs
it: preflight, real verl 0.6.0 GRPO (trainer.nnodes=NODES), postflight.

Needs root (namespaces, mounts), one or more NVIDIA GPUs, a python3 with a CUDA torch; ray,
pyroute2 and verl 0.6.0's other packages come from python3 when it has them, else from the venv
dev/smoke-env.py builds (as make smoke: WHEELHOUSE=<dir> installs offline, the script then runs
again under it); and the verl 0.6.0 wheel (SMOKE_VERL_WHEEL, else .whl/, .cache/wheels/ or WHEELHOUSE). The run folder is copied to SMOKE_DIR/runs/ before the teardown (the
shared storage goes with the cluster); the hosts' logs stay in SMOKE_DIR/cluster/.
Exit codes: 0 SUCCESS; 2 this machine cannot run it (said at once, before anything starts);
otherwise the launcher's exit code (1 a check failed).

Faults, each a real multi-node failure the bundle must stop early (the run folder is kept):
  block-peer  the last host's NCCL interface (NCCL_SOCKET_IFNAME=eth1) is on a subnet no other
              host reaches: preflight must fail (reachability, the collective probe naming the
              rank with NCCL's lines) before any training, within COLLECTIVE_TIMEOUT=30.
  hang        once step 1 is logged, every verl worker (ray::WorkerDict) of the last host is
              stopped (SIGSTOP), as a wedged GPU or driver leaves it: the training watchdog
              (STALL_STEP_FLOOR=30) must stop the training with stall.json, the stacks of every
              node and the flight-recorder dumps of the ranks still running.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]
BUNDLE_REL = Path("tools/verl/two-worker-grpo")
sys.path.insert(0, str(REPO / BUNDLE_REL))
sys.path.insert(0, str(REPO))
from dev import netcluster  # noqa: E402
from twgrpo.run.command import search_path  # noqa: E402
from twgrpo.run.findings import UsageError  # noqa: E402
from twgrpo.run.profile import load_profile  # noqa: E402
from twgrpo.run.runfolder import RunFolder  # noqa: E402

PROG = "multihost-smoke"
VERL_WHEEL_NAME = "verl-0.6.0-py3-none-any.whl"
VERL_WHEEL_SHA256 = "2666528b8ab4494e2ac40c282a99281296c2d9dc9675ceac6bea8d41fb69b321"  # PyPI's
# What the platform sets on every host: NCCL and Gloo on the hosts' eth0, never NVLink multicast
# (not needed, and it can wedge shared GPU hosts).
PLATFORM_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_NVLS_ENABLE": "0",
                "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PHASE = re.compile(r"^run-two-worker-grpo-v1: phase (\w+) ended with status (\d+) after (\d+) s$", re.M)


def gpu_count() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def gpu_assignment(gpus: int, nodes: int, per: int) -> Optional[List[str]]:
    """CUDA_VISIBLE_DEVICES for each host: GPUs of their own, or GPU 0 shared by one-GPU hosts."""
    if gpus >= nodes * per:
        return [",".join(str(i * per + g) for g in range(per)) for i in range(nodes)]
    if per == 1 and gpus >= 1:
        return ["0"] * nodes
    return None


def find_wheel() -> Optional[Path]:
    houses = [Path(f) / VERL_WHEEL_NAME for f in os.environ.get("WHEELHOUSE", "").split(":") if f]
    candidates = [os.environ.get("SMOKE_VERL_WHEEL", ""), REPO / ".whl" / VERL_WHEEL_NAME,
                  REPO / ".cache" / "wheels" / VERL_WHEEL_NAME, *houses]
    found = next((Path(c) for c in candidates if c and Path(c).is_file()), None)
    if found in houses:  # kept in .whl/, so later runs need no WHEELHOUSE
        kept = REPO / ".whl" / VERL_WHEEL_NAME
        kept.parent.mkdir(exist_ok=True)
        shutil.copyfile(found, kept.with_suffix(".part"))
        os.replace(kept.with_suffix(".part"), kept)
    return found


def host_problem() -> Optional[str]:
    """Why this machine can never host the two hosts, whatever Python runs this; None if it can."""
    if os.geteuid() != 0:
        return ("two hosts on one machine needs root (network namespaces and mounts) — run it as root "
                "on a GPU machine; make test covers the rest")
    return None


def use_smoke_env(argv: List[str]) -> int:
    """Run this script again under make smoke's Python (dev/smoke-env.py); its exit code if it cannot."""
    ensure = [sys.executable, str(REPO / "dev" / "smoke-env.py"), "ensure", "--python", sys.executable]
    for option, variable in (("--wheelhouse", "WHEELHOUSE"), ("--env", "SMOKE_ENV")):
        if os.environ.get(variable):
            ensure += [option, os.environ[variable]]
    found = subprocess.run(ensure, stdout=subprocess.PIPE, text=True)
    if found.returncode != 0:
        return found.returncode
    python = str(Path(found.stdout.strip().splitlines()[-1]) / "python3")
    env = {**os.environ, "PATH": f"{Path(python).parent}:{os.environ.get('PATH', '')}", "TWGRPO_SMOKE_ENV": "ready"}
    os.execve(python, [python, str(Path(__file__).resolve()), *argv], env)
    return 2  # not reached


def machine_problem(profile, wheel: Optional[Path]) -> Optional[str]:
    """Why this machine cannot run the smoke, with what to do; None if it can."""
    reason = netcluster.missing_prerequisites()
    if reason:
        return f"two hosts on one machine {reason} — run it as root on a GPU machine; make test covers the rest"
    gpus = gpu_count()
    if gpus == 0:
        return "needs an NVIDIA GPU, and nvidia-smi lists none — run make smoke-2x1 on a GPU machine"
    if gpu_assignment(gpus, profile.NODES, profile.GPUS_PER_NODE) is None:
        return (f"{profile.NODES} hosts x {profile.GPUS_PER_NODE} GPUs need {profile.world_size} GPUs "
                f"(or one GPU a host), this machine has {gpus}")
    cuda = subprocess.run([sys.executable, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"])
    if cuda.returncode:
        return "torch does not see a CUDA GPU — check the driver and CUDA_VISIBLE_DEVICES"
    if not shutil.which("ray"):
        return "the ray command is not on PATH — put ray's bin folder on PATH"
    if wheel is None:
        return f"no {VERL_WHEEL_NAME} — set SMOKE_VERL_WHEEL=/path/to/{VERL_WHEEL_NAME} (PyPI's)"
    actual = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if actual != VERL_WHEEL_SHA256:
        return f"{wheel}: sha256 expected {VERL_WHEEL_SHA256}, actual {actual} — use PyPI's verl 0.6.0 wheel"
    return None


def runtime_env(profile_name: str, storage: Path) -> dict:
    """The RuntimeEnv a managed cluster applies to every node, plus the platform's settings."""
    out = subprocess.run([sys.executable, str(REPO / BUNDLE_REL / "verify-two-worker-grpo-v1.py"),
                          "runtime-env", "--profile", profile_name, "--storage-root", str(storage)],
                         capture_output=True, text=True, check=True).stdout
    env = json.loads(out)["env_vars"]
    # The pinned verl first, then the HF-generate rollout adapter (importable on every node),
    # then whatever the caller had on the path (packages the image lacks, for instance).
    path = search_path(env["PYTHONPATH"], str(storage / BUNDLE_REL / "rollout"), os.environ.get("PYTHONPATH", ""))
    return {**env, **PLATFORM_ENV, "PYTHONPATH": path}


# Folders each host mounts afresh in its own mount namespace (dev/netcluster.py): a SMOKE_ROOT
# under one of them holds a storage the hosts cannot see.
HOST_PRIVATE = ("/dev/shm", "/tmp/ray")


def unseen_root(smoke_dir: Path) -> Optional[str]:
    """Why the hosts cannot see SMOKE_ROOT, or None."""
    real = os.path.realpath(smoke_dir)
    for private in HOST_PRIVATE:
        if real == private or real.startswith(private + "/"):
            return (f"SMOKE_ROOT {smoke_dir} is under {private}, which every Ray host of the test "
                    "cluster mounts afresh, so no host would see the storage there — set "
                    "SMOKE_ROOT to a folder on a disk (the default is .smoke in the checkout)")
    return None


# The launcher's settings for each fault: a short collective timeout, a short stall floor.
FAULT_ENV = {"block-peer": {"COLLECTIVE_TIMEOUT": "30"},
             "hang": {"STALL_FIRST_STEP": "600", "STALL_STEP_FLOOR": "30"}}


def block_peer(cluster, per: int):
    """The last host's NCCL traffic on an interface no other host reaches (see --fault)."""
    last = len(cluster.nodes) - 1
    isolated = cluster.isolated_interface(last, "10.232.0.11")
    isolated.__enter__()
    cluster.restart_node(last, per, {"NCCL_SOCKET_IFNAME": "eth1"})
    print(f"{PROG}: host {last}'s NCCL_SOCKET_IFNAME is eth1 (10.232.0.11/24, reached by no other host)")
    return isolated


def hang_after_step_1(cluster, run: Path, stop: threading.Event) -> threading.Thread:
    """SIGSTOP every ray::WorkerDict process of the last host once training.log has step 1."""
    def body() -> None:
        log = RunFolder(run).training_log
        while not stop.is_set():
            text = log.read_text(errors="replace") if log.is_file() else ""
            if "step:1 -" in text:
                break
            time.sleep(0.5)
        else:
            return
        node = cluster.nodes[-1]
        stopped = []
        for pid in cluster.ns_pids(node):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(b"ray::WorkerDict"):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        print(f"{PROG}: step 1 logged: SIGSTOP to host {node.index}'s verl workers {stopped}", flush=True)
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("smoke_dir", type=Path)
    parser.add_argument("--profile", default="smoke-2x1")
    parser.add_argument("--fault", choices=sorted(FAULT_ENV), help="a real failure to inject")
    args = parser.parse_args(argv)
    args.smoke_dir = args.smoke_dir.absolute()  # the tools it runs (git among them) work elsewhere
    return args


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    unseen = unseen_root(args.smoke_dir)
    if unseen:
        print(f"{PROG}: {unseen}", file=sys.stderr)
        return 2
    try:
        profile = load_profile(args.profile)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    problem = host_problem()
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    if os.environ.get("TWGRPO_SMOKE_ENV") != "ready":
        return use_smoke_env(argv)
    wheel = find_wheel()
    problem = machine_problem(profile, wheel)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    nodes, per = profile.NODES, profile.GPUS_PER_NODE
    gpus = gpu_count()
    visible = gpu_assignment(gpus, nodes, per)
    if gpus < nodes * per:
        print(f"{PROG}: {gpus} GPU(s) for {nodes} hosts: they share GPU 0")
    root = args.smoke_dir / "cluster"
    if (root / "cluster.json").is_file():  # a run interrupted before its teardown
        netcluster.Cluster(root).down()
    cpus = max(2, (os.cpu_count() or 2) // nodes)
    cluster = netcluster.Cluster(root, stub_gpus=False, cpus_per_node=cpus)
    storage = cluster.storage
    run_id = f"{profile.PROFILE_NAME}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    times = {}

    def prepare(storage: Path) -> None:
        started = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "dev" / "generate-inputs.py"), "--storage-root",
                        str(storage), "--profile", args.profile, "--verl-wheel", str(wheel)], check=True)
        subprocess.run([sys.executable, str(REPO / "prep" / "bundle.py"), "install",
                        str(storage / BUNDLE_REL), "--force"], check=True)
        times["inputs generated"] = time.perf_counter() - started

    started = time.perf_counter()
    cluster.up(nodes, per, env=runtime_env(args.profile, storage), prepare=prepare,
               node_envs=[{"CUDA_VISIBLE_DEVICES": v} for v in visible])
    times["Ray hosts up"] = time.perf_counter() - started - times["inputs generated"]
    isolated, stop = None, threading.Event()
    try:
        if args.fault == "block-peer":
            isolated = block_peer(cluster, per)
        if args.fault == "hang":
            hang_after_step_1(cluster, RunFolder.at(storage, run_id).path, stop)
        command = subprocess.run([sys.executable, str(REPO / "prep" / "bundle.py"), "driver-command",
                                  str(storage), "--profile", args.profile, "--run-id", run_id,
                                  "--bundle-dir", str(BUNDLE_REL)],
                                 capture_output=True, text=True, check=True).stdout
        started = time.perf_counter()
        out = cluster.driver(["bash", "-c", command], env=FAULT_ENV.get(args.fault), check=False,
                             timeout=1500)
        times["launcher"] = time.perf_counter() - started
        output = out.stdout + out.stderr
        (args.smoke_dir / f"{run_id}.driver-output.log").write_text(output)
        print(output[-4000:])
        run = RunFolder.at(storage, run_id).path
        kept = args.smoke_dir / "runs" / run_id
        if run.is_dir():
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(run, kept, symlinks=True)
    finally:
        stop.set()
        if isolated is not None:
            isolated.__exit__(None, None, None)
        started = time.perf_counter()
        cluster.down()
        times["Ray hosts stopped"] = time.perf_counter() - started
    verdict = "SUCCESS" if (kept / "SUCCESS").is_file() else f"FAILED (exit {out.returncode})"
    print(f"\n{PROG}: run {run_id}: {verdict}; run folder {kept}")
    print(f"{PROG}: wall times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
    log = RunFolder(kept).driver_log
    for phase, status, seconds in PHASE.findall(log.read_text() if log.is_file() else ""):
        print(f"  {phase}: {seconds} s (status {status})")
    return out.returncode


if __name__ == "__main__":
    raise SystemExit(main())
