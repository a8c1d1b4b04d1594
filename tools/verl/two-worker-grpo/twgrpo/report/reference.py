"""The report's reference run: another run beside this one whose scalars the charts draw as a
second series (dashed, orange). REPORT_REFERENCE names it; a resumed run's parent is its
reference unless REPORT_REFERENCE=none. Read as the report reads its own run's scalars
(runview.scalar_series: bounded, thinned), and only the tags this run logged."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from ..run.findings import Finding, finding
from ..run import runid, runrecord
from . import lineage as lineage_view
from .svg import text

NONE = "none"


def chosen(view, name: Optional[str]) -> Optional[str]:
    """The reference's RUN_ID: the setting, else a resumed run's parent; None for none."""
    if name == NONE:
        return None
    if name:
        return name
    return view.lineage.parent[0] if view.lineage and view.lineage.parent else None


def load(view, name: Optional[str]) -> List[Finding]:
    """Set view.reference to (RUN_ID, {tag: points}); findings say why it could not be."""
    from .runview import scalar_series  # runview holds the view this module fills in
    ref_id = chosen(view, name)
    if ref_id is None:
        return []
    folder = Path(view.run_dir).parent / ref_id
    if not runid.is_run_id(ref_id):
        return [finding("RPT-E450", ref_id[:140], "is not a RUN_ID (letters, digits, '.', '_', '-')")]
    if ref_id == view.run_id:
        return [finding("RPT-E450", ref_id, "is this run itself")]
    if folder.is_symlink() or not folder.is_dir():
        if not name:  # the parent is missing: RPT-E050 already says so
            return []
        return [finding("RPT-E450", ref_id, f"{folder} is not a run folder beside this run")]
    problems: List[Finding] = []
    series, _ = scalar_series(folder, problems, runrecord.size(folder))  # the reference's own size
    if not series:
        why = problems[0].message if problems else "no scalar"
        return [finding("RPT-E450", ref_id, f"its scalars cannot be drawn: {why}")]
    tags = {tag for tag, _ in view.series}
    lin = lineage_view.lineage(folder, lineage_view.run_record(folder))  # a resumed reference's
    inherited = lineage_view.inherited_series(folder, lin, sorted(tags))  # curve starts at step 1
    view.reference = (ref_id, {tag: inherited.get(tag, []) + points for tag, points in series
                               if tag in tags})
    return []


def reference_line(view) -> str:
    """The line above the charts that names the reference and how it is drawn."""
    if not view.reference:
        return ""
    why = "" if not (view.lineage and view.lineage.parent and view.lineage.parent[0] == view.reference[0]) \
        else " (this run's parent; REPORT_REFERENCE=none leaves it out)"
    return (f'<p class="sub reference-line">Reference run, dashed orange: <b>{text(view.reference[0])}'
            f"</b>{text(why)}. make compare RUN_ID={text(view.run_id)} AGAINST={text(view.reference[0])} "
            "judges every scalar against it.</p>")
