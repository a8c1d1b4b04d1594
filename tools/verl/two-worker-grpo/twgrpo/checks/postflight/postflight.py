"""The postflight phase: judge a finished run from the files in its run folder alone.

Runs anywhere with python3 (no ray, torch or tensorboard). Writes actor-placement.json and
verification.json atomically every time, and SUCCESS only when every check passed. It never
deletes anything, so it can be run again from the prep box (`make postflight RUN_ID=...`).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import audit, health, launcher_records, readahead, startreads, stopped, validation
from ..checkpoint import checkpoint, fanout, shards
from ..placement import placement
from ..inputs.again import check_inputs_unchanged
from ..resume import resumed
from ..watch import stall
from .command_record import check_resolved_command
from .rollouts import check_rollouts
from ...run import aside, budget, humane, typed
from ...formats import lines, tfevents, trainlog
from ...run.findings import (Check, CheckResult, Finding, Skip, UsageError, finding, mismatch,
                            phase_record, utc_now)
from ...run.phase import run_phase
from ...run.profile import Profile
from ...run.records import read_json, write_json, write_new_text
from ...run.runfolder import NAME, record_phase
from ...run.runfolder import RunFolder

REQUIRED_SCALARS = ("training/global_step", "actor/pg_loss", "actor/grad_norm", "actor/lr",
                    "critic/score/mean")


@dataclasses.dataclass
class PostflightContext:
    profile: Profile
    run_dir: Path
    run_id: str
    training_log: Path
    world_size: int
    evidence: Dict[str, Any] = dataclasses.field(default_factory=dict)
    placement_record: Dict[str, Any] = dataclasses.field(default_factory=dict)
    lineage: Any = None  # a resumed run's record (resumed.py); None for a fresh run
    fan_out: bool = False  # in-job: shard checks spread over the Ray cluster (fanout.py)
    stop: Any = None     # a PREEMPTED run's stop (stopped.py): judged up to its checkpoint
    ahead: Any = None    # the shard check, begun before the first check (checkpoint/ahead.py)
    rollouts_ahead: Any = None  # the rollout files read by worker processes (rollouts.start_ahead)
    scalars_ahead: Any = None  # the event files read by a worker process (readahead.Task)
    preflight_ahead: Any = None  # preflight.json's placement fields (a readahead.Task)
    log_ahead: Any = None  # the training log's segments, scanned by worker processes (Tasks)
    log_cut_at: int = 0  # the log's size when its segments were cut
    writes: bool = False  # the records are written (not an audit, nor a run without its checkpoint)
    placement_aside: Any = None  # actor-placement.json, begun as rank placement ends (run/aside.py)
    _scan: Optional[trainlog.LogScan] = None
    _scalars: Optional[Dict[Any, tfevents.Scalars]] = None

    def scalars(self, keep: Optional[Tuple[str, ...]] = None,
                keep_step: Optional[int] = None) -> tfevents.Scalars:
        """TensorBoard's scalars as a check asks for them (tfevents.load_scalars's keep and
        keep_step). Every view the checks ask for is read in one pass over the event files, the
        first time one is asked for: a 100,000-step file is read once, not three times."""
        if self._scalars is None:
            views = self.scalar_views()
            if self.scalars_ahead is not None:  # a worker reads them: read rollouts meanwhile
                while not self.scalars_ahead.take(wait=False) and self.rollouts_ahead is not None \
                        and self.rollouts_ahead.take_back_one():
                    pass
                loaded = self.scalars_ahead.answer()
            else:
                loaded = tfevents.load_views(RunFolder(self.run_dir).tensorboard, views)
            self._scalars = {view: scalars for view, scalars in zip(views, loaded)}
        if (keep, keep_step) not in self._scalars:
            self._scalars[(keep, keep_step)] = tfevents.load_scalars(
                RunFolder(self.run_dir).tensorboard, keep, keep_step)
        return self._scalars[(keep, keep_step)]

    def scalar_views(self) -> List[tfevents.View]:
        """The views of the scalars the checks ask for (scalars())."""
        p = self.profile
        views: List[tfevents.View] = [(REQUIRED_SCALARS, self.steps), (health.TAGS, None)]
        if p.TEST_FREQ >= 0 or p.VAL_BEFORE_TRAIN == "true" or self.lineage is not None:
            views.append((None, None))  # validation's and a resumed run's: every tag
        return views

    @property
    def steps(self) -> int:
        """The target step, or a stopped run's last complete checkpoint."""
        return self.stop.step if self.stop is not None else self.profile.TARGET_STEPS

    @property
    def first_step(self) -> int:
        """1, or for a resumed run the step after the checkpoint it started from."""
        return self.lineage["step"] + 1 if isinstance(self.lineage, dict) else 1

    def scan(self) -> trainlog.LogScan:
        if self._scan is None:
            if not self.training_log.is_file():
                raise Skip("no training log")
            keep = budget.of_profile(self.profile).evidence
            path = str(self.training_log)
            size = os.path.getsize(path)
            if self.log_ahead and size == self.log_cut_at:
                self._scan = trainlog.join_or_scan(readahead.answers(self.log_ahead), path, size,
                                                   keep=keep)
            else:
                self._scan = trainlog.scan_log(path, keep=keep)
        return self._scan

    def preflight(self) -> Dict[str, Any]:
        """placement.read_preflight's answer: a worker's where one was handed it (run())."""
        if self.preflight_ahead is None:
            self.preflight_ahead = readahead.Task(None, placement.read_preflight, RunFolder(
                self.run_dir).preflight_json, budget.of_profile(self.profile))
        return self.preflight_ahead.answer()


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
        found.append(finding("POST-E030", NAME.training_log, f"{scan.long_count - len(scan.long_lines)} "
                             "more over-long lines not shown"))
    if scan.dropped:
        found.append(finding("POST-E033", NAME.training_log, f"{scan.dropped} evidence values past the "
                             f"first {scan.most} were not kept: more than this run's budget "
                             f"({budget.of_profile(ctx.profile).ranks} ranks x "
                             f"{budget.EVIDENCE_PER_RANK}, {ctx.profile.TARGET_STEPS} steps x "
                             f"{budget.EVIDENCE_PER_STEP}, {budget.EVIDENCE_BASE} more); the log "
                             "holds repeated or foreign evidence"))
    return found


