"""make submit across separate hosts (dev/netcluster.py): a prep host without Ray submits over the
network to the job server of a 2-host x 2-GPU cluster and follows the run to SUCCESS; make stop
from there leaves FAILED with signal=TERM. No host has the rollout adapter on its PYTHONPATH:
the submitted RuntimeEnv brings it to both. Like the other multi-host suites, it builds the test
cluster on a fixed subnet: run one such suite at a time."""
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dev import netcluster

REPO = Path(__file__).resolve().parents[3]
REASON = netcluster.missing_prerequisites()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host Ray cluster: {REASON}")
BUNDLE_REL = Path("tools/verl/two-worker-grpo")


def job_server_missing():
    missing = [name for name in ("aiohttp", "aiohttp_cors", "opencensus", "prometheus_client")
               if importlib.util.find_spec(name) is None]
    return f"the Ray job server needs ray[default] ({', '.join(missing)} missing)" if missing else None


class Site:
    """The cluster, its head's job server address, and the prep host that talks to it."""

    def __init__(self, cluster, prep):
        self.cluster, self.prep = cluster, prep
        self.address = f"http://{cluster.nodes[0].ip}:{netcluster.DASHBOARD_PORT}"
        self.storage = cluster.storage

    def on_prep(self, args, **kw):
        return subprocess.Popen(self.cluster.enter(self.prep) + [sys.executable, *map(str, args)],
                                env=self.cluster.node_env(self.prep), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, **kw)

    def tool(self, command, run_id, *extra, wait=True):
        args = [REPO / "prep" / "submit.py", command, "--address", self.address, "--run-id", run_id]
        if command == "submit":
            args += ["--profile", "test-fixture", "--storage-root", self.storage, "--prep-root",
                     self.storage, "--bundle", self.storage / BUNDLE_REL, "--poll", "1"]
        process = self.on_prep([*args, *extra])
        if not wait:
            return process
        out, _ = process.communicate(timeout=240)
        return process.returncode, out

    def run_dir(self, run_id):
        return self.storage / "runs/verl/two-worker-grpo" / run_id


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = job_server_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("submit2")
    cluster = netcluster.Cluster(root, dashboard=True)

    def prepare(storage):
        subprocess.run([sys.executable, str(REPO / "tests/lib/fixture.py"), str(storage),
                        "--nodes", "2", "--gpus-per-node", "2"], check=True, capture_output=True)
    cluster.up(2, 2, prepare=prepare)  # no PYTHONPATH on any host
    try:
        prep = cluster.add_host(2)  # on the network, no Ray
        cluster.nodes.append(prep)
        cluster.save()
        site = Site(cluster, prep)
        probe = ("import sys, urllib.request; "
                 "urllib.request.urlopen(sys.argv[1] + '/api/version', timeout=5)")
        for _ in range(60):
            if site.on_prep(["-c", probe, site.address]).wait(timeout=30) == 0:
                break
            time.sleep(1)
        else:
            raise RuntimeError(f"no job server at {site.address}: see {root}/n0/ray-start.log")
        yield site
    finally:
        cluster.down()


def test_a_prep_host_submits_to_the_cluster_and_follows_the_run_to_success(site):
    # COLLECTIVE_PROBE=off: the cluster's GPUs are stubs (the probe has its own tests)
    status, out = site.tool("submit", "multi-1", "--var", "COLLECTIVE_PROBE=off",
                            "--var", "STANDIN_MODE=artifacts",
                            "--var", f"STANDIN_LIB={REPO / 'tests' / 'lib'}")
    assert status == 0, out
    topology = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
                if line.startswith("WORKER_TOPOLOGY ")]
    assert sorted(node["hostname"] for node in topology) == ["node-0", "node-1"]
    assert re.search(r"preflight: rollout-engine \.+ ok", out)  # on both hosts, from the RuntimeEnv
    assert f"submit: multi-1: SUCCESS — the run's folder is {site.run_dir('multi-1')}" in out
    assert (site.run_dir("multi-1") / "SUCCESS").is_file()


def test_make_stop_from_the_prep_host_leaves_failed_with_signal_term(site):
    dump = site.storage / "standin-multi-2"
    follower = site.tool("submit", "multi-2", "--var", "COLLECTIVE_PROBE=off",
                         "--var", "STANDIN_MODE=sleep",
                         "--var", f"STANDIN_DUMP={dump}", wait=False)
    for _ in range(240):
        if dump.exists():
            break
        time.sleep(0.5)
    assert dump.exists(), follower.communicate(timeout=30)[0]
    status, out = site.tool("stop", "multi-2")
    assert status == 0, out
    assert "submit: multi-2: STOPPED" in out
    out, _ = follower.communicate(timeout=120)
    assert follower.returncode == 143, out
    failed = (site.run_dir("multi-2") / "FAILED").read_text(encoding="utf-8")
    assert "signal=TERM" in failed.splitlines() and "phase=training" in failed.splitlines()


def test_a_closed_port_on_the_head_is_one_finding_and_its_hint(site):
    head = site.cluster.nodes[0].ip
    process = site.on_prep([REPO / "prep" / "submit.py", "logs", "--address", f"http://{head}:1",
                            "--run-id", "multi-3"])
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out.startswith(f"submit: (SUB-E003) cannot reach the Ray job server at http://{head}:1 (")
    lines = out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("    HINT: "), out  # no traceback
