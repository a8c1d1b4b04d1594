"""Postflight on the artifacts of a real verl 0.6.0 run (tests/fixtures/real-smoke-run/), and on
fault-injected copies of them: each fault raises its finding id and nothing else fails."""
import json
import shutil
from pathlib import Path

import pytest
import tbevents
from tbwrite import event, record  # a record cut off, which no real writer leaves
from twgrpo.formats import tfevents
from twgrpo.cli import main
from verification import failed_ids

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))
ACTOR = Path("checkpoints/global_step_2/actor")


@pytest.fixture
def run(tmp_path):
    copy = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    for name in ("SUCCESS", "verification.json", "actor-placement.json"):
        (copy / name).unlink()  # the verdict is re-derived from the evidence
    return copy



def edit(path, old, new, count=1):
    text = path.read_text()
    assert text.count(old) >= count, old
    path.write_text(text.replace(old, new))


def test_the_real_run_passes_postflight_from_its_own_record(run, capsys):
    assert main(["postflight", "--output-dir", str(run)]) == 0
    assert (run / "SUCCESS").exists()
    placement = json.loads((run / "actor-placement.json").read_text())
    assert placement["status"] == "passed"
    assert placement["actors"][0]["hostname"] == "vm"
    assert placement["actors"][0]["rdma_disabled"] is True
    evidence = json.loads((run / "verification.json").read_text())["evidence"]
    assert evidence["tensorboard"]["metrics"]["actor/grad_norm"]["value"] == 0.0
    assert evidence["rollouts"]["1"]["rows"] == 8


def append_nan_grad_norm(run):
    path = next((run / "tensorboard").iterdir())  # a later write of step 2 wins
    tbevents.append_event(path, 2, 2.0e9, [("actor/grad_norm", float("nan"))])


def flip_first_record(run):
    path = next((run / "tensorboard").iterdir())
    data = bytearray(path.read_bytes())
    data[14] ^= 0x01
    path.write_bytes(bytes(data))


def damage_member(run):
    path = run / ACTOR / "model_world_size_1_rank_0.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(run):
    path = run / ACTOR / "optim_world_size_1_rank_0.pt"
    path.write_bytes(path.read_bytes()[:100_000])


def drop_lines(path, needle):
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if needle not in line]
    assert len(kept) < len(lines), needle
    path.write_text("".join(kept))


def rows(run, step, change):
    path = run / "rollouts" / f"{step}.jsonl"
    data = [json.loads(line) for line in path.read_text().splitlines()]
    data = change(data)
    path.write_text("".join(json.dumps(r) + "\n" for r in data))


def node_ip(run, ip):
    path = run / "preflight.json"
    data = json.loads(path.read_text())
    data["workers"][0]["node_ip"] = ip
    path.write_text(json.dumps(data))


FAULTS = {
    "missing rank shard": (lambda r: (r / ACTOR / "extra_state_world_size_1_rank_0.pt").unlink(), "POST-E021"),
    "truncated .pt": (truncate, "POST-E022"),
    "zip CRC damage": (damage_member, "POST-E022"),
    "wrong fsdp_config": (lambda r: (r / ACTOR / "fsdp_config.json").write_text('{"FSDP_version": 2, "world_size": 2}'), "POST-E023"),
    "tracker mismatch": (lambda r: (r / "checkpoints/latest_checkpointed_iteration.txt").write_text("1"), "POST-E025"),
    "NaN scalar": (append_nan_grad_norm, "POST-E017"),
    "TB record with bad CRC": (flip_first_record, "POST-E015"),
    "short rollout file": (lambda r: rows(r, 2, lambda d: d[:7]), "POST-E019"),
    "wrong step in a rollout row": (lambda r: rows(r, 1, lambda d: d[:3] + [{**d[3], "step": 2}] + d[4:]), "POST-E020"),
    "NCCL WARN line": (lambda r: open(r / "training.log", "a").write(
        "\x1b[36m(WorkerDict pid=4281)\x1b[0m vm:4281:4290 [0] NCCL WARN Cuda failure 'out of memory'\n"), "POST-E002"),
    "a traceback": (lambda r: open(r / "training.log", "a").write(
        "\x1b[36m(TaskRunner pid=4127)\x1b[0m Traceback (most recent call last):\n"), "POST-E002"),
    "a rank missing COMPLETE": (lambda r: drop_lines(r / "training.log", "- Init COMPLETE"), "POST-E008"),
    "IB not disabled": (lambda r: edit(r / "training.log", "NCCL_IB_DISABLE set by environment to 1.",
                                       "NCCL_IB_DISABLE set by environment to 0."), "POST-E013"),
    "Socket on another IP than the node's": (lambda r: node_ip(r, "10.9.9.9"), "POST-E013"),
    "no Gloo mesh line": (lambda r: drop_lines(r / "training.log", "is connected to"), "POST-E012"),
    "no validate_config line": (lambda r: drop_lines(r / "training.log", "[validate_config]"), "POST-E003"),
    "rollout engine changed": (lambda r: edit(r / "resolved-command.txt", "rollout.name=hf", "rollout.name=sglang"), "POST-E006"),
}


@pytest.mark.parametrize("name", FAULTS)
def test_a_fault_in_real_artifacts_raises_its_finding(run, name):
    inject, expected = FAULTS[name]
    inject(run)
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == {expected}
    assert not (run / "SUCCESS").exists()


def test_a_truncated_last_tensorboard_record_is_a_warning(run, capsys):
    path = next((run / "tensorboard").iterdir())
    with open(path, "ab") as stream:
        stream.write(record(event(3, 3.0e9, [("actor/pg_loss", 1.0)]))[:20])
    assert main(["postflight", "--output-dir", str(run)]) == 0
    assert "(POST-W001)" in capsys.readouterr().out


def test_every_scalar_of_the_real_event_file_matches_tensorboard(run):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    ours = tfevents.load_scalars(run / "tensorboard")
    acc = accumulator.EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert len(tags) == len(ours.values) == 64
    for tag in tags:
        theirs = {e.step: e.value for e in acc.Scalars(tag)}
        assert ours.values[tag] == pytest.approx(theirs, nan_ok=True), tag