def check_fatal_markers(ctx: PostflightContext) -> List[Finding]:
    scan = ctx.scan()
    ctx.evidence["fatal_markers"] = scan.fatal_count
    return [finding("POST-E002", f"training.log:{line}", f"{name}: {text}")
            for line, name, text in scan.fatal] + (
        [finding("POST-E002", NAME.training_log, f"{scan.fatal_count - len(scan.fatal)} more fatal "
                 "lines not shown")] if scan.fatal_count > len(scan.fatal) else [])


def check_completion_markers(ctx: PostflightContext) -> List[Finding]:
    scan = ctx.scan()
    found = []
    if scan.validated_line is None:
        found.append(finding("POST-E003", NAME.training_log, f"no '{trainlog.VALIDATED}' line"))
    if scan.total_steps != {ctx.steps}:
        found.append(mismatch("POST-E004", NAME.training_log, "'Total training steps:' values",
                              [ctx.steps], sorted(scan.total_steps) or "none"))
    if ctx.steps not in scan.global_steps:
        found.append(finding("POST-E005", NAME.training_log, f"no global_step_{ctx.steps} (seen: "
                             f"{sorted(scan.global_steps)[-5:] or 'none'})"))
    ctx.evidence["completion"] = {"validated_line": scan.validated_line,
                                  "total_steps": sorted(scan.total_steps),
                                  "global_steps": sorted(scan.global_steps)[-10:]}
    return found


def check_completion_or_stop(ctx: PostflightContext) -> List[Finding]:
    """A PREEMPTED run is judged up to its checkpoint, and says what stopping left missing."""
    return stopped.check_stopped(ctx) if ctx.stop is not None else check_completion_markers(ctx)


