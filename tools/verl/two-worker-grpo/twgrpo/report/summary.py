"""make report RUN_ID=...: report.html in the run folder, and a text summary of the same facts."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

from . import lineage_page, page, reference, runview
from ..run.findings import UsageError, utc_now
from ..run.humane import duration, number, printable, topology, when
from ..run.profile import Profile
from ..run.records import RecordError, write_text
from ..run.runfolder import RunFolder

GROUPS, SHOWN = 20, 3  # kinds of finding in the summary, and findings of each kind; the page has more


def summary_lines(view: runview.RunView, html_path: Optional[Path]) -> List[str]:
    p, v = view.profile, view.verdict
    lines = [f"run {view.run_id}: {v.summary}"]
    lines += [f"  conflict: {c}" for c in v.conflicts]
    lines += [f"  superseded: an earlier SUCCESS, kept as {name}" for name in v.superseded]
    if view.failed_checks():
        lines.append(f"  failed    {view.failed_checks()}")
    lines.append(f"  profile   {view.profile_name}: "
                 f"{topology(p.get('NODES'), p.get('GPUS_PER_NODE'), p.get('GPU_MODEL'))}, "
                 f"{lineage_page.steps_text(view, 'steps')}, rollout {p.get('ROLLOUT_ENGINE', '?')}, "
                 f"lr {number(_float(p.get('LEARNING_RATE')))}")
    if p.get("REWARD_FILE"):
        lines.append(f"  reward    {page.reward_text(p)}")
    if p.get("DATA_CONVERTER"):
        lines.append(f"  data      {page.data_text(p)}")
    lines.append(f"  started   {when(view.run.get('started_at'))} on {view.run.get('driver_host', '?')}, "
                 f"took {duration(view.took())}")
    if view.run.get("image"):
        lines.append(f"  image     {view.run['image']}")
    lines += lineage_page.summary_lines(view)
    if view.reference:
        lines.append(f"  reference {view.reference[0]} (drawn on every chart; make compare judges it)")
    phases = []
    for ph in view.phases:
        took = f" {duration(ph.seconds)}" if ph.seconds is not None else ""
        phases.append(f"{ph.name} {ph.status}{took}")
    lines.append("  phases    " + " · ".join(phases))
    hosts = {}
    for a in view.actors:
        hosts.setdefault(a.get("node_id"), []).append(str(a.get("rank")))
    for w in view.workers[:16]:
        names = sorted({str(n) for n in w.get("gpu_names", [])}) if isinstance(w.get("gpu_names"), list) else []
        ranks = hosts.get(w.get("node_id"), [])
        gpus = (f"{w.get('gpu_count', '?')} x {', '.join(names) or '?'}, driver "
                f"{', '.join(map(str, w.get('driver', [])))}" if w.get("gpu_node", True) else "CPU only")
        label = f"node {w.get('ordinal', '?')}"  # in the labels' column, as wide as node 10
        lines.append(f"  {label:<9} {w.get('hostname', '?')} ({w.get('node_ip', '?')}, "
                     f"{'head' if w.get('is_head') else 'worker'}): {gpus}, "
                     f"ranks {', '.join(ranks) or 'none'}")
    if len(view.workers) > 16:
        lines.append(f"  ... and {len(view.workers) - 16} more nodes (the page shows them)")
    latest = [(tag, points[-1]) for tag, points in view.series[:len(runview.KEY_SCALARS)]
              if tag in runview.KEY_SCALARS and points]
    if latest:
        lines.append("  metrics   " + " · ".join(f"{tag} {number(value)}" for tag, (_, value) in latest[:5])
                     + f" (step {latest[0][1][0]})")
    for note in view.notes():
        lines.append(f"  note      {note}")
    total, groups = view.finding_total(), view.finding_groups()
    # the report's own first (what it could not read), so that many ids in a record never hide them
    groups = [g for g in groups if g.where == "report"] + [g for g in groups if g.where != "report"]
    lines.append(f"  findings  {total:,}" if total else "  findings  none")
    for group in groups[:GROUPS]:  # a few of each id, its hint once (run/findinggroups.py)
        shown = group.shown[:SHOWN]
        lines += [f"    {group.where}: {view.shown(f.obj)}: ({f.id}) {f.message}" for f in shown]
        if group.total > len(shown):
            lines.append(f"    {view.unshown(group, len(shown))}")
        if group.hint:
            lines.append(f"        HINT: {group.hint}")
    if len(groups) > GROUPS:
        lines.append(f"    ... {len(groups) - GROUPS} more kinds of finding on the page")
    if html_path:
        lines.append(f"report: {html_path}")
    lines.append(f"tensorboard: tensorboard --logdir {RunFolder(view.run_dir).tensorboard}")
    return lines


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def run(folder: RunFolder, profile: Profile, *, profile_problem: Optional[str] = None,
        html: Optional[str] = None, reference_run: Optional[str] = None) -> int:
    """report.html (or html) and the text summary of the run in folder, judged with profile;
    profile_problem: why the run's own profile could not be read (the page says so).
    reference_run: a run whose scalars the charts draw beside (reference.py)."""
    run_dir = folder.path
    if not run_dir.is_dir():
        raise UsageError(f"no run folder {run_dir}: set RUN_ID= to a run under PREP_ROOT= "
                         "(make runs lists them)")
    run_id = folder.run_id or run_dir.resolve().name  # --output-dir . names no run
    view = runview.load(run_dir, run_id, dict(profile.values), profile.PROFILE_NAME, profile_problem)
    view.add_findings("report", reference.load(view, reference_run))
    target = Path(os.path.abspath(html or folder.report_html))
    try:
        write_text(target, page.render(view, utc_now()))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(target, 0o644 & ~umask)  # a page on shared storage is for everyone to open
    except OSError as exc:
        cause = str(exc) if isinstance(exc, RecordError) else f"cannot write {target}: {exc.strerror}"
        raise UsageError(f"{cause}; set REPORT_HTML=<a writable path> (--html) to put the page "
                         "elsewhere", getattr(exc, "fid", ""), getattr(exc, "hint", ""))
    print("\n".join(printable(line) for line in summary_lines(view, target)), flush=True)
    return 0
