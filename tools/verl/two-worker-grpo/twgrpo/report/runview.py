"""Everything a report shows about one run folder, read once, bounded, and never trusted.

Each reader returns plain data and adds a finding (RPT-...) when something cannot be read, so
the page and the text summary show what is missing instead of failing or guessing silently.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..formats import bounded, tfevents
from ..run import budget, findinggroups, runrecord, typed
from ..run.findinggroups import Key
from ..run.findings import Finding, finding
from ..run.humane import parse_time
from ..checks.postflight.postflight import REQUIRED_SCALARS
from ..run.runverdict import PHASE_RECORDS, Verdict, failed_fields, latest_verdict
from . import lineage as lineage_view
from .shardlist import checkpoint_shards
from .timeline import Phase, phases_of
from ..run.runfolder import NAME, RunFolder

KEY_SCALARS = REQUIRED_SCALARS + ("critic/rewards/mean", "response_length/mean", "actor/entropy",
                                  "actor/pg_clipfrac", "actor/ppo_kl", "perf/throughput",
                                  "timing_s/step")
MAX_CHARTS = 96          # charts on the page; the rest are named, TensorBoard has them all
# A chart draws each tag's min and max in at most tfevents.BUCKETS step buckets (from every
# value read, in the one pass over the event files), and its last step.
MAX_SAMPLES = 4          # rollout rows shown per step
MAX_SAMPLE_CHARS = 600   # characters of a prompt or response shown
MAX_ROLLOUT_ROWS = 20000  # rows read per rollout file for its score summary, or twice a step's
MAX_FINDINGS = 200
RECORD_OF = dict(PHASE_RECORDS + (("resume", NAME.resume_json),))  # a phase's findings' record
BEFORE_TRAINING = ("resume", "inputs", "preflight")  # launcher phases that end before verl starts
MAX_EVENT_FILES = 256    # event files charted; more are left to TensorBoard
# The rest is the run's own size times a budget per item (run/budget.py):
EVENT_BYTES_BASE = 512 << 20  # TensorBoard files read for charts, all files together, ...
EVENT_BYTES_PER_STEP = 8 << 10  # ... and per step (a step's scalars: 60 tags at ~60 bytes)
ROLLOUT_NAMES_PER_STEP = 4  # names in rollouts/ looked at for the first and last step


@dataclasses.dataclass
class RunView:
    run_dir: Path
    run_id: str
    verdict: Verdict
    run: Dict[str, Any]
    profile: Dict[str, str]
    profile_name: str
    phases: List[Phase]
    records: Dict[str, Dict[str, Any]]
    workers: List[Dict[str, Any]]
    actors: List[Dict[str, Any]]
    series: List[Tuple[str, List[Tuple[int, float]]]]  # charted points (min/max per pixel)
    more_tags: List[str]
    samples: Dict[int, Dict[str, Any]]
    shards: List[Tuple[str, Optional[int], str]]  # one row per step and kind: (pattern, bytes, states)
    findings: List[Tuple[str, Finding]]  # (phase, finding) shown, the report's own under "report"
    finding_counts: Dict[Key, int]  # every finding, by phase and id (findings shows the first few)
    lineage: Optional[lineage_view.Lineage] = None
    reference: Optional[Tuple[str, Dict[str, List[Tuple[int, float]]]]] = None  # reference.py

    def add_findings(self, phase: str, found: List[Finding]) -> None:
        """The report's own findings (never cut by MAX_FINDINGS: a reader raises a few)."""
        for parsed in found:
            take_finding(self.findings, self.finding_counts, phase, parsed, cap=None)

    def finding_groups(self) -> List[findinggroups.Group]:
        return findinggroups.grouped(self.findings, self.finding_counts)

    def finding_total(self) -> int:
        return sum(self.finding_counts.values())

    @staticmethod
    def unshown(group: findinggroups.Group, shown: int) -> str:
        """The words for a group's findings past its first ``shown``: how many, and the record
        they were read from (none for the report's own)."""
        record = RECORD_OF.get(group.where)
        at = f" in {record}" if record else ""
        if not shown:
            return (f"{group.where}: ({group.id}) {group.total:,} not shown (the report shows the "
                    f"records' first {MAX_FINDINGS} findings){at}")
        return f"... and {group.total - shown:,} more ({group.id}) like these{at}"

    def notes(self) -> List[str]:
        return expected_zeros(self)

    def took(self) -> Optional[float]:
        """Seconds from run.json's start to the last sign of life (as make runs counts)."""
        lived = lineage_view.lifetime(self.run_dir, self.run)
        if lived is not None:
            return lived
        start = parse_time(self.run.get("started_at"))
        ends = [parse_time(ph.started) + timedelta(seconds=ph.seconds) for ph in self.phases
                if ph.seconds is not None and parse_time(ph.started)]
        if not ends:
            return None
        first = start or min(parse_time(ph.started) for ph in self.phases if parse_time(ph.started))
        return (max(ends) - first).total_seconds()

    def failed_checks(self) -> str:
        """'postflight: resolved-command, checkpoint', or '' when no check failed."""
        return "; ".join(f"{ph.name}: {', '.join(ph.failed_checks)}" for ph in self.phases
                         if ph.failed_checks)

    def shown(self, obj: str) -> str:
        """A finding's object, relative to the run folder when it lies inside it."""
        prefix = str(self.run_dir).rstrip("/") + "/"
        return obj[len(prefix):] if obj.startswith(prefix) else obj