def check_inputs_record(ctx: PostflightContext) -> List[Finding]:
    """SUCCESS needs every phase: the inputs check the launcher ran must have passed too."""
    path = RunFolder(ctx.run_dir).inputs_json
    try:
        status = read_json(path, budget.of_profile(ctx.profile).record_bytes).get("status")  # as runverdict
    except (OSError, ValueError, AttributeError) as exc:
        return [finding("POST-E041", str(path), f"cannot read the inputs record ({exc})")]
    if status != "passed":
        return [finding("POST-E041", str(path), f"inputs status is {typed.shown(status)}, "
                        "not 'passed'")]
    return launcher_records.check_inputs_evidence(ctx)


def check_rank_placement(ctx: PostflightContext) -> List[Finding]:
    try:
        preflight = ctx.preflight()
    except (placement.Unreadable, RecursionError) as exc:
        return [finding("POST-E007", str(RunFolder(ctx.run_dir).preflight_json),
                        f"cannot read preflight.json ({exc}); ranks cannot be mapped to nodes")]
    if not isinstance(preflight, dict):
        return [finding("POST-E090", str(RunFolder(ctx.run_dir).preflight_json), f"holds {typed.kind(preflight)}, "
                        "not a JSON object: ranks cannot be mapped to nodes")]
    wrong = typed.Problems()
    preflight = typed.conform(preflight, typed.PLACING_PREFLIGHT, "", wrong, budget.of_profile(ctx.profile).items)
    found = [finding("POST-E090", str(RunFolder(ctx.run_dir).preflight_json), "left out, of the wrong "
                     f"type: {'; '.join(wrong)}" + (f" (and {wrong.count - len(wrong)} more)"
                                                     if wrong.count > len(wrong) else ""))
             ] if wrong.count else []
    if preflight.get("status") != "passed":
        found.append(finding("POST-E007", NAME.preflight_json, f"preflight status is "
                             f"{typed.shown(preflight.get('status'))}, not 'passed'"))
    problems, record = placement.place_ranks(ctx.scan(), preflight, ctx.world_size,
                                             ctx.profile.NODES, ctx.profile.GPUS_PER_NODE,
                                             ctx.profile.NCCL_TRANSPORT)
    found += problems
    ctx.placement_record = record
    if ctx.writes:  # a child writes it while the checks after this one run; Ray's threads: no fork
        rows = 0 if ctx.fan_out else len(record.get("actors", ()))
        ctx.placement_aside = aside.Aside(RunFolder(ctx.run_dir).actor_placement_json,
                                          placement_record(ctx, found), rows)
    return found


def check_tensorboard(ctx: PostflightContext) -> List[Finding]:
    folder = RunFolder(ctx.run_dir).tensorboard
    scalars = ctx.scalars(REQUIRED_SCALARS, ctx.steps)
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


def check_checkpoint(ctx: PostflightContext) -> List[Finding]:
    audit.require_checkpoints(ctx.run_dir)
    steps = ctx.steps
    check_files = (fanout.check_files if ctx.fan_out else
                   ctx.ahead.check_files if ctx.ahead is not None else shards.check_files)
    found, evidence = checkpoint.step_findings(ctx.run_dir, steps, ctx.world_size, check_files)
    tracker = RunFolder(ctx.run_dir).checkpoints / "latest_checkpointed_iteration.txt"
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
    Check("completion-markers", check_completion_or_stop, needs=LOGGED),
    Check("resolved-command", check_resolved_command),
    Check("inputs-record", check_inputs_record),
    Check("inputs-unchanged", check_inputs_unchanged),
    Check("launcher-records", launcher_records.check_launcher_records),
    Check("rank-placement", check_rank_placement, needs=LOGGED),
    Check("tensorboard-scalars", check_tensorboard),
    Check("validation", validation.check_validation),
    Check("rollouts", check_rollouts),
    Check("checkpoint", check_checkpoint),
    Check("resume", resumed.check_resumed_run, needs=LOGGED),
    Check("fatal-causes", health.check_fatal_causes, needs=LOGGED),
    Check("scalars-finite", health.check_scalars_finite, needs=("tensorboard-scalars",)),
    Check("reward-sanity", health.check_reward_sanity),
    Check("stall", stall.check_stall),
]


