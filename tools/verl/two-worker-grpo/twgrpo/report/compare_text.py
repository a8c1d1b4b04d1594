"""The text summary of make compare, from compare.result()'s data (the JSON scripts get)."""
from __future__ import annotations

from typing import Any, Dict, List

from ..run.humane import number
from .compare_metrics import summary
from .runview import MAX_CHARTS

MAX_LISTED = 20  # differences and metrics listed per pair; the page and the JSON have them all


def _short(value: Any) -> str:
    text = "—" if value is None else str(value)
    return text if len(text) <= 72 else text[:71] + "…"


def _ratio(values: List[Any]) -> str:
    if len(values) != 2:  # several references: no one ratio to show
        return ""
    a, b = values
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b and not isinstance(a, bool):
        return f" ({a / b:.2f}x)"
    return ""


def metric_line(item: Dict[str, Any]) -> str:
    mean = item.get("mean")
    if not mean:
        return f"    {item['verdict']:<8} {item['tag']}: no common step"
    steps = (f"step {item['to_step']}" if item["window"] == 1 else
             f"mean of steps {item['from_step']}..{item['to_step']}")
    noise = f", step-to-step noise {number(item['noise'])}" if item.get("noise") is not None else ""
    return (f"    {item['verdict']:<8} {item['tag']}: {number(mean[0])} vs {number(mean[1])} ({steps}; "
            f"difference {number(item['difference'])}, allowed {number(item['allowed'])}{noise})")


def lines(data: Dict[str, Any]) -> List[str]:
    runs = data["runs"]
    out = []
    for p in data["pairs"]:
        out.append(f"compare {runs[0]} against {p['against']}: {p['headline']}")
        same = [f"{a} ({c[0]})" for a, c in p["aspects"].items() if c[0] and not c[1]]
        differ = [f"{a} ({c[1]})" for a, c in p["aspects"].items() if c[1]]
        out.append("  what ran   " + (f"differs in {', '.join(differ)}; " if differ else "")
                   + (f"the same in {', '.join(same)}" if same else "nothing the same"))
        for d in p["differences"][:MAX_LISTED]:
            out.append(f"    {d['aspect']:<11} {d['what']}: {_short(d['run'])} vs {_short(d['against'])}")
        if len(p["differences"]) > MAX_LISTED:
            out.append(f"    ... {len(p['differences']) - MAX_LISTED} more on the page")
        if p["not_compared"]:
            out.append(f"  not compared (not recorded by every run): {', '.join(p['not_compared'][:12])}"
                       + (" …" if len(p["not_compared"]) > 12 else ""))
        metrics = p["metrics"]
        out.append(f"  learned    {summary(metrics)} (tolerance {number(data['tolerance'])})")
        shown = [j for j in metrics["judged"] if j["verdict"] in ("differs", "few", "noise", "no common step")]
        shown.sort(key=lambda j: ("differs", "few", "noise", "no common step").index(j["verdict"]))
        out += [metric_line(j) for j in shown[:MAX_LISTED]]
        beyond = [n for n in metrics["not_charted"] if n]
        if beyond:
            out.append(f"  not compared: {max(beyond)} scalars past the first {MAX_CHARTS} a run logged "
                       "(the report's chart limit; TensorBoard has them)")
        for which, tags in ((runs[0], metrics["only_first"]), (p["against"], metrics["only_other"])):
            if tags:
                out.append(f"  only in {which}: {len(tags)} scalars ({', '.join(tags[:6])}"
                           + (" …)" if len(tags) > 6 else ")"))
    how = data["how_it_went"]
    if how:
        out.append("  how it went (" + " | ".join(runs) + ")")
        for row in how:
            out.append(f"    {row['what']:<34} " + " | ".join(row["shown"]) + _ratio(row["values"]))
    roll = data.get("rollouts")
    if roll:
        out.append(f"  rollouts   step {roll['step']}: {roll['shared']} of {roll['of']} prompts in every "
                   f"run, {len(roll['prompts'])} side by side on the page")
    else:
        out.append("  rollouts   no rollout step in common")
    for note in data["notes"]:
        out.append(f"  note       {note['obj']}: ({note['id']}) {note['message']}")
        out.append(f"               HINT: {note['hint']}")
    if data["read_problems"]:
        out.append(f"  read       {len(data['read_problems'])} report findings while reading the runs "
                   "(make report RUN_ID=<run> shows them): "
                   + ", ".join(sorted({f"{r}: {f['id']}" for r, f in data["read_problems"]}))[:400])
    if data.get("page"):
        out.append(f"compare: {data['page']}")
    out.append("compare: " + ("the same: nothing differs" if data["same"] else
                              "something differs or cannot be told (see above); exit status 1"))
    return out
