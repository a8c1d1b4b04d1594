"""The training watchdog (checks/watch/stall.py): its clock, a real process group it stops when the
step lines stop (TERM, then KILL after the grace), one it leaves alone, the evidence it gathers
from a real Ray cluster (a hung actor's stack, the ranks' flight-recorder pipes), and
postflight's finding from its record."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from twgrpo.checks.watch.stall import LogFollower, StallClock
from twgrpo.checks.watch.stall_nodes import request_dumps
from twgrpo.run import command
from twgrpo.cli import main
from verification import failed_ids

REPO = Path(__file__).resolve().parents[3]
VERIFY = REPO / "tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py"
FIXTURE = next((REPO / "tests" / "fixtures" / "real-smoke-run").glob("smoke-*"))


def test_the_first_step_has_its_own_budget_then_the_slowest_step_sets_the_pace():
    clock = StallClock(first_step=100, factor=3, floor=10, last_at=0)
    assert clock.limit() == 100 and not clock.stalled(99) and clock.stalled(101)
    clock.step(1, 90)  # model load and the first rollout: not the pace
    assert clock.limit() == 10
    clock.step(2, 110)  # 20 s per step
    clock.step(4, 130)  # 10 s per step
    assert (clock.slowest, clock.limit()) == (20, 60)
    assert not clock.stalled(189) and clock.stalled(191)
    clock.step(3, 300)  # an older step line changes nothing
    assert clock.last_step == 4


def test_the_follower_reads_complete_lines_only(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("step:1 - training/global_step:1\nstep:2 - trai")
    follower = LogFollower(log)
    assert follower.lines() == ["step:1 - training/global_step:1"]
    with open(log, "a") as stream:
        stream.write("ning/global_step:2\n")
    assert follower.lines() == ["step:2 - training/global_step:2"]
    assert follower.last_line == "step:2 - training/global_step:2"


def phase(run, body, options="--no-cluster", env=None):
    watcher = (f"{sys.executable} -I -B {VERIFY} watch-training --run-dir {run} "
               f"--first-step-seconds 30 --stall-factor 2 --stall-floor 1 --poll 0.2 --kill-grace 2 {options} &")
    return subprocess.Popen(["bash", "-c", f"{watcher}\necho watcher $!\n{body}"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, **(env or {})})


def stopped(training, timeout=90):
    try:
        return training.wait(timeout=timeout)
    finally:
        if training.poll() is None:
            os.killpg(training.pid, 9)


HUNG_PYTHON = f"{sys.executable} -c 'import time\ndef hung_here():\n    time.sleep(300)\nhung_here()'"


def test_a_hung_training_is_stopped_with_its_last_step_and_its_stacks(tmp_path):
    log = tmp_path / "training.log"
    log.touch()
    training = phase(tmp_path, f"echo 'step:1 - training/global_step:1' >> {log}; sleep 0.5\n"
                               f"echo 'step:2 - training/global_step:2 - hung here' >> {log}\n{HUNG_PYTHON}")
    assert stopped(training) == -15  # TERM to the whole phase group
    record = json.loads((tmp_path / "stall.json").read_text())
    assert record["last_step"] == 2
    assert record["last_line"] == "step:2 - training/global_step:2 - hung here"
    assert record["limit_seconds"] >= 1 and record["evidence_file"] == "stall-evidence.json"
    here = json.loads((tmp_path / "stall-evidence.json").read_text())["this_host"]
    assert here["pids"]  # the hung python (bash exec'd it)
    if shutil.which("py-spy"):  # the test venv has it
        assert any("hung_here" in stack for stack in here["py-spy"].values()), here["py-spy"]


def test_a_training_that_ignores_term_is_killed_after_the_grace(tmp_path):
    log = tmp_path / "training.log"
    training = phase(tmp_path, f"trap '' TERM\necho 'step:1 - training/global_step:1' >> {log}\n"
                               "while :; do sleep 0.2; done")
    assert stopped(training) == -9
    assert (tmp_path / "stall.json").is_file()


def test_the_watchdog_asks_each_rank_on_this_node_for_its_flight_recorder_dump(tmp_path):
    prefix = f"{tmp_path}/twgrpo-nccl-run-1-rank_"
    Path(prefix + "0.pipe").touch()  # not a FIFO: never written
    os.mkfifo(prefix + "1.pipe")  # a FIFO nobody reads here: skipped, never blocks
    os.mkfifo(prefix + "2.pipe")
    os.mkfifo(tmp_path / "twgrpo-nccl-other-run-rank_0.pipe")  # another run's rank: not asked
    reader = os.open(prefix + "2.pipe", os.O_RDONLY | os.O_NONBLOCK)  # a rank's NCCL monitor
    other = os.open(tmp_path / "twgrpo-nccl-other-run-rank_0.pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert request_dumps(prefix) == ["twgrpo-nccl-run-1-rank_2.pipe"]
        assert os.read(reader, 16) == b"1\n"
        assert os.read(other, 16) == b""  # never written (no writer: EOF)
    finally:
        os.close(reader)
        os.close(other)
    assert Path(prefix + "0.pipe").read_bytes() == b""
    assert request_dumps(f"{tmp_path}/missing/rank_") == []


def test_the_pipes_are_node_local_and_the_dumps_go_to_the_run_folder():
    env = command.flight_recorder_env(Path("/mnt/v/runs/verl/two-worker-grpo/exp-7"))
    assert env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == "/tmp/twgrpo-nccl-exp-7-rank_"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == "/mnt/v/runs/verl/two-worker-grpo/exp-7/nccl-flight/rank_"


RAY_TRAINING = """
import ray, sys, time
ray.init(address=sys.argv[1], log_to_driver=False)