def placement_record(ctx: PostflightContext, found: List[Finding]) -> Dict[str, Any]:
    """actor-placement.json: the rank-placement check's record, its findings and verdict."""
    passed = CheckResult("rank-placement", found).passed
    return {**ctx.placement_record, "status": "passed" if passed else "failed",
            "phase": "distributed_rank_placement", "source": "training_log", "run_id": ctx.run_id,
            "checked_at": utc_now(), "findings": [f.to_json() for f in found]}


def run(folder: RunFolder, profile: Profile, *, training_log: Optional[Path] = None,
        world_size: Optional[int] = None, audit_only: bool = False, fan_out: bool = False) -> int:
    """Judge the run in folder. training_log: default the folder's; world_size: default the
    profile's; audit_only: the same checks, nothing written, no marker moved (exit 3: checkpoint
    not here); fan_out: check the checkpoint's shards on every node of the Ray cluster."""
    run_dir, run_id = folder.path, folder.run_id
    if not run_dir.is_dir():
        raise UsageError(f"no run folder {run_dir}: set RUN_ID= to a run under PREP_ROOT= "
                         "(make runs lists them)")
    world = world_size or profile.world_size
    ctx = PostflightContext(profile, run_dir, run_id, training_log or folder.training_log, world)
    ctx.lineage = resumed.lineage_in(run_dir)
    ctx.fan_out = fan_out
    ctx.stop = stopped.stop_point(run_dir)
    own = None  # postflight's own worker processes (readahead.py), where the shard check has none
    if not ctx.fan_out:  # long reads are begun in other processes while the checks run
        own = startreads.start_reads(ctx)
    header = (f"run {run_id}, profile {profile.PROFILE_NAME}: "
              f"{humane.topology(profile.NODES, profile.GPUS_PER_NODE, profile.GPU_MODEL)}, "
              f"{humane.plural(profile.TARGET_STEPS, 'step')}")
    partial = audit.checkpoint_absent(run_dir)  # judged, but never a reason to write
    record = lambda: {"run_id": run_id, "profile": profile.to_json(),  # noqa: E731
                      "world_size": world, "target_steps": profile.TARGET_STEPS,
                      "evidence": ctx.evidence}
    ctx.writes = not (audit_only or partial)
    try:
        code, results = run_phase("postflight", header, CHECKS, ctx,
                                  None if audit_only or partial else folder.verification_json,
                                  record)
        if ctx.placement_aside is not None:  # actor-placement.json, begun in a child: in place
            ctx.placement_aside.wait()
    finally:
        if ctx.placement_aside is not None:  # ended early (an error, ^C): nothing put in place
            ctx.placement_aside.cancel()
        if own is not None:
            own.close()
    if audit_only or partial:
        if audit_only or code == 0:
            return audit.conclude(run_dir, code, results, audit_only)
        record_phase(folder.verification_json, phase_record("postflight", results, **record()))
    if ctx.placement_aside is None:  # not begun: rank placement ended early, or nothing written
        placement_check = next(r for r in results if r.name == "rank-placement")
        write_json(folder.actor_placement_json, placement_record(ctx, placement_check.findings))
    if ctx.stop is not None:
        print(f"postflight: PREEMPTED (resumable from step {ctx.stop.step}): {ctx.stop.sentence()}; "
              f"resume with a new RUN_ID and {ctx.stop.resume_line()}", flush=True)
    success = folder.success
    code = audit.unproven(run_dir, code)  # passed checks, but the run's records cannot prove it
    if code == 0:
        if write_new_text(success, utc_now() + "\n"):
            print(f"postflight: wrote {success}")
        else:
            print(f"postflight: {success} already exists; kept as it is")
    return code
