"""Summary: A real Slurm cluster on the multi-host test cluster's hosts, for tests (needs root).

Usage: (from Python) SlurmCluster(root).up(nodes, prepare) ... .sbatch(script, env) ... .down()

The hosts are dev/netcluster.py's (a network, UTS and mount namespace each, on a private bridge,
a shared tmpfs as storage), without Ray: Ray is what the batch script brings up. Debian's
slurm-wlm runs for real: slurmctld on node-0, one slurmd per host (-N node-<i>), munge for
authentication (one munged of our own on a private socket and key, never the system's), and
two stand-in GPUs per host as Slurm GRES (gpu:2), so `--gpus-per-node` is allocated for real
and each step sees SLURM_GPUS_ON_NODE. Jobs run
as root with proctrack/linuxproc and no cgroup plugin (the hosts share one kernel's cgroups), and
each host's Slurm files (spool, pid, log) sit apart under the cluster's folder. Teardown goes by
process id, then the namespaces go with netcluster's own.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from dev import netcluster

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "srun")
CONF = """\
ClusterName=twgtest
SlurmctldHost=node-0({head_ip})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={root}/ctld
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# the test nodes declare the CPUs verl's placement asks for, whatever this machine has
SlurmdParameters=config_overrides
GresTypes=gpu
SlurmdTimeout=30
KillWait=5
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def missing_prerequisites() -> Optional[str]:
    """Why this machine cannot host the Slurm cluster, or None."""
    reason = netcluster.missing_prerequisites()
    if reason:
        return reason
    for tool in DAEMONS:
        if not shutil.which(tool):
            return f"needs {tool} (Debian: slurmctld slurmd slurm-client munge; tests/run.sh installs them)"
    return None


class SlurmCluster:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.net = netcluster.Cluster(self.root / "net")
        self.slurm = self.root / "slurm"
        self.pids: List[int] = []

    @property
    def conf(self) -> Path:
        return self.slurm / "slurm.conf"

    def env(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment of a command on a host: netcluster's, plus SLURM_CONF."""
        return {**self.net.node_env(self.net.nodes[0]), "SLURM_CONF": str(self.conf), **(extra or {})}

    def spawn(self, node, args: List[str], log: str) -> None:
        with open(self.slurm / log, "ab") as out:
            process = subprocess.Popen(self.net.enter(node) + args, env=self.env(), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.pids.append(process.pid)

    def up(self, nodes: int, prepare=None, cpus: int = 3, gpus: int = 2) -> "SlurmCluster":
        # cpus: verl asks one CPU per GPU bundle plus one for its TaskRunner (preflight PRE-E215)
        net = self.net
        net.create_switch()
        try:
            if prepare:
                prepare(net.storage)
            for index in range(nodes):
                net.nodes.append(net.add_host(index))
                net.save()
            self.start_slurm(cpus, gpus)
        except BaseException:
            self.down()
            raise
        return self

    def gres(self, gpus: int) -> None:
        """gres.conf: gpus stand-in GPU devices per host (character devices like /dev/null, so
        slurmd counts them; the stub nvidia-smi answers for them), the same files on every host."""
        devices = self.slurm / "dev"
        devices.mkdir(parents=True)
        for index in range(gpus):
            os.mknod(devices / f"nvidia{index}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        files = f"{devices}/nvidia[0-{gpus - 1}]" if gpus > 1 else f"{devices}/nvidia0"
        (self.slurm / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={files}\n" if gpus else "")

    def start_slurm(self, cpus: int, gpus: int) -> None:
        self.gres(gpus)
        munge = self.slurm / "munge"
        munge.mkdir(parents=True, mode=0o700)
        (self.slurm / "ctld").mkdir()
        key = munge / "munge.key"
        key.write_bytes(secrets.token_bytes(128))
        key.chmod(0o400)
        process = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={munge}/munge.sock",
             f"--key-file={key}", f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
             f"--seed-file={munge}/munged.seed"], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pids.append(process.pid)
        self.wait(lambda: (munge / "munge.sock").exists(), 10, "munged did not open its socket")
        gres = f" Gres=gpu:{gpus}" if gpus else ""
        lines = [f"NodeName={n.hostname} NodeAddr={n.ip} CPUs={cpus}{gres} State=UNKNOWN"
                 for n in self.net.nodes]
        self.conf.write_text(CONF.format(root=self.slurm, head_ip=self.net.nodes[0].ip,
                                         nodes="\n".join(lines)))
        self.spawn(self.net.nodes[0], ["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        for node in self.net.nodes:
            self.spawn(node, ["slurmd", "-D", "-N", node.hostname, "-f", str(self.conf)],
                       f"slurmd-{node.hostname}.out")
        self.wait(self.all_idle, 60, f"the Slurm nodes did not come up: see {self.slurm}/*.log")

    def run(self, args: List[str], env: Optional[Dict[str, str]] = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """A Slurm client command on node-0 (the submit host)."""
        return subprocess.run(self.net.enter(self.net.nodes[0]) + args, env=self.env(env),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def all_idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=20)
        states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
        return out.returncode == 0 and len(states) == len(self.net.nodes) and \
            all(state == "idle" for state in states.values())

    def sbatch(self, script: Path, workdir: Path, env: Dict[str, str], *options: str,
               timeout: float = 400) -> subprocess.CompletedProcess:
        """Submit the script and wait for its end: sbatch --wait exits with the job's status
        (options override the script's #SBATCH lines)."""
        return self.run(["sbatch", "--wait", f"--chdir={workdir}", *options, str(script)], env,
                        timeout)

    @staticmethod
    def wait(ready, timeout: float, problem: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(problem)

    def down(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.killpg(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(1)
        for pid in self.pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.pids = []
        self.net.down()  # every process left in the hosts' namespaces, then the namespaces
