"""What the stand-in verl.trainer.main_ppo does in artifacts mode: print a real-format training
log for the cluster preflight found, and write TensorBoard, rollouts and checkpoint files
where the overrides point (tests only).

Like verl 0.6.0 it honours trainer.save_freq (and saves the last step) and
trainer.resume_mode=resume_path (it fails if that global_step_N folder is absent).
STANDIN_STEP_S=S: each step's metrics line S seconds after the one before (a run to follow).
STANDIN_STOP_AFTER=K: after step K's files, touch $STANDIN_DUMP and sleep until killed, as a
run that a preemption is about to stop (ignored by a run that does not train step K)."""
import json
import os
import time
from pathlib import Path

import synthrun
from twgrpo.run.profile import load_profile


def main(argv) -> int:
    overrides = dict(a.split("=", 1) for a in argv if "=" in a)
    run_dir = Path(overrides["trainer.default_local_dir"]).parent
    record = json.loads((run_dir / "run.json").read_text())
    profile = load_profile(record["profile"]["path"])
    workers = json.loads((run_dir / "preflight.json").read_text())["workers"]
    hosts = [{"hostname": w["hostname"], "ip": w["node_ip"], "node_id": w["node_id"],
              "gpus": profile.GPUS_PER_NODE if w.get("gpu_node", True) else 0} for w in workers]
    target = profile.TARGET_STEPS
    resume_from = None
    if overrides.get("trainer.resume_mode") == "resume_path":
        resume_from = overrides["trainer.resume_from_path"]
        if not Path(resume_from, "actor").is_dir():
            print(f"Traceback (most recent call last):\nFileNotFoundError: {resume_from}", flush=True)
            return 1
    first = int(resume_from.rsplit("global_step_", 1)[1]) + 1 if resume_from else 1
    stop = int(os.environ.get("STANDIN_STOP_AFTER") or target)
    stop = stop if first <= stop <= target else target  # a step this run does not train: none
    save_freq = int(overrides["trainer.save_freq"])
    saves = [s for s in range(first, stop + 1) if s % save_freq == 0 or s == target]
    options = dict(first_step=first, last_step=stop, resume_from=resume_from)
    scratch = run_dir / ".standin"
    synthrun.write_run(scratch, profile, record["run_id"], record["storage_root"], hosts,
                       with_log=False, save_steps=saves, **options)
    for name in ("tensorboard", "rollouts", "checkpoints"):
        if (scratch / name).exists():
            os.replace(scratch / name, run_dir / name)
    pace = float(os.environ.get("STANDIN_STEP_S") or 0)  # seconds per step, as a slow run
    for line in synthrun.training_log(hosts, [h["gpus"] for h in hosts], target,
                                      str(run_dir), **options):
        if pace and " - training/global_step:" in line:
            time.sleep(pace)
            line += f" - timing_s/step:{pace:.3f}"  # as verl's metrics line says it
        print(line, flush=True)
    for leftover in scratch.iterdir():
        leftover.unlink()
    scratch.rmdir()
    if stop < target:
        open(os.environ["STANDIN_DUMP"], "w").close()
        while True:
            time.sleep(1)
    if os.environ.get("STANDIN_FAULT") == "missing-shard":  # a rank that never saved
        world = profile.NODES * profile.GPUS_PER_NODE
        last = run_dir / "checkpoints" / f"global_step_{profile.TARGET_STEPS}" / "actor"
        (last / f"optim_world_size_{world}_rank_{world - 1}.pt").unlink()
    if os.environ.get("STANDIN_FAULT") == "fill-disk":  # the runs volume fills up after training
        # The launcher's lines after training (the phase's end) then always fit in driver.log's
        # last page, while no new file (verification.json, FAILED) does; without it, whether
        # that line fits depends on where driver.log happened to end.
        start_a_page(run_dir / "driver.log")
        fill(run_dir / ".filler")
    if os.environ.get("STANDIN_FAULT") == "empty-success":  # a SUCCESS postflight did not write
        (run_dir / "SUCCESS").touch()
    return 0


def start_a_page(log: Path) -> None:
    """Print lines so that log, where the launcher's tee copies this output, ends just past a
    page boundary: its last page has room for a page less one byte. Waits for the tee."""
    page = os.sysconf("SC_PAGE_SIZE")
    mark = b"standin: the runs volume fills up now\n"
    print(mark.decode(), end="", flush=True)
    wait_until(lambda: log.read_bytes().endswith(mark))
    size = log.stat().st_size
    dots = (1 - size - len("standin: \n")) % page  # the line takes log's size to 1 mod page
    print("standin: " + "." * dots, flush=True)
    wait_until(lambda: log.stat().st_size % page == 1)


def wait_until(ready, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.01)


def fill(path: Path) -> None:
    """Write zeros to path until the file system says it is full."""
    block = b"\0" * (64 << 10)
    with open(path, "wb", buffering=0) as stream:
        try:
            while True:
                stream.write(block)
        except OSError:
            pass
    with open(path.with_name(path.name + "-small"), "wb", buffering=0) as stream:
        try:  # the last partial page, so not even a small record fits
            while True:
                stream.write(b"\0" * 512)
        except OSError:
            pass
