"""Two real multi-node failures on the GPU machine's two namespaced hosts (make smoke-2x1 with
--fault; tests/fixtures/real-2x1-faults/README.md): a peer NCCL cannot reach, stopped in
preflight by reachability and the collective probe before any training, and a host whose verl
workers hung after step 1, stopped by the training watchdog with the evidence of both nodes.
Tests read copies; postflight judges the hung run again from its files."""
import json
from pathlib import Path

import pytest
from twgrpo.checks.rounds import collective
from twgrpo.cli import main
from twgrpo.run.runverdict import latest_verdict
from twgrpo.run.runfolder import RunFolder
from verification import failed_ids
from realruns import copy_runs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real-2x1-faults"
BLOCKED = "smoke-2x1-20261203T145217Z-468"
HUNG = "smoke-2x1-20261203T145315Z-2423"
NODE0, NODE1 = "node 0 (head node-0 10.231.0.10)", "node 1 (worker node-1 10.231.0.11)"


@pytest.fixture
def root(tmp_path):
    return copy_runs(FIXTURES, (BLOCKED, HUNG), tmp_path)


def errors(record):
    return {(f["id"], f["obj"]) for c in record["checks"] for f in c["findings"] if f["level"] == "error"}


def test_the_blocked_peer_failed_preflight_on_its_node_before_any_training(root):
    run = RunFolder.at(root, BLOCKED).path
    record = json.loads((run / "preflight.json").read_text())
    assert errors(record) == {("PRE-E046", NODE1), ("PRE-E070", f"{NODE0} rank 0"),
                              ("PRE-E071", f"{NODE1} rank 1")}
    messages = {f["id"]: f["message"] for c in record["checks"] for f in c["findings"]}
    assert "NCCL WARN socketStartConnect: connect to 10.232.0.11" in messages["PRE-E070"]
    assert "NET/Socket : Using [0]eth1:10.232.0.11<0>" in messages["PRE-E071"]
    # rank 0 failed 3 s in; the probe gave rank 1 10 s more, not the whole 30 + 15 s
    assert record["collective"]["backend"] == "nccl+gloo" and record["collective"]["seconds"] < 20
    assert "when it stopped waiting (14 s)" in messages["PRE-E071"]
    assert not (run / "training.log").exists()
    assert "phase=preflight" in (run / "FAILED").read_text()
    assert latest_verdict(run).status == "FAILED"


def test_the_blocked_ranks_nccl_lines_come_from_ncclss_own_debug_file(root):
    folder = RunFolder.at(root, BLOCKED).path / "preflight-collective"
    lines = collective.nccl_lines(folder / "nccl-1.log")
    assert any("Bootstrap: Using eth1:10.232.0.11" in line for line in lines), lines
    assert any("NCCL WARN" in line for line in collective.nccl_lines(folder / "nccl-0.log"))


def test_the_healthy_collective_of_the_hung_run_recorded_ncclss_bus_bandwidth(root):
    record = json.loads((RunFolder.at(root, HUNG).path / "preflight.json").read_text())["collective"]
    assert [r["stage"] for r in record["ranks"]] == ["done", "done"]
    assert record["bus_gbps"] > 0.1 and record["seconds"] < 30


def test_the_hung_run_was_stopped_by_the_watchdog_after_step_1(root, capsys):
    run = RunFolder.at(root, HUNG).path
    assert "(POST-E129) the training watchdog stopped a stalled training" in (run / "FAILED").read_text()
    assert main(["postflight", "--storage-root", str(root), "--run-id", HUNG]) == 1
    assert "POST-E129" in failed_ids(run)
    assert "training stalled after step 1: no step line for 30.2 s (limit 30.0 s)" in capsys.readouterr().out


def test_the_hung_runs_evidence_holds_both_nodes_stacks_and_a_flight_recorder_dump(root):
    run = RunFolder.at(root, HUNG).path
    stall = json.loads((run / "stall.json").read_text())
    assert stall["flight_dumps"] == {"rank_0": 24889}
    assert (run / "nccl-flight" / "rank_0").read_bytes()[:2] == b"\x80\x02"  # torch's pickle
    nodes = json.loads((run / stall["evidence_file"]).read_text())["cluster"]["nodes"]
    assert sorted(nodes) == ["10.231.0.10", "10.231.0.11"]
    workers = [w for node in nodes.values() for w in node["workers"] if "WorkerDict" in w["title"]]
    assert {w["state"] for w in workers} == {"R", "T"}  # rank 0 running, the stopped rank T
    assert all(node["flight_dumps_asked"] for node in nodes.values())
    stacks = "\n".join(s for node in nodes.values() for s in node["py-spy"].values())
    assert "verl/workers/fsdp_workers.py" in stacks  # rank 0, waiting on its stopped peer
    assert "Failed to suspend process" in stacks  # the stopped worker: py-spy cannot stop it again