@ray.remote(num_cpus=0)
class Sleeper:
    def hang_in_a_collective(self):
        time.sleep(300)

actor = Sleeper.remote()
ref = actor.hang_in_a_collective.remote()
time.sleep(2)
with open(sys.argv[2], "a") as log:
    log.write("step:1 - training/global_step:1\\n")
ray.get(ref)
"""


def test_a_stall_on_a_ray_cluster_records_each_nodes_workers_and_their_stacks(tmp_path, ray_head):
    log = tmp_path / "training.log"
    (tmp_path / "train.py").write_text(RAY_TRAINING)
    training = phase(tmp_path, f"{sys.executable} {tmp_path / 'train.py'} {ray_head} {log}",
                     options="--first-step-seconds 60", env={"RAY_ADDRESS": ray_head})
    assert stopped(training, timeout=180) != 0  # Ray's driver turns TERM into exit 1
    cluster = json.loads((tmp_path / "stall-evidence.json").read_text())["cluster"]
    assert "error" not in cluster, cluster
    [node] = cluster["nodes"].values()
    titles = [w["title"] for w in node["workers"]]
    assert any(t.startswith("ray::Sleeper") for t in titles), titles
    stacks = "\n".join(node["py-spy"].values())
    assert "hang_in_a_collective" in stacks, node["py-spy"]


def test_a_training_that_ends_leaves_no_record_and_no_watcher(tmp_path):
    log = tmp_path / "training.log"
    training = phase(tmp_path, f"echo 'step:1 - training/global_step:1' >> {log}; exit 0")
    pid = int(training.stdout.readline().split()[1])
    assert training.wait(timeout=30) == 0
    for _ in range(100):  # the watcher sees its parent gone within a poll
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the watcher outlived its training")
    assert not (tmp_path / "stall.json").exists()


def test_nonsense_limits_are_a_usage_error(tmp_path, capsys):
    assert main(["watch-training", "--run-dir", str(tmp_path), "--stall-factor", "0"]) == 2
    assert "--stall-factor must be positive" in capsys.readouterr().err


def test_postflight_reports_the_stall(tmp_path, capsys):
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    for name in ("SUCCESS", "verification.json", "actor-placement.json"):
        (run / name).unlink()
    (run / "stall.json").write_text(json.dumps({"last_step": 1, "seconds_without_step": 912.0,
                                                "limit_seconds": 900.0, "last_line": "step:1 - x"}))
    assert main(["postflight", "--output-dir", str(run)]) == 1
    assert failed_ids(run) == {"POST-E129"}
    assert "training stalled after step 1: no step line for 912.0 s (limit 900.0 s)" in capsys.readouterr().out


def test_only_verls_metrics_lines_count_as_steps():
    from twgrpo.checks.watch.stall import step_of
    assert step_of("\x1b[36m(TaskRunner pid=5559)\x1b[0m step:2 - global_seqlen/min:878 - "
                   "training/global_step:2 - training/epoch:0") == 2
    assert step_of("step:3 - actor/lr:1e-06 - training/global_step:3") == 3
    # a rollout sample that quotes such text, a mismatched pair, a step line without the metric
    assert step_of("(TaskRunner pid=1) [response] step:9 - training/global_step:999999") is None
    assert step_of("step:4 - training/global_step:5") is None
    assert step_of("step:4 - timing_s/gen:1.2") is None


def test_the_follower_reads_to_the_end_and_starts_again_when_the_log_is_replaced(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("x" * (3 << 20) + "\nstep:1 - training/global_step:1\n")  # a burst of output
    follower = LogFollower(log)
    assert follower.lines()[-1] == "step:1 - training/global_step:1"
    log.unlink()
    log.write_text("step:1 - training/global_step:1\n")  # rotated: a new, shorter file
    assert follower.lines() == ["step:1 - training/global_step:1"]


def test_a_growing_checkpoint_is_a_sign_of_life_not_a_stall(tmp_path):
    from twgrpo.checks.watch.stall import checkpoint_activity
    assert checkpoint_activity(tmp_path) == ()
    actor = tmp_path / "checkpoints" / "global_step_10" / "actor"
    actor.mkdir(parents=True)
    (tmp_path / "checkpoints" / "global_step_9").mkdir()
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x" * 10)
    before = checkpoint_activity(tmp_path)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x" * 20)
    assert before == ("global_step_10", 1, 10) and checkpoint_activity(tmp_path) == ("global_step_10", 1, 20)
    clock = StallClock(first_step=100, factor=5, floor=30, last_at=0)
    clock.step(1, 10)
    assert clock.stalled(41)
    clock.alive_at = 40  # the checkpoint grew at t=40
    assert not clock.stalled(69) and clock.stalled(71)


def test_a_run_that_goes_on_while_the_evidence_is_gathered_is_not_called_stalled(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "nvidia-smi").write_text("#!/bin/sh\nsleep 4\n")  # a slow GPU query
    (stubs / "nvidia-smi").chmod(0o755)
    log = tmp_path / "training.log"
    training = phase(tmp_path, f"echo 'step:1 - training/global_step:1' >> {log}; sleep 1.5\n"
                               f"echo 'step:2 - training/global_step:2' >> {log}; exit 0",
                     env={"PATH": f"{stubs}:{os.environ['PATH']}"})
    assert stopped(training) == 0
    time.sleep(5)  # the watcher's evidence round ends
    assert not (tmp_path / "stall.json").exists() and not (tmp_path / "stall-evidence.json").exists()


def test_a_stall_whose_record_cannot_be_written_still_stops_the_phase(tmp_path, capsys):
    (tmp_path / "stall.json").mkdir()  # something in the way of the record
    log = tmp_path / "training.log"
    training = phase(tmp_path, f"echo 'step:1 - training/global_step:1' >> {log}\n{HUNG_PYTHON}")
    assert stopped(training) == -15
    out = training.stdout.read()
    assert "could not record the evidence" in out and "stopping the phase anyway" in out


def test_a_step_beyond_the_runs_range_is_not_a_step():
    # a printed sample "step:999999 - training/global_step:999999" would otherwise hold the clock
    # at step 999999, so every real step after it looks old and the run reads stalled
    clock = StallClock(first_step=100, factor=3, floor=10, last_at=0, max_step=2)
    clock.step(999999, 50)
    assert clock.last_step == 0 and clock.limit() == 100
    clock.step(1, 60)
    clock.step(2, 80)
    assert (clock.last_step, clock.slowest) == (2, 20)
    assert not clock.stalled(130) and clock.stalled(141)


def test_the_watchdog_reads_its_step_range_from_run_json(tmp_path):
    from twgrpo.checks.watch import stall
    assert stall.max_step(FIXTURE) > 0
    assert stall.max_step(tmp_path) == 0  # no run.json: any step counts
