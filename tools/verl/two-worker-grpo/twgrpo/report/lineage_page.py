"""The report's lineage: the steps this run trained itself, the resume line of a preempted
run, and a section naming the parent, the children and the time the resume saved."""
from __future__ import annotations

from typing import List

from ..run.humane import duration, plural
from .svg import text


def steps_text(view, word: str = "GRPO steps") -> str:
    """'2 GRPO steps' for a fresh run that ended, or '1 step of 2 trained here (steps 2..2);
    1 step inherited from X'."""
    target = view.profile.get("TARGET_STEPS", "?")
    lin = view.lineage
    if lin is None or (not lin.parent and view.verdict.status == "SUCCESS"):
        return f"{target} {word}"
    if lin.trained is None:
        trained = f"no step of {target} trained here"
    else:
        first, last = lin.trained
        trained = f"{plural(last - first + 1, 'step')} of {target} trained here (steps {first}..{last})"
    if lin.parent:
        trained += f"; {plural(lin.parent[1], 'step')} inherited from {lin.parent[0]}"
    return trained


def resume_line(view) -> str:
    """The exact line to resume a preempted run with, inside the banner."""
    if view.verdict.status != "PREEMPTED":
        return ""
    children = view.lineage.children if view.lineage else []
    done = (f" (already resumed by {', '.join(c for c, _ in children[:3])})" if children else "")
    return (f'<div class="resume">RESUME_FROM={text(view.run_id)}{text(done)}</div>'
            '<div class="why">in a new job with a new RUN_ID, or re-run this job with '
            "RESUME_FROM=auto: a retry of the same RUN_ID becomes the next attempt</div>")


def saving(lin) -> List[str]:
    """The resume's saving in figures: steps inherited, training time of the chain vs here."""
    if not lin or not lin.parent:
        return []
    lines = [f"{plural(lin.inherited, 'step')} inherited from the parent chain "
             f"({' → '.join(lin.chain)})"]
    if lin.chain_training_s is not None:
        unknown = (f" ({', '.join(lin.chain_missing)}: time unknown)" if lin.chain_missing else "")
        lines.append(f"training time of the parent chain {duration(lin.chain_training_s)}{unknown}; "
                     f"of this run {duration(lin.own_training_s)}")
    return lines


def section(view) -> str:
    lin = view.lineage
    if lin is None:
        return '<p class="sub">No run.json: no lineage.</p>'
    rows = []
    if lin.parent:
        rows.append(("resumed from", f"{lin.parent[0]} at step {lin.parent[1]} (this run trained "
                     f"from step {lin.parent[1] + 1}; the resume phase is in the timeline)"))
    for line in saving(lin):
        rows.append(("saved", line))
    for child, step in lin.children[:20]:
        rows.append(("resumed by", f"{child}, from this run's step {step}"))
    if not rows:
        return '<p class="sub">A fresh run: resumed from no run, and no run resumed from it.</p>'
    return '<table class="lineage">' + "".join(
        f"<tr><th>{text(k)}</th><td>{text(v, 600)}</td></tr>" for k, v in rows) + "</table>"


def summary_lines(view) -> List[str]:
    """The text summary's lineage lines."""
    lin = view.lineage
    if lin is None:
        return []
    out = []
    if lin.parent:
        out.append(f"  resumed   from {lin.parent[0]} at step {lin.parent[1]}; {steps_text(view)}")
    out += [f"  saved     {line}" for line in saving(lin)[1:]]
    out += [f"  child     {child} resumed from step {step}" for child, step in lin.children[:20]]
    if view.verdict.status == "PREEMPTED":
        out.append(f"  resume    RESUME_FROM={view.run_id}")
    return out
