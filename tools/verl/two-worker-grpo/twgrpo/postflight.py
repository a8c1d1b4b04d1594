"""The postflight phase: judge a finished run from the files in its run folder alone.

Runs anywhere with python3 (no ray, torch or tensorboard). Writes actor-placement.json and
verification.json atomically every time, and SUCCESS only when every check passed. It never
deletes anything, so it can be run again from the prep box (`make postflight RUN_ID=...`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import checkpoint, humane, lines, placement, resume, tfevents, trainlog
from .command import training_command
from .findings import Check, Finding, Skip, UsageError, finding, mismatch, utc_now
from .phase import run_phase
from .profile import Profile
from .records import write_json, write_new_text
from .runpaths import run_folder

REQUIRED_SCALARS = ("training/global_step", "actor/pg_loss", "actor/grad_norm", "actor/lr",
                    "critic/score/mean")
MAX_ROLLOUT_ROW = 4 << 20  # a row is a prompt and a response; a longer one is not parsed


@dataclasses.dataclass
class PostflightContext:
    profile: Profile
    run_dir: Path
    run_id: str
    training_log: Path
    world_size: int
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)
    placement_record: Dict[str, Any] = dataclasses.field(default_factory=dict)
    lineage: Any = None  # a resumed run's record (twgrpo/resume.py); None for a fresh run
    _scan: Optional[trainlog.LogScan] = None
    _preflight: Optional[Dict[str, Any]] = None

    @property
    def steps(self) -> int:
        return self.profile.TARGET_STEPS

    @property
    def first_step(self) -> int:
        """1, or for a resumed run the step after the checkpoint it started from."""
        return self.lineage["step"] + 1 if isinstance(self.lineage, dict) else 1

    def scan(self) -> trainlog.LogScan:
        if self._scan is None:
            if not self.training_log.is_file():
                raise Skip("no training log")
            self._scan = trainlog.scan_log(str(self.training_log))
        return self._scan

    def preflight(self) -> Dict[str, Any]:
        if self._preflight is None:
            self._preflight = small_json(self.run_dir / "preflight.json")
        return self._preflight


def small_json(path: Path) -> Any:
    """A JSON record of the run folder, read with a size bound (OSError, ValueError)."""
    return json.loads(lines.read_small(path))


def check_training_log(ctx: PostflightContext) -> List[Finding]:
    if not ctx.training_log.is_file():
        return [finding("POST-E001", str(ctx.training_log), "the training log is missing")]
    scan = ctx.scan()
    ctx.evidence["training_log"] = {"path": str(ctx.training_log), "lines": scan.lines,
                                    "bytes": ctx.training_log.stat().st_size,
                                    "long_lines": scan.long_count}
    found = [finding("POST-E030", f"training.log:{line}", f"line {line} (byte {offset}) is {length} "
                     f"bytes long, more than {trainlog.MAX_LINE}: not read", offset=offset, length=length)
             for line, offset, length in scan.long_lines]
    if scan.long_count > len(scan.long_lines):
        found.append(finding("POST-E030", "training.log", f"{scan.long_count - len(scan.long_lines)} "
                             "more over-long lines not shown"))
    if scan.dropped:
        found.append(finding("POST-E033", "training.log", f"{scan.dropped} evidence values past the "
                             f"first {trainlog.KEEP} were not kept"))
    return found


def check_fatal_markers(ctx: PostflightContext) -> List[Finding]:
    scan = ctx.scan()
    ctx.evidence["fatal_markers"] = scan.fatal_count
    return [finding("POST-E002", f"training.log:{line}", f"{name}: {text}")
            for line, name, text in scan.fatal] + (
        [finding("POST-E002", "training.log", f"{scan.fatal_count - len(scan.fatal)} more fatal "
                 "lines not shown")] if scan.fatal_count > len(scan.fatal) else [])


def check_completion_markers(ctx: PostflightContext) -> List[Finding]:
    scan = ctx.scan()
    found = []
    if scan.validated_line is None:
        found.append(finding("POST-E003", "training.log", f"no '{trainlog.VALIDATED}' line"))
    if scan.total_steps != {ctx.steps}:
        found.append(mismatch("POST-E004", "training.log", "'Total training steps:' values",
                              [ctx.steps], sorted(scan.total_steps) or "none"))
    if ctx.steps not in scan.global_steps:
        found.append(finding("POST-E005", "training.log", f"no global_step_{ctx.steps} (seen: "
                             f"{sorted(scan.global_steps)[-5:] or 'none'})"))
    ctx.evidence["completion"] = {"validated_line": scan.validated_line,
                                  "total_steps": sorted(scan.total_steps),
                                  "global_steps": sorted(scan.global_steps)[-10:]}
    return found


# The overrides that fix the run's topology, size, engine and where its artifacts go.
JUDGED_OVERRIDES = (
    "trainer.nnodes", "trainer.n_gpus_per_node", "trainer.total_training_steps",
    "data.train_batch_size", "actor_rollout_ref.rollout.n", "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.actor.strategy", "+ray_kwargs.ray_init.address",
    "+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_IB_DISABLE",
    "+ray_kwargs.ray_init.runtime_env.env_vars.NCCL_DEBUG",
    "trainer.default_local_dir", "trainer.rollout_data_dir",
)
# Stands for the storage root in the expected command when run.json does not name it.
ANY_ROOT = "/\0storage-root"


def overrides(argv: List[str]) -> Dict[str, str]:
    return dict(arg.split("=", 1) for arg in argv if "=" in arg)


def expected_overrides(profile: Profile, run_id: str, storage_root: Optional[str]) -> Dict[str, str]:
    """key -> value, from the very command the launcher runs (command.training_command)."""
    argv = training_command(profile, Path(storage_root or ANY_ROOT), run_id)
    return {key: value for key, value in overrides(argv).items() if key in JUDGED_OVERRIDES}


def override_matches(want: str, have: Optional[str]) -> bool:
    if have is None:
        return False
    if ANY_ROOT not in want:
        return have == want
    # The job's mount path is unknown here: any absolute path may stand for the storage root.
    pattern = re.escape(want).replace(re.escape(ANY_ROOT), "/.*")
    return re.fullmatch(pattern, have, re.S) is not None


def recorded_storage_root(run_dir: Path) -> Optional[str]:
    try:
        root = small_json(run_dir / "run.json").get("storage_root")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return root if isinstance(root, str) and root.startswith("/") else None


def check_resolved_command(ctx: PostflightContext) -> List[Finding]:
    path = ctx.run_dir / "resolved-command.txt"
    try:
        argv = shlex.split(lines.read_small(path))
    except OSError as exc:
        return [finding("POST-E006", str(path), f"cannot read: {exc.strerror}")]
    except ValueError as exc:
        return [finding("POST-E006", str(path), f"not a shell-quoted command: {exc}")]
    given = overrides(argv)
    found = []
    if argv[:3] != ["python3", "-m", "verl.trainer.main_ppo"]:
        found.append(mismatch("POST-E006", str(path), "command", "python3 -m verl.trainer.main_ppo",
                              " ".join(argv[:3])))
    root = recorded_storage_root(ctx.run_dir)
    for key, want in expected_overrides(ctx.profile, ctx.run_id, root).items():
        have = given.get(key)
        if not override_matches(want, have):
            found.append(mismatch("POST-E006", str(path), key,
                                  want.replace(ANY_ROOT, "<storage root>"), have or "absent"))
    ctx.evidence["resolved_command_overrides"] = len(argv) - 3
    return found


def check_inputs_record(ctx: PostflightContext) -> List[Finding]:
    """SUCCESS needs every phase: the inputs check the launcher ran must have passed too."""
    path = ctx.run_dir / "inputs.json"
    try:
        status = small_json(path).get("status")
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        return [finding("POST-E041", str(path), f"cannot read the inputs record ({exc})")]
    if status != "passed":
        return [finding("POST-E041", str(path), f"inputs status is {status!r}, not 'passed'")]
    return []


def check_rank_placement(ctx: PostflightContext) -> List[Finding]:
    try:
        preflight = ctx.preflight()
    except (OSError, ValueError, RecursionError) as exc:
        return [finding("POST-E007", str(ctx.run_dir / "preflight.json"),
                        f"cannot read preflight.json ({exc}); ranks cannot be mapped to nodes")]
    found = []
    if preflight.get("status") != "passed":
        found.append(finding("POST-E007", "preflight.json", f"preflight status is "
                             f"{preflight.get('status')!r}, not 'passed'"))
    problems, record = placement.place_ranks(ctx.scan(), preflight, ctx.world_size,
                                             ctx.profile.NODES, ctx.profile.GPUS_PER_NODE)
    found += problems
    ctx.placement_record = record
    return found


def check_tensorboard(ctx: PostflightContext) -> List[Finding]:
    folder = ctx.run_dir / "tensorboard"
    scalars = tfevents.load_scalars(folder, keep=REQUIRED_SCALARS, keep_step=ctx.steps)
    found = []
    if not scalars.files:
        return [finding("POST-E014", str(folder), "no events.out.tfevents.* file")]
    for problem in scalars.problems:
        fid = "POST-W001" if problem.kind == "truncated" else "POST-E015"
        found.append(finding(fid, f"{problem.path} record {problem.record}", problem.message,
                             offset=problem.offset))
    more = getattr(scalars.problems, "count", 0) - len(scalars.problems)
    if more > 0:
        found.append(finding("POST-E015", str(folder), f"{more} more damaged records not shown"))
    metrics = {}
    for tag in REQUIRED_SCALARS:
        last = scalars.last_step(tag)
        if last is None:
            found.append(finding("POST-E016", tag, f"scalar missing from {len(scalars.files)} event files"))
            continue
        value = scalars.at(tag, ctx.steps)
        metrics[tag] = {"step": ctx.steps, "value": value, "last_step": last}
        if last < ctx.steps or not tfevents.is_finite(value):
            found.append(finding("POST-E017", tag, f"at step {ctx.steps}: {value!r} (last step "
                                 f"{last}); expected a finite value"))
    ctx.evidence["tensorboard"] = {"event_files": [str(p) for p in scalars.files],
                                   "tags": len(scalars.tags), "metrics": metrics}
    return found


def _rollout_row_problem(row: Any, step: int) -> Optional[str]:
    if not isinstance(row, dict):
        return "not a JSON object"
    if not isinstance(row.get("input"), str) or not row["input"]:
        return "input is missing or empty"
    if not isinstance(row.get("output"), str):
        return "output is missing"
    score = row.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return f"score {score!r} is not a finite number"
    if row.get("step") != step:
        return f"step {row.get('step')!r}, expected {step}"
    return None


class _Notes(list):
    """The first few notes, and how many there were."""
    count = 0

    def append(self, note: str) -> None:
        self.count += 1
        if len(self) < 3:
            super().append(note)


def _rollout_file(path: Path, step: int) -> Tuple[int, "_Notes", List[Finding], List[float]]:
    """(rows, bad-row notes, over-long-row findings, [min, max] score) of one rollout file,
    read line by line in bounded memory."""
    rows, bad, long_rows, low_high = 0, _Notes(), [], []
    for line in lines.read_lines(path, MAX_ROLLOUT_ROW):
        if line.data is None:
            rows += 1
            if len(long_rows) < 3:
                long_rows.append(finding("POST-E031", f"{path} line {line.number}",
                                         f"row of {line.length} bytes at byte {line.offset}: longer than "
                                         f"{MAX_ROLLOUT_ROW} bytes, not read", offset=line.offset))
            continue
        if not line.data.strip():
            continue
        rows += 1
        try:
            text = line.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append(f"line {line.number}: not UTF-8 at byte {line.offset + exc.start}")
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            bad.append(f"line {line.number}: not JSON ({exc})")
            continue
        problem = _rollout_row_problem(row, step)
        if problem:
            bad.append(f"line {line.number}: {problem}")
        else:
            score = float(row["score"])
            low_high = [min(low_high[0], score), max(low_high[1], score)] if low_high else [score, score]
    return rows, bad, long_rows, low_high


def check_rollouts(ctx: PostflightContext) -> List[Finding]:
    expected = ctx.profile.TRAIN_BATCH_SIZE * ctx.profile.ROLLOUT_N
    found, summary = [], {}
    for step in range(ctx.first_step, ctx.steps + 1):
        path = ctx.run_dir / "rollouts" / f"{step}.jsonl"
        try:
            rows, bad, long_rows, low_high = _rollout_file(path, step)
        except OSError as exc:
            found.append(finding("POST-E018", str(path), f"cannot read: {exc.strerror}"))
            continue
        if rows != expected:
            found.append(mismatch("POST-E019", str(path), "rows (train_batch_size x rollout.n)",
                                  expected, rows))
        found += long_rows
        if bad:
            found.append(finding("POST-E020", str(path), f"{bad.count} bad rows: " + "; ".join(bad)))
        summary[str(step)] = {"rows": rows, "score_min": low_high[0] if low_high else None,
                              "score_max": low_high[1] if low_high else None}
    ctx.evidence["rollouts"] = summary
    return found


def check_checkpoint(ctx: PostflightContext) -> List[Finding]:
    steps = ctx.steps
    found, evidence = checkpoint.step_findings(ctx.run_dir, steps, ctx.world_size)
    tracker = ctx.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    try:
        latest = lines.read_small(tracker).strip()
    except OSError as exc:
        latest = f"unreadable ({exc.strerror})"
    except ValueError as exc:
        latest = f"unreadable ({exc})"
    if latest != str(steps):
        found.append(mismatch("POST-E025", str(tracker), "latest checkpointed iteration", steps, latest))
    ctx.evidence["checkpoint"] = evidence
    return found


LOGGED = ("training-log",)
CHECKS = [
    Check("training-log", check_training_log),
    Check("fatal-markers", check_fatal_markers, needs=LOGGED),
    Check("completion-markers", check_completion_markers, needs=LOGGED),
    Check("resolved-command", check_resolved_command),
    Check("inputs-record", check_inputs_record),
    Check("rank-placement", check_rank_placement, needs=LOGGED),
    Check("tensorboard-scalars", check_tensorboard),
    Check("rollouts", check_rollouts),
    Check("checkpoint", check_checkpoint),
    Check("resume", resume.check_resumed_run, needs=LOGGED),
]


def main(args: argparse.Namespace, profile: Profile) -> int:
    run_dir, run_id = run_folder(args)
    if not run_dir.is_dir():
        raise UsageError(f"no run folder {run_dir}: set RUN_ID= to a run under PREP_ROOT= "
                         "(make runs lists them)")
    world = args.world_size or profile.world_size
    ctx = PostflightContext(profile, run_dir, run_id, args.training_log or run_dir / "training.log", world)
    ctx.lineage = resume.lineage_in(run_dir)
    header = (f"run {run_id}, profile {profile.PROFILE_NAME}: "
              f"{humane.topology(profile.NODES, profile.GPUS_PER_NODE, profile.GPU_MODEL)}, "
              f"{humane.plural(profile.TARGET_STEPS, 'step')}")
    code, results = run_phase("postflight", header, CHECKS, ctx, run_dir, "verification.json",
                              lambda: {"run_id": run_id, "profile": profile.to_json(),
                                       "world_size": world, "target_steps": profile.TARGET_STEPS,
                                       "evidence": ctx.evidence})
    placement_findings = next(r for r in results if r.name == "rank-placement")
    write_json(run_dir / "actor-placement.json", {
        **ctx.placement_record, "status": "passed" if placement_findings.passed else "failed",
        "phase": "distributed_rank_placement", "source": "training_log", "run_id": run_id,
        "checked_at": utc_now(), "findings": [f.to_json() for f in placement_findings.findings]})
    success = run_dir / "SUCCESS"
    if code == 0:
        if write_new_text(success, utc_now() + "\n"):
            print(f"postflight: wrote {success}")
        else:
            print(f"postflight: {success} already exists; kept as it is")
    return code
