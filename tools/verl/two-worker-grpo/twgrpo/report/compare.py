"""make compare RUN_ID=<run> AGAINST=<reference> [...]: did the run reproduce its reference?

Each run is read as the report reads it (runview.py, bounded and never trusted); nothing in
either run folder is written. The comparison of the run with each reference has three parts:
what ran (compare_facts.py), how it went (the same, never judged) and what it learned
(compare_metrics.py), and a headline that names what differs first, in the order of
compare_facts.ASPECTS, then the metrics. Exit 0 when nothing differs, 1 when something does,
2 on a usage error.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..run.findings import EXIT_FAILED, EXIT_PASSED, Finding, UsageError, finding, usage, utc_now
from ..run.humane import printable
from ..run.records import RecordError, write_text
from ..run import runid, runrecord
from ..run.runfolder import RunFolder, runs_dir
from . import compare_facts, compare_metrics, compare_rollouts, runview
from .compare_defaults import COMPARE_FOLDER


MAX_AGAINST = 8


def load_view(storage_root: Path, run_id: str) -> runview.RunView:
    """The run as the report sees it; its profile values from its own run.json."""
    if not runid.is_run_id(run_id):
        raise usage("CMP-E001", repr(run_id)[:140], "is not a RUN_ID (letters, digits, '.', '_', "
                    "'-', at most 128)")
    folder = RunFolder.at(storage_root, run_id).path
    if folder.is_symlink() or not folder.is_dir():
        raise usage("CMP-E001", str(folder), "is not a run folder" + (
            " (a symbolic link)" if folder.is_symlink() else ""))
    problem = runrecord.profile_problem(folder)
    # the run's recorded size sets what the report reads of it (run/budget.py), as make report's
    recorded = {key: str(value) for key, value in runrecord.profile_values(folder).items()}
    view = runview.load(folder, run_id, recorded, "?", problem)
    values = compare_facts.profile_values(view)
    view.profile = values
    view.profile_name = str(compare_facts.as_dict(view.run.get("profile")).get("name", "?"))[:80]
    return view


def notes(views: Sequence[runview.RunView], facts: List[compare_facts.Fact]) -> List[Finding]:
    """What cannot be compared, said rather than hidden."""
    out = []
    for view in views:
        if not view.series:
            out.append(finding("CMP-W001", view.run_id, f"no scalar could be read ({view.verdict.status}"
                               f"): compared on what it ran and how it went"))
    profiles = {v.profile_name for v in views}
    bundles = {str(v.run.get("bundle_version") or v.run.get("bundle_sums_sha256") or "?") for v in views}
    if len(profiles) > 1 or len(bundles) > 1:
        what = ([f"profiles {', '.join(sorted(profiles))}"] if len(profiles) > 1 else []) + \
            ([f"{len(bundles)} bundle versions"] if len(bundles) > 1 else [])
        out.append(finding("CMP-W002", ", ".join(v.run_id for v in views)[:400],
                           f"{' and '.join(what)}: differences in the recipe or code can explain "
                           "metric differences"))
    unknown = [f for f in facts if any(f.state(i) == "unknown" for i in range(1, len(views)))]
    if unknown:
        names = ", ".join(f.what for f in unknown[:12]) + (" …" if len(unknown) > 12 else "")
        out.append(finding("CMP-W003", "what ran", f"{len(unknown)} facts not recorded by every run, "
                           f"not compared: {names}"))
    return out


def pair(views, facts, index: int, tolerance: float) -> Dict[str, Any]:
    """The run (views[0]) against one reference (views[index])."""
    diffs = [f for f in facts if f.state(index) == "differs"]
    diffs.sort(key=lambda f: compare_facts.ASPECTS.index(f.aspect))
    metrics = compare_metrics.compare(views[0], views[index], tolerance)
    # Nothing of the inputs or the recipe recorded by both (a run without run.json): no proof
    comparable = all(any(f.aspect == a and f.state(index) == "same" for f in facts)
                     for a in ("pins", "recipe"))
    return {"against": views[index].run_id,
            "headline": headline(views[0], views[index], diffs, metrics, index, comparable),
            "differences": [{"aspect": f.aspect, "what": f.what, "run": f.values[0],
                             "against": f.values[index]} for f in diffs],
            "not_compared": [f.what for f in facts if f.state(index) == "unknown"],
            "aspects": {a: [sum(1 for f in facts if f.aspect == a and f.state(index) == s)
                            for s in ("same", "differs", "unknown")] for a in compare_facts.ASPECTS},
            "metrics": metrics, "comparable": comparable,
            "same": comparable and not diffs and not compare_metrics.differing(metrics)}


def headline(run, reference, diffs, metrics, index: int, comparable: bool = True) -> str:
    """'same inputs and recipe; metrics within tolerance', or what differs first."""
    bad = compare_metrics.differing(metrics)
    learned = compare_metrics.summary(metrics)
    if not comparable and not diffs:
        missing = [v.run_id for v in (run, reference) if not v.run.get("profile")]
        return ("cannot tell: the inputs and recipe are not recorded by both runs"
                + (f" ({', '.join(missing)} has no readable run.json)" if missing else "")
                + f"; {learned}")
    if not diffs and not bad:
        if not run.series or not reference.series:
            return "same inputs and recipe; no metrics to compare (a run logged no scalar)"
        few = metrics["counts"]["few"]
        return ("same inputs and recipe; metrics within tolerance"
                + (f" ({few} moving scalars over too few steps to judge)" if few else ""))
    parts = [] if diffs else ["same inputs and recipe"]
    if diffs:
        first = diffs[0]
        aspects = []
        for f in diffs:
            if f.aspect not in aspects:
                aspects.append(f.aspect)
        counts = ", ".join(f"{a} ({sum(1 for f in diffs if f.aspect == a)})" for a in aspects)
        parts.append(f"differs first in {first.aspect}: {first.what} {_brief(first.values[0])} vs "
                     f"{_brief(first.values[index])}; what ran differs in {counts}")
    if bad:
        names = ", ".join(j["tag"] for j in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        parts.append(f"{len(bad)} metric{'s' if len(bad) > 1 else ''} beyond tolerance: {names}")
    else:
        parts.append(learned)
    return "; ".join(parts)


def _brief(value: Optional[str]) -> str:
    """A long hash or path cut to what a headline needs."""
    text = str(value)
    return text if len(text) <= 40 else text[:16] + "…"


def result(views: Sequence[runview.RunView], tolerance: float) -> Dict[str, Any]:
    facts = compare_facts.what_ran(views)
    pairs = [pair(views, facts, i, tolerance) for i in range(1, len(views))]
    return {"runs": [v.run_id for v in views], "tolerance": tolerance, "generated_at": utc_now(),
            "verdicts": [v.verdict.status for v in views], "pairs": pairs,
            "same": all(p["same"] for p in pairs),
            "what_ran": [{"aspect": f.aspect, "what": f.what, "values": f.values} for f in facts],
            "labels": [{"what": f.what, "values": f.values} for f in compare_facts.labels(views)],
            "how_it_went": [{"what": r["what"], "values": r["values"], "shown": r["shown"]}
                            for r in compare_facts.how_it_went(views)],
            "rollouts": compare_rollouts.side_by_side(views),
            "notes": [f.to_json() for f in notes(views, facts)],
            "read_problems": [[v.run_id, f.to_json()] for v in views for _, f in v.findings
                              if f.id.startswith("RPT-")][:40]}


def default_page(storage_root: Path, ids: Sequence[str]) -> Path:
    name = "-vs-".join(ids)
    if len(name) > 200:  # several long RUN_IDs: the first, and a digest of them all
        name = f"{ids[0]}-vs-{len(ids) - 1}-runs-{hashlib.sha256(' '.join(ids).encode()).hexdigest()[:12]}"
    return runs_dir(storage_root).parent / COMPARE_FOLDER / f"{name}.html"


def refuse_inside(target: Path, views: Sequence[runview.RunView]) -> None:
    real = os.path.realpath(target)
    for view in views:
        folder = os.path.realpath(view.run_dir)
        if os.path.commonpath([real, folder]) == folder:
            raise usage("CMP-E004", str(target), f"lies inside the run folder of {view.run_id}")


def write_page(target: Path, text: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text(target, text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(target, 0o644 & ~umask)  # a page on shared storage is for everyone to open
    except OSError as exc:
        cause = str(exc) if isinstance(exc, RecordError) else f"cannot write {target}: {exc.strerror}"
        raise UsageError(f"{cause}; set COMPARE_HTML=<a writable path> to put the page elsewhere",
                         getattr(exc, "fid", ""), getattr(exc, "hint", ""))


def run(storage_root: Path, run_id: str, against: Sequence[str], *, tolerance: Optional[str] = None,
        html: Optional[str] = None, fmt: str = "text") -> int:
    """Compare run_id with each RUN_ID in against; the page goes to html (default: beside the
    runs, default_page) unless fmt is json without html. tolerance: as compare_metrics reads it."""
    from . import compare_page, compare_text  # the page and the text import this module's result
    if not storage_root.is_dir():
        raise UsageError(f"PREP_ROOT {storage_root} is not a directory: set PREP_ROOT= to the "
                         "shared volume's mount path on this box")
    against = list(against)
    if not run_id or not against:
        raise UsageError("name the runs: make compare RUN_ID=<run> AGAINST=<reference> "
                         "(several AGAINST allowed, space-separated; make runs lists runs)")
    ids = [run_id] + against
    if len(against) > MAX_AGAINST:
        raise UsageError(f"at most {MAX_AGAINST} AGAINST runs at once ({len(against)} given)")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise usage("CMP-E002", ", ".join(twice)[:300], "is named more than once")
    try:
        relative = compare_metrics.tolerance_of(tolerance)
    except ValueError:
        raise usage("CMP-E003", f"TOLERANCE={tolerance!r}"[:200], "is not a number from 0 to 10 "
                    "or a percentage")
    views = [load_view(storage_root, one) for one in ids]
    data = result(views, relative)
    failed = None
    if html or fmt != "json":
        target = Path(os.path.abspath(html or default_page(storage_root, ids)))
        refuse_inside(target, views)
        try:
            write_page(target, compare_page.render(views, data))
            data["page"] = str(target)
        except UsageError as exc:  # a read-only volume: the summary still comes, then the error
            failed = exc
    if fmt == "json":
        sys.stdout.write(json.dumps(finite(data), sort_keys=True, indent=1, allow_nan=False) + "\n")
    else:
        print("\n".join(printable(line) for line in compare_text.lines(data)), flush=True)
    if failed:
        raise failed
    return EXIT_PASSED if data["same"] else EXIT_FAILED


def finite(value: Any) -> Any:
    """The result with NaN and inf written as text, so the JSON is strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)