def _record(run_dir: Path, name: str, problems: List[Finding],
            statuses: Optional[Dict[str, Optional[str]]] = None,
            size: budget.Size = budget.Size(),
            read: Optional[Callable[[List[str]], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """A record held to its schema (run/typed.py): RPT-E002 if it cannot be read at all, one
    RPT-E020 naming the fields of the wrong type or range that the page leaves out. Its status
    goes into statuses in runverdict.record_status's words (each record is parsed once). Its
    bytes, parse cost and items are held to the run's budget (size), not to constants. read:
    how to read it, for run.json (runrecord reads that)."""
    wrong = typed.Problems()
    statuses = {} if statuses is None else statuses
    try:
        record = read(wrong) if read else typed.read_record(
            run_dir / name, typed.SCHEMAS[name], wrong, size.record_bytes, size.record_memory,
            size.items)
    except bounded.Unreadable as exc:
        statuses[name] = None if str(exc) == "missing" else "unreadable"
        if str(exc) != "missing":
            problems.append(finding("RPT-E002", name, f"cannot be read: {exc}"))
        return {}
    statuses[name] = record.get("status") if record.get("status") in ("passed", "failed") \
        else "unreadable"
    if wrong.count:
        more = f" (and {wrong.count - len(wrong)} more)" if wrong.count > len(wrong) else ""
        problems.append(finding("RPT-E020", name, "left out, of the wrong type or range: "
                                + "; ".join(wrong) + more))
    return record


def _finding_from_json(data: Any) -> Optional[Finding]:
    if not isinstance(data, dict):
        return None
    return Finding(str(data.get("id", "?")), str(data.get("obj", "")), str(data.get("message", "")),
                   str(data.get("hint", "")))


def _ordered_tags(tags: List[str]) -> List[str]:
    key = [t for t in KEY_SCALARS if t in tags]
    return key + sorted(t for t in tags if t not in key)


def trained(run_dir: Path) -> bool:
    """False when the run stopped before its training phase (FAILED names resume, inputs or
    preflight): it has no scalars, rollouts or steps to show, and their absence is no finding."""
    return (failed_fields(run_dir) or {}).get("phase") not in BEFORE_TRAINING


def scalar_series(run_dir: Path, problems: List[Finding], size: budget.Size = budget.Size()):
    folder = RunFolder(run_dir).tensorboard
    files, complete = bounded.files_under(folder, "events.out.tfevents.", MAX_EVENT_FILES + 1)
    if not complete:
        problems.append(finding("RPT-E005", "tensorboard/", f"more than {MAX_EVENT_FILES} event "
                                "files or too many other names: no charts; open TensorBoard"))
        return [], []
    if not files:
        if trained(run_dir):  # the launcher makes tensorboard/ before any phase: empty is expected
            problems.append(finding("RPT-E005", "tensorboard/",
                                    "no events.out.tfevents.* file: no charts"))
        return [], []
    total = 0
    for path in files:
        try:
            total += bounded.regular(path).st_size
        except bounded.Unreadable as exc:
            problems.append(finding("RPT-E005", str(path.relative_to(run_dir)), str(exc)))
            return [], []
    most = EVENT_BYTES_BASE + EVENT_BYTES_PER_STEP * size.steps
    if total > most:
        problems.append(finding("RPT-E005", "tensorboard/", f"{total} bytes of event files, more "
                                f"than the {most} the report reads for {size.steps} steps: open "
                                "TensorBoard"))
        return [], []
    scalars = tfevents.load_views(folder, [(None, None)], envelopes=True)[0]
    for problem in scalars.problems[:5]:
        problems.append(finding("RPT-E005", f"{Path(problem.path).name} record {problem.record}",
                                problem.message))
    if scalars.dropped:  # the reader's memory bound on tags (long runs are thinned, not cut)
        problems.append(finding("RPT-E005", "tensorboard/", f"{scalars.dropped} values were not "
                                f"read: their tags came after the first {len(scalars.values)}; "
                                "TensorBoard has them all"))
    tags = _ordered_tags(list(scalars.values))
    series = [(tag, scalars.drawn(tag)) for tag in tags[:MAX_CHARTS]]
    return series, tags[MAX_CHARTS:]


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SAMPLE_CHARS else text[:MAX_SAMPLE_CHARS] + " …"


def rollout_file(path: Path, most: int = MAX_ROLLOUT_ROWS) -> Dict[str, Any]:
    """The first rows of a rollout file and a summary of its scores (bounded)."""
    rows, scores, bad = [], [], 0
    for line in bounded.lines(path, most, line_limit=256 << 10):
        if not line.strip():
            continue
        try:
            row = bounded.loads(line)
        except ValueError:  # not JSON, too deep, or an integer of more than 19 digits
            bad += 1
            continue
        score = row.get("score") if isinstance(row, dict) else None
        if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
            scores.append(float(score))
        else:
            bad += 1
        if isinstance(row, dict) and len(rows) < MAX_SAMPLES:
            rows.append({"input": _clip(row.get("input", "")), "output": _clip(row.get("output", "")),
                         "gts": _clip(row.get("gts", "")), "score": score})
    return {"rows": rows, "count": len(scores) + bad, "bad": bad,
            "scores": {"min": min(scores, default=None), "max": max(scores, default=None),
                       "mean": sum(scores) / len(scores) if scores else None,
                       "zero": sum(1 for s in scores if s == 0)}}


def rollout_samples(run_dir: Path, problems: List[Finding],
                    size: budget.Size = budget.Size()) -> Dict[int, Dict[str, Any]]:
    """Samples of the first and the last step that dumped rollouts."""
    folder = RunFolder(run_dir).rollouts
    steps = []
    if folder.is_dir():
        most = max(100_000, ROLLOUT_NAMES_PER_STEP * size.steps)
        for name in bounded.first_names(folder, "", most):  # names, not paths: 100,000 of them
            stem = name[:-6] if name.endswith(".jsonl") else ""
            if bounded.ascii_digits(stem) and len(stem) < 10:
                steps.append(int(stem))
    samples = {}
    for step in sorted({min(steps), max(steps)}) if steps else []:
        try:
            samples[step] = rollout_file(folder / f"{step}.jsonl",
                                         max(MAX_ROLLOUT_ROWS, 2 * size.rows))
        except bounded.Unreadable as exc:
            problems.append(finding("RPT-E006", f"rollouts/{step}.jsonl", str(exc)))
    if not steps and trained(run_dir):
        problems.append(finding("RPT-E006", "rollouts/", "no <step>.jsonl file: no samples"))
    return samples


def collect_findings(records: Dict[str, Dict[str, Any]],
                     own: List[Finding]) -> Tuple[List[Tuple[str, Finding]], Dict[Key, int]]:
    """The findings the report shows, (phase, finding): the first SHOWN of each phase's id,
    at most MAX_FINDINGS from the records and all of its own; and how many each phase's id has
    (every one the record readers read)."""
    found: List[Tuple[str, Finding]] = []
    counts: Dict[Key, int] = {}
    for phase, record in records.items():
        for check in record.get("checks", []) if isinstance(record.get("checks"), list) else []:
            for item in check.get("findings", []) if isinstance(check, dict) else []:
                parsed = _finding_from_json(item)
                if parsed:
                    take_finding(found, counts, phase, parsed)
    for parsed in own:
        take_finding(found, counts, "report", parsed, cap=None)
    return found, counts


def take_finding(found: List[Tuple[str, Finding]], counts: Dict[Key, int], phase: str,
                 parsed: Finding, cap: Optional[int] = MAX_FINDINGS) -> None:
    """Count parsed, and keep it among found while its phase's id has fewer than SHOWN there
    and found has fewer than cap (None: the report's own, a few, always kept)."""
    key = (phase, parsed.id)
    counts[key] = counts.get(key, 0) + 1
    if counts[key] <= findinggroups.SHOWN and (cap is None or len(found) < cap):
        found.append((phase, parsed))


def expected_zeros(view: RunView) -> List[str]:
    """Say when zeros are what this run should show, and when they are a warning sign."""
    scores = [s["scores"] for s in view.samples.values() if s["count"] > s["bad"]]
    means = dict(view.series).get("critic/score/mean", [])
    if not scores or any(s["min"] != 0 or s["max"] != 0 for s in scores) \
            or any(value != 0 for _, value in means):
        return []
    if view.profile.get("MODEL_HUB") == "generated":
        return ["All rewards are 0, as expected: this profile's model is a tiny random network "
                "(generated), so no answer is right. With every response of a prompt scored the "
                "same, GRPO's advantages are 0, and so are pg_loss and grad_norm. The run proves "
                "the machinery, not learning."]
    return ["All rewards in the sampled steps are 0. With a real model that is a warning sign: "
            "check the reward function, the answer format and MAX_RESPONSE_LENGTH (responses cut "
            "off before '####' score 0)."]


def load(run_dir: Path, run_id: str, profile_values: Dict[str, str], profile_name: str,
         run_json_problem: Optional[str]) -> RunView:
    problems: List[Finding] = []
    size = budget.of_values(profile_values)  # every limit below is this run's budget
    if run_json_problem:  # the size postflight recorded, where it did: as make runs reads the run
        size = runrecord.recorded_size(run_dir) or size
        problems.append(finding("RPT-E001", RunFolder(run_dir).run_json.name, f"{run_json_problem}; the report assumes "
                                f"profile {profile_name}"))
    run = {} if run_json_problem else _record(
        run_dir, RunFolder(run_dir).run_json.name, problems,
        read=lambda wrong: runrecord.read_typed(run_dir, typed.RUN, wrong, size))
    statuses: Dict[str, Optional[str]] = {}
    records = {phase: _record(run_dir, name, problems, statuses, size)
               for phase, name in PHASE_RECORDS}
    verdict = latest_verdict(run_dir, lambda _, name: statuses[name], whole=True)
    if os.path.lexists(RunFolder(run_dir).resume_json):  # the resume phase's record, for its card
        records["resume"] = _record(run_dir, NAME.resume_json, problems, {}, size)
    if verdict.conflicts:
        problems += [finding("RPT-E004", "SUCCESS/FAILED", text) for text in verdict.conflicts]
    if verdict.status == "UNPROVEN":
        problems.append(finding("RPT-E010", run_id, verdict.summary))
        problems += verdict.findings  # what it lacks, with the verdict's own id and hint
    if verdict.status == "INCOMPLETE" and not verdict.conflicts:
        problems.append(finding("RPT-E007", run_id, verdict.summary))
    placement = _record(run_dir, NAME.actor_placement_json, problems, None, size)
    workers = records["preflight"].get("workers", [])
    actors = placement.get("actors", [])
    series, more = scalar_series(run_dir, problems, size)
    evidence = records["postflight"].get("evidence", {})
    lin = None
    if run:  # a resumed run's charts start with its parents' steps (lineage.py)
        own = dict(series).get("training/global_step", [])
        last = own[-1][0] if own else (None if trained(run_dir) else 0)  # 0: no step trained
        lin = lineage_view.lineage(run_dir, run, last)
        if lin.parent and not (run_dir.parent / lin.parent[0]).is_dir():
            problems.append(finding("RPT-E050", lin.parent[0], "the parent run is not beside "
                                    "this run: its steps are not drawn"))
        inherited = lineage_view.inherited_series(run_dir, lin, [t for t, _ in series])
        series = [(tag, inherited.get(tag, []) + points) for tag, points in series]
    phases = phases_of(run_dir, records, problems)
    samples = rollout_samples(run_dir, problems, size)
    shards = checkpoint_shards(run_dir, evidence, problems, size)
    shown, counts = collect_findings(records, problems)  # last: the readers above add problems
    return RunView(
        run_dir=run_dir, run_id=run_id, verdict=verdict, run=run, profile=profile_values,
        profile_name=profile_name, phases=phases, records=records,
        workers=[w for w in workers if isinstance(w, dict)] if isinstance(workers, list) else [],
        actors=[a for a in actors if isinstance(a, dict)] if isinstance(actors, list) else [],
        series=series, more_tags=more, samples=samples, shards=shards,
        findings=shown, finding_counts=counts, lineage=lin)
