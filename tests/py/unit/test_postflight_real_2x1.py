"""Postflight on the artifacts of a real two-host verl 0.6.0 run (make smoke-2x1 on one H200:
tests/fixtures/real-smoke-run-2x1/), and on fault-injected copies: each fault raises its
finding ids and nothing else fails. Rank placement here was proved on real multi-node logs:
one rank per host, NCCL over Socket on each host's own IP with IB disabled, Gloo's full mesh."""
import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from twgrpo.formats import tfevents
from twgrpo.cli import main
from verification import failed_ids

ARCHIVE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run-2x1").glob("smoke-2x1-*.tar.xz"))
NAME = ARCHIVE.name[:-len(".tar.xz")]
with tarfile.open(ARCHIVE) as _archive:  # node-1's rank: its worker's pid in Ray's line prefix
    PID = re.search(rb"\(WorkerDict pid=(\d+), ip=10\.231\.0\.11\)",
                    _archive.extractfile(f"{NAME}/training.log").read()).group(1).decode()
RANK1 = re.compile(rf"^.*\(WorkerDict pid={PID}, ip=10\.231\.0\.11\).*$", re.M)
DAY = re.search(r"-(\d{4})(\d\d)(\d\d)T", NAME).expand(r"\1-\2-\3T")  # the RUN_ID's date


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    folder = tmp_path_factory.mktemp("real-2x1")
    with tarfile.open(ARCHIVE) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(folder, filter="data")
        else:  # Python before 3.11.4: the archive is ours, its members plain files
            archive.extractall(folder)
    return folder / NAME


@pytest.fixture
def run(unpacked, tmp_path):
    copy = tmp_path / NAME
    shutil.copytree(unpacked, copy)
    for name in ("SUCCESS", "verification.json", "actor-placement.json"):
        (copy / name).unlink()  # the verdict is re-derived from the evidence
    return copy



def test_the_archive_holds_the_run_as_it_ended(unpacked):
    assert (unpacked / "SUCCESS").read_text().startswith(DAY)  # when postflight passed
    assert json.loads((unpacked / "run.json").read_text())["run_id"] == NAME
    placement = json.loads((unpacked / "actor-placement.json").read_text())
    assert placement["status"] == "passed"


def test_the_real_two_host_run_passes_postflight_with_one_rank_per_host(run):
    assert main(["postflight", "--output-dir", str(run)]) == 0
    assert (run / "SUCCESS").exists()
    placement = json.loads((run / "actor-placement.json").read_text())
    actors = placement["actors"]
    assert [(a["rank"], a["hostname"], a["node_ip"]) for a in actors] == [
        (0, "node-0", "10.231.0.10"), (1, "node-1", "10.231.0.11")]
    assert actors[0]["node_id"] != actors[1]["node_id"]
    assert all(a["nccl_transport"] == "Socket" and a["rdma_disabled"] is True
               and a["connected_peer_ranks"] == 1 for a in actors)
    assert {(a["cuda_dev"], a["bus_id"]) for a in actors} == {(0, "60")}  # the one shared GPU
    assert sorted(placement["node_counts"].values()) == [1, 1]
    preflight = json.loads((run / "preflight.json").read_text())
    assert sorted(w["hostname"] for w in preflight["workers"]) == ["node-0", "node-1"]
    shards = sorted(p.name for p in (run / "checkpoints/global_step_2/actor").glob("*.pt"))
    assert shards == [f"{kind}_world_size_2_rank_{r}.pt" for kind in ("extra_state", "model", "optim")
                      for r in (0, 1)]


def rewrite_rank1(run, old, new):
    """Change node-1's rank lines only; the other host's lines stay as they were."""
    path = run / "training.log"
    text = path.read_text()
    changed = RANK1.sub(lambda m: m.group(0).replace(old, new), text)
    assert changed != text, old
    path.write_text(changed)


def move_rank1_to_node0(run):
    """As if rank 1 had run on node-0: its host name, its Socket IP, no ip= in Ray's prefix."""
    rewrite_rank1(run, f"node-1:{PID}:", f"node-0:{PID}:")
    rewrite_rank1(run, "eth0:10.231.0.11<0>", "eth0:10.231.0.10<0>")
    rewrite_rank1(run, ", ip=10.231.0.11)", ")")


def drop_rank1_complete(run):
    path = run / "training.log"
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not ("rank 1 nranks 2" in line and "Init COMPLETE" in line)]
    assert len(kept) == len(lines) - 1
    path.write_text("".join(kept))


FAULTS = {
    "a rank moved to the other host": (move_rank1_to_node0, {"POST-E011"}),
    "rank 1 without Init COMPLETE": (drop_rank1_complete, {"POST-E008"}),
    "IB enabled on one host": (lambda r: rewrite_rank1(r, "NCCL_IB_DISABLE set by environment to 1.",
                                                       "NCCL_IB_DISABLE set by environment to 0."), {"POST-E013"}),
    "Socket on the other host's IP": (lambda r: rewrite_rank1(r, "eth0:10.231.0.11<0>", "eth0:10.231.0.10<0>"),
                                      {"POST-E013"}),
    # A rank on a host preflight never probed: placement cannot be proved, and node-1 has no rank.
    "a host preflight never saw": (lambda r: rewrite_rank1(r, f"node-1:{PID}:", f"node-7:{PID}:"),
                                   {"POST-E010", "POST-E011"}),
    "no Gloo full mesh on one host": (lambda r: rewrite_rank1(r, "INFO Rank 1 is connected to 1.",
                                                              "INFO Rank 1 is connected to 0."), {"POST-E012"}),
    "a missing rank shard": (lambda r: (r / "checkpoints/global_step_2/actor/optim_world_size_2_rank_1.pt").unlink(),
                             {"POST-E021"}),
}


@pytest.mark.parametrize("name", FAULTS)
def test_a_fault_in_real_two_host_artifacts_raises_its_findings(run, name):
    inject, expected = FAULTS[name]
    inject(run)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == expected
    assert not (run / "SUCCESS").exists()


def test_every_scalar_of_the_two_host_event_file_matches_tensorboard(run):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    ours = tfevents.load_scalars(run / "tensorboard")
    acc = accumulator.EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "training/global_step" in tags and len(tags) == len(ours.values)
    for tag in tags:
        theirs = {e.step: e.value for e in acc.Scalars(tag)}
        assert ours.values[tag] == pytest.approx(theirs, nan_ok=True), tag
