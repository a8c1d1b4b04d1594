"""Inline SVG pictures for the report: a line chart per scalar and the run's topology.

Every text that comes from an artifact goes through text(), which drops the control characters
XML forbids and escapes markup, so the SVG parses as XML and nothing in it can run.
"""
from __future__ import annotations

import html
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..run.humane import number, plural

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
INK, MUTED, GRID, LINE, OK, BAD = "#1f2933", "#616e7c", "#e4e7eb", "#2563eb", "#15803d", "#b91c1c"
REF = "#ea580c"  # a reference run's series


def text(value: Any, limit: int = 200) -> str:
    """Escaped for HTML and XML alike, control characters shown as U+FFFD, cut to limit."""
    raw = str(value)
    if len(raw) > limit:
        raw = raw[:limit - 1] + "…"
    return html.escape(_CONTROL.sub("\ufffd", raw), quote=True)


def scale(lo: float, hi: float, a: float, b: float):
    span = hi - lo
    return lambda v: a + (b - a) * ((v - lo) / span if span else 0.5)


def axis_labels(values: Sequence[float]) -> List[str]:
    """Axis labels with as many digits as it takes to tell them apart (6.206 vs 6.206...)."""
    for digits in range(3, 9):
        labels = [number(v, digits) for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def line_chart(points: Sequence[Tuple[int, float]], width: int = 300, height: int = 150,
               resumed_at: Optional[int] = None,
               reference: Optional[Sequence[Tuple[int, float]]] = None) -> str:
    """Steps on x, values on y, min and max gridlines labelled; non-finite points marked.
    With resumed_at, the steps up to it (a parent run's) are drawn dashed and grey, and a
    line marks where this run resumed. A reference run's points are drawn dashed, in orange."""
    finite = [(s, v) for s, v in points if v == v and abs(v) != float("inf")]
    others = [(s, v) for s, v in reference or () if v == v and abs(v) != float("inf")]
    left, right, top, bottom = 66, 12, 12, 28
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg" viewBox="0 0 {width} '
           f'{height}" width="{width}" height="{height}" role="img" font-family="sans-serif">']
    if not finite:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="{BAD}" '
                   'font-size="12">no finite value</text></svg>')
        return "".join(out)
    steps = [s for s, _ in points] + [s for s, _ in others]
    values = [v for _, v in finite + others]
    lo, hi = min(values), max(values)
    ticks = sorted({lo, hi})
    if lo == hi:  # a flat line sits in the middle, labelled with its value
        pad = abs(lo) * 0.5 or 1.0
        lo, hi = lo - pad, hi + pad
    x = scale(min(steps), max(steps), left + 6, width - right - 6)
    y = scale(lo, hi, height - bottom - 6, top + 6)
    for value, label in zip(ticks, axis_labels(ticks)):
        py = y(value)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py:.1f}" y2="{py:.1f}" '
                   f'stroke="{GRID}" stroke-dasharray="3 3"/><text x="{left - 6}" y="{py + 4:.1f}" '
                   f'text-anchor="end" font-size="11" fill="{MUTED}">{text(label)}</text>')
    base = height - bottom
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{base}" y2="{base}" stroke="#9aa5b1"/>')
    for step in sorted({min(steps), max(steps)}):
        out.append(f'<text x="{x(step):.1f}" y="{base + 15}" text-anchor="middle" font-size="11" '
                   f'fill="{MUTED}">{text(number(step))}</text>')
    inherited = [(s, v) for s, v in finite if resumed_at is not None and s <= resumed_at]
    own = finite[max(len(inherited) - 1, 0):] if inherited else finite
    if inherited:
        out.append(_resume_mark(x(resumed_at), top, base, inherited, x, y))
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(own))
    out.append(f'<path d="{path}" fill="none" stroke="{LINE}" stroke-width="2" '
               'stroke-linejoin="round"/>')
    if others:  # on top, dashed: where the runs agree both still show
        out.append(f'<path class="reference" d="{_path(others, x, y)}" fill="none" stroke="{REF}" '
                   'stroke-width="2" stroke-dasharray="6 4"/>')
        if len(others) <= 40:
            out += [f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.4" fill="{REF}"><title>reference '
                    f'step {s}: {text(number(v, 6))}</title></circle>' for s, v in others]
    if len(finite) <= 40:
        out += [f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="3.2" fill="{MUTED if (s, v) in inherited else LINE}">'
                f'<title>step {s}: {text(number(v, 6))}{" (parent run)" if (s, v) in inherited else ""}'
                '</title></circle>' for s, v in finite]
    bad = [s for s, v in points if not (v == v and abs(v) != float("inf"))]
    out += [f'<text x="{x(s):.1f}" y="{top + 10}" text-anchor="middle" font-size="11" '
            f'fill="{BAD}">✕</text>' for s in bad[:40]]
    out.append("</svg>")
    return "".join(out)


