"""The compare page: one self-contained HTML file (inline CSS and SVG, no script, no network),
like the report page, from compare.result()'s data and the runs' views (for the charts)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..run.humane import number, when
from . import compare_metrics, compare_svg
from .compare_facts import ASPECTS
from .page import CSP
from .runview import RunView
from .style import CSS
from .svg import text

MORE_CSS = """
.headline{font-size:17px;font-weight:600}
.banner.same{background:var(--okbg);border-color:#86efac;color:#14532d}
.banner.differs{background:var(--warnbg);border-color:#fcd34d;color:#78350f}
.wide{overflow-x:auto;margin:0 0 12px}
.wide table td,.wide table th{overflow-wrap:anywhere}
.wide table td.num{overflow-wrap:normal;white-space:nowrap}
td.differs,span.differs{color:var(--bad);font-weight:600}
td.same,span.same{color:var(--ok)}td.unknown,span.unknown{color:var(--warn)}
tr.row-differs td{background:#fff7ed}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:6px 0 12px;font-size:13px}
.legend .key{display:inline-flex;align-items:center;gap:6px;overflow-wrap:anywhere}
.legend .swatch{display:inline-block;width:26px;height:0}
.chart .verdict{display:block;font-size:12px;font-weight:600}
.chart .verdict.differs{color:var(--bad)}.chart .verdict.same{color:var(--ok)}
.chart .verdict.few,.chart .verdict.noise{color:var(--warn)}
.rollouts pre{white-space:pre-wrap;word-break:break-word;margin:0;max-height:160px;overflow:auto}
"""
STATE_WORD = {"same": "same", "differs": "differs", "unknown": "not recorded by every run"}


def _cell(value: Any, limit: int = 300) -> str:
    if value == "":
        return '<span class="sub">(empty)</span>'
    return '<span class="unknown">not recorded</span>' if value is None else text(value, limit)


def _banner(data: Dict[str, Any]) -> str:
    out = []
    for p in data["pairs"]:
        css = "same" if p["same"] else "differs"
        word = "THE SAME" if p["same"] else "DIFFERS"
        out.append(f'<section class="banner {css}" data-against="{text(p["against"])}"><div class="word">'
                   f'{word}</div><div class="headline">{text(data["runs"][0])} against '
                   f'{text(p["against"])}: {text(p["headline"], 1200)}</div></section>')
    return "".join(out)


def _header_row(runs: Sequence[str], first: str) -> str:
    return f"<tr><th>{text(first)}</th>" + "".join(f"<th>{text(r, 140)}</th>" for r in runs) + "</tr>"


def _what_ran(data: Dict[str, Any]) -> str:
    runs = data["runs"]
    out = ['<div class="wide"><table class="labels">', _header_row(runs, "")]
    out += [f"<tr><th>{text(r['what'])}</th>" + "".join(f"<td>{_cell(v)}</td>" for v in r["values"])
            + "</tr>" for r in data["labels"]]
    out.append("</table></div>")
    for aspect in ASPECTS:
        rows = [r for r in data["what_ran"] if r["aspect"] == aspect]
        if not rows:
            continue
        states = [_states(r["values"]) for r in rows]
        differ = sum(1 for s in states if "differs" in s)
        unknown = sum(1 for s in states if "unknown" in s and "differs" not in s)
        summary = (f'<span class="differs">{differ} differ</span>' if differ else
                   '<span class="same">the same</span>') + (
            f', <span class="unknown">{unknown} not recorded by every run</span>' if unknown else "")
        body = "".join(_fact_row(r, s) for r, s in zip(rows, states))
        table = f'<div class="wide"><table class="facts-table" data-aspect="{aspect}">' \
                f'{_header_row(runs, "fact")}{body}</table></div>'
        open_ = " open" if differ else ""
        out.append(f'<details class="aspect" data-aspect="{aspect}"{open_}><summary><b>{text(aspect)}</b>: '
                   f"{summary} ({len(rows)} facts)</summary>{table}</details>")
    return "".join(out)


def _states(values: List[Any]) -> List[str]:
    a = values[0]
    return ["unknown" if a is None or b is None else "same" if a == b else "differs" for b in values[1:]]


def _fact_row(row: Dict[str, Any], states: List[str]) -> str:
    worst = "differs" if "differs" in states else "unknown" if "unknown" in states else "same"
    cells = [f'<td class="mono">{_cell(row["values"][0])}</td>']
    cells += [f'<td class="mono {s}" title="{STATE_WORD[s]}">{_cell(v)}</td>'
              for v, s in zip(row["values"][1:], states)]
    return (f'<tr class="row-{worst}" data-what="{text(row["what"])}" data-state="{worst}"><th>'
            f'{text(row["what"])}</th>{"".join(cells)}</tr>')


def _how_it_went(data: Dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{text(r['what'])}</th>" + "".join(f'<td class="num">{text(s)}</td>'
                                                               for s in r["shown"]) + "</tr>"
                   for r in data["how_it_went"])
    return f'<div class="wide"><table class="how">{_header_row(data["runs"], "")}{rows}</table></div>'


def _verdict_table(data: Dict[str, Any]) -> str:
    out = []
    for p in data["pairs"]:
        m = p["metrics"]
        order = ("differs", "few", "noise", "no common step", "same")
        shown = sorted((j for j in m["judged"] if j["kind"] == "learned"),
                       key=lambda j: order.index(j["verdict"]))
        rows = []
        for j in shown:
            mean = j.get("mean") or [None, None]
            css = j["verdict"] if j["verdict"] in ("differs", "same") else "unknown"
            numbers = "".join(f'<td class="num">{text(number(x))}</td>'
                              for x in (mean[0], mean[1], j.get("difference"), j.get("allowed")))
            rows.append(f'<tr data-tag="{text(j["tag"])}" data-verdict="{text(j["verdict"])}"><td class="mono">'
                        f'{text(j["tag"])}</td>{numbers}<td class="{css}">'
                        f'{text(compare_metrics.VERDICTS[j["verdict"]])}</td></tr>')
        out.append(f'<h3>{text(data["runs"][0])} against {text(p["against"])}: '
                   f"{text(compare_metrics.summary(m), 400)}</h3>")
        out.append('<div class="wide"><table class="verdicts"><tr><th>scalar</th><th>run</th><th>reference'
                   "</th><th>difference</th><th>allowed</th><th>verdict</th></tr>" + "".join(rows)
                   + "</table></div>")
        for which, tags in ((data["runs"][0], m["only_first"]), (p["against"], m["only_other"])):
            if tags:
                out.append(f'<p class="sub">Only {text(which)} logged {len(tags)}: '
                           f"{text(', '.join(tags), 1500)}</p>")
    return "".join(out)


def _charts(views: Sequence[RunView], data: Dict[str, Any]) -> str:
    charted = compare_metrics.charted(views)
    if not charted:
        return '<p class="sub">No scalar that the run and a reference both logged.</p>'
    verdicts = {j["tag"]: j["verdict"] for j in data["pairs"][0]["metrics"]["judged"]}
    names = [v.run_id for v in views]
    against = f" (against {names[1]})" if len(names) > 2 else ""  # the first reference's verdict
    figures = []
    for tag, series in charted:
        verdict = verdicts.get(tag, "no common step")
        last = " · ".join(f"{number(p[-1][1])}" if p else "—" for p in series)
        figures.append(f'<figure class="chart" data-tag="{text(tag)}" data-verdict="{text(verdict)}">'
                       f'<figcaption><span class="tag">{text(tag)}</span><span class="last">last: '
                       f'{text(last, 300)}</span><span class="verdict {text(verdict)}">'
                       f"{text(compare_metrics.VERDICTS[verdict] + against, 300)}</span></figcaption>"
                       f"{compare_svg.chart(list(zip(names, series)))}</figure>")
    return compare_svg.legend(names, ["run"] + ["reference"] * (len(names) - 1)) + \
        '<div class="charts">' + "".join(figures) + "</div>"


def _rollouts(data: Dict[str, Any]) -> str:
    roll = data.get("rollouts")
    if not roll:
        return '<p class="sub">The runs dumped no rollout step in common.</p>'
    head = "<tr><th>prompt</th>" + "".join(f"<th>{text(r, 140)}</th>" for r in data["runs"]) + "</tr>"
    rows = []
    for item in roll["prompts"]:
        cells = []
        for responses in item["runs"]:
            cells.append("<td>" + "".join(f'<pre>{text(r["output"], 700)}</pre><div class="sub">score '
                                          f'{text(number(r["score"]))}</div>' for r in responses) + "</td>")
        rows.append(f'<tr><td><pre>{text(item["prompt"], 700)}</pre></td>{"".join(cells)}</tr>')
    return (f'<p class="sub">Step {text(roll["step"])}: {text(roll["shared"])} of {text(roll["of"])} prompts '
            f'are in every run; the first {len(roll["prompts"])} with each run\'s first responses.</p>'
            f'<div class="wide"><table class="rollouts">{head}{"".join(rows)}</table></div>')


def _notes(data: Dict[str, Any]) -> str:
    return "".join(f'<div class="finding warning"><span class="id">{text(n["id"])}</span> '
                   f'{text(n["obj"], 300)}<div>{text(n["message"], 1200)}</div><div class="hint">'
                   f'What to do: {text(n["hint"], 600)}</div></div>' for n in data["notes"])


def render(views: Sequence[RunView], data: Dict[str, Any]) -> str:
    runs = data["runs"]
    sections = [
        f"<h1>{text(runs[0])} against {text(', '.join(runs[1:]), 600)}</h1>",
        f'<p class="sub">make compare · tolerance {text(number(data["tolerance"]))} of the larger '
        "value · nothing in the run folders was written</p>",
        _banner(data), _notes(data),
        '<h2 id="what-ran">What ran</h2>',
        '<p class="sub">Every fact each run recorded, by aspect; an aspect that differs is open. '
        "Paths are shown relative to each run's storage root and folder.</p>", _what_ran(data),
        '<h2 id="how-it-went">How it went</h2>', _how_it_went(data),
        '<h2 id="learned">What it learned</h2>', _verdict_table(data),
        '<h3>Every scalar, the runs on one step axis</h3>', _charts(views, data),
        '<h2 id="rollouts">Rollouts of the same prompts</h2>', _rollouts(data),
        f"<footer>Written {text(when(data['generated_at']))} by verify-two-worker-grpo-v1.py compare "
        f"from the run folders {text(', '.join(str(v.run_dir) for v in views), 2000)}.</footer>",
    ]
    title = "the same" if data["same"] else "differs"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{text(title)} · {text(runs[0])} vs {text(', '.join(runs[1:]), 300)}</title>"
            f"<style>{CSS}{MORE_CSS}</style></head><body><main>" + "".join(sections)
            + "</main></body></html>\n")