def _node_gpus(node: Dict[str, Any], detail: Dict[str, Any]) -> List[Dict[str, Any]]:
    gpus = detail.get("gpu_query", {}).get("gpus", []) if isinstance(detail, dict) else []
    gpus = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    if not gpus:
        names = node.get("gpu_names") or ["GPU"]
        count = node.get("gpu_count") if isinstance(node.get("gpu_count"), int) else len(names)
        gpus = [{"index": i, "name": names[min(i, len(names) - 1)]} for i in range(min(count, 64))]
    return gpus


def topology(workers: List[Dict[str, Any]], details: List[Dict[str, Any]],
             actors: List[Dict[str, Any]], transport: str) -> str:
    """One box per Ray node (hostname, IP, role, driver) holding its GPUs and the ranks on them."""
    by_node = {d.get("node_id"): d for d in details if isinstance(d, dict)}
    columns = 1 if len(workers) == 1 else 2
    boxes = [(w, _node_gpus(w, by_node.get(w.get("node_id"), {}))[:16]) for w in workers]
    tile_w, tile_h = 128, 62
    per_row = max(2, min(4, max(len(g) for _, g in boxes)))
    box_w = max(320, 20 + per_row * (tile_w + 8))  # room for the IP, role and driver line
    heights = [92 + max(1, (len(g) + per_row - 1) // per_row) * (tile_h + 8) for _, g in boxes]
    row_heights = [max(heights[i:i + columns]) for i in range(0, len(heights), columns)]
    width = 20 + columns * (box_w + 24)
    height = 20 + sum(h + 24 for h in row_heights) + 34
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="topology-svg" viewBox="0 0 {width} '
           f'{height}" width="{width}" height="{height}" role="img" font-family="sans-serif">']
    y0, links = 20, []
    for row, row_height in enumerate(row_heights):
        for col in range(columns):
            index = row * columns + col
            if index >= len(boxes):
                break
            worker, gpus = boxes[index]
            out.append(_node_box(worker, gpus, actors, 20 + col * (box_w + 24), y0, box_w,
                                 row_height, tile_w, tile_h, per_row))
            links.append((20 + col * (box_w + 24) + box_w / 2, y0 + row_height))
        y0 += row_height + 24
    if len(workers) > 1:  # the links between nodes: what NCCL used to reach the other hosts
        bus = height - 38
        out.append(f'<line x1="{links[0][0]:.0f}" x2="{links[-1][0] if len(links) <= columns else width - 44:.0f}" '
                   f'y1="{bus}" y2="{bus}" stroke="{LINE}" stroke-width="3"/>')
        out += [f'<line x1="{lx:.0f}" x2="{lx:.0f}" y1="{ly}" y2="{bus}" stroke="{LINE}" '
                f'stroke-width="2"/>' for lx, ly in links]
    out.append(f'<text x="20" y="{height - 12}" font-size="13" fill="{INK}">'
               f'{text(transport, 120)}</text>')
    out.append("</svg>")
    return "".join(out)


def _node_box(worker, gpus, actors, x0, y0, box_w, box_h, tile_w, tile_h, per_row) -> str:
    role = "head" if worker.get("is_head") else "worker"
    driver = ", ".join(str(d) for d in worker.get("driver", [])[:4]) if isinstance(
        worker.get("driver"), list) else str(worker.get("driver", "?"))
    host = worker.get("hostname", "?")
    mine = [a for a in actors if a.get("node_id") == worker.get("node_id")
            or (not a.get("node_id") and a.get("hostname") == host)]
    out = [f'<g class="node" data-hostname="{text(host)}">',
           f'<rect x="{x0}" y="{y0}" width="{box_w}" height="{box_h}" rx="10" fill="#f8fafc" '
           f'stroke="#cbd2d9" stroke-width="1.5"/>',
           f'<text x="{x0 + 14}" y="{y0 + 26}" font-size="16" font-weight="bold" fill="{INK}">'
           f'node {text(worker.get("ordinal", "?"))} · {text(host, 40)}</text>',
           f'<text x="{x0 + 14}" y="{y0 + 46}" font-size="12" fill="{MUTED}">'
           f'{text(worker.get("node_ip", "?"), 40)} · Ray {role} · driver {text(driver, 60)}</text>',
           f'<text x="{x0 + 14}" y="{y0 + 64}" font-size="12" fill="{MUTED}">'
           f'{text(len(mine))} of {text(plural(len(gpus), "GPU"))} '
           f'{"holds" if len(mine) == 1 else "hold"} a rank</text>']
    for i, gpu in enumerate(gpus):
        gx = x0 + 14 + (i % per_row) * (tile_w + 8)
        gy = y0 + 78 + (i // per_row) * (tile_h + 8)
        index = gpu.get("index", i)
        ranks = [a for a in mine if a.get("nvml_dev", a.get("cuda_dev")) == index]
        fill, stroke = ("#dbeafe", LINE) if ranks else ("#f1f5f9", "#cbd2d9")
        name = str(gpu.get("name", "GPU")).replace("NVIDIA ", "")
        out.append(f'<rect x="{gx}" y="{gy}" width="{tile_w}" height="{tile_h}" rx="6" '
                   f'fill="{fill}" stroke="{stroke}"/>')
        out.append(f'<text x="{gx + 8}" y="{gy + 18}" font-size="12" font-weight="bold" '
                   f'fill="{INK}">GPU {text(index)}</text>')
        out.append(f'<text x="{gx + 8}" y="{gy + 34}" font-size="11" fill="{MUTED}">'
                   f'{text(name, 18)}</text>')
        label = ", ".join(f"rank {a.get('rank')}" for a in ranks[:2]) or "no rank"
        pid = f" · pid {ranks[0].get('pid')}" if len(ranks) == 1 else ""
        out.append(f'<text x="{gx + 8}" y="{gy + 52}" font-size="11" fill="{INK if ranks else MUTED}"'
                   f' class="rank">{text(label + pid, 24)}</text>')
    return "".join(out) + "</g>"


def _resume_mark(px: float, top: int, base: int, inherited, x, y) -> str:
    """The parent run's steps, dashed and grey, and a vertical line where this run resumed."""
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(inherited))
    return (f'<path class="inherited" d="{path}" fill="none" stroke="{MUTED}" stroke-width="2" '
            f'stroke-dasharray="5 4"/><line class="resumed" x1="{px:.1f}" x2="{px:.1f}" y1="{top}" '
            f'y2="{base}" stroke="{MUTED}" stroke-dasharray="2 3"/><text x="{px + 3:.1f}" '
            f'y="{top + 9}" font-size="10" fill="{MUTED}">resumed</text>')


def _path(points, x, y) -> str:
    """An SVG path through the points; a lone point as a short tick so it shows."""
    if len(points) == 1:
        (s, v), = points
        return f"M{x(s) - 4:.1f},{y(v):.1f}L{x(s) + 4:.1f},{y(v):.1f}"
    return " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(points))
