"""One chart, several runs: a scalar of each run on a common step axis (make compare, and the
report's reference run). Every text goes through svg.text(), as in every picture of the page."""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

from ..run.humane import number
from .svg import BAD, GRID, LINE, MUTED, axis_labels, scale, text

# The run first (solid blue), then each reference (dashed, its own colour).
COLOURS = (LINE, "#ea580c", "#7c3aed", "#0d9488", "#be185d", "#4d7c0f", "#a16207", "#475569", "#0369a1")
Points = Sequence[Tuple[int, float]]


def colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def _finite(points: Points) -> List[Tuple[int, float]]:
    return [(s, v) for s, v in points if math.isfinite(v)]


def chart(series: Sequence[Tuple[str, Points]], width: int = 300, height: int = 160,
          cls: str = "chart-svg compare-svg") -> str:
    """series: (run name, points) per run, the run first; the others drawn dashed."""
    left, right, top, bottom = 66, 12, 12, 28
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" font-family="sans-serif">']
    finite = [_finite(points) for _, points in series]
    values = [v for points in finite for _, v in points]
    steps = [s for _, points in series for s, _ in points]
    if not values:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="{BAD}" '
                   'font-size="12">no finite value</text></svg>')
        return "".join(out)
    lo, hi = min(values), max(values)
    ticks = sorted({lo, hi})
    if lo == hi:
        pad = abs(lo) * 0.5 or 1.0
        lo, hi = lo - pad, hi + pad
    x = scale(min(steps), max(steps), left + 6, width - right - 6)
    y = scale(lo, hi, height - bottom - 6, top + 6)
    for value, label in zip(ticks, axis_labels(ticks)):
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                   f'stroke="{GRID}" stroke-dasharray="3 3"/><text x="{left - 6}" '
                   f'y="{y(value) + 4:.1f}" text-anchor="end" font-size="11" fill="{MUTED}">'
                   f"{text(label)}</text>")
    base = height - bottom
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{base}" y2="{base}" stroke="#9aa5b1"/>')
    for step in sorted({min(steps), max(steps)}):
        out.append(f'<text x="{x(step):.1f}" y="{base + 15}" text-anchor="middle" font-size="11" '
                   f'fill="{MUTED}">{text(number(step))}</text>')
    for index in reversed(range(len(series))):  # the run last, on top
        name, points = series[index][0], finite[index]
        ink = colour(index)
        dash = ' stroke-dasharray="6 4"' if index else ""
        if len(points) > 1:
            path = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(points))
            out.append(f'<path class="series" data-run="{text(name)}" d="{path}" fill="none" '
                       f'stroke="{ink}" stroke-width="2"{dash} stroke-linejoin="round"/>')
        if len(points) <= 40:
            out += [f'<circle class="point" data-run="{text(name)}" cx="{x(s):.1f}" cy="{y(v):.1f}" '
                    f'r="{3.4 if index == 0 else 2.6}" fill="{ink}"><title>{text(name, 140)} step '
                    f'{s}: {text(number(v, 6))}</title></circle>' for s, v in points]
    out.append("</svg>")
    return "".join(out)


def legend(names: Sequence[str], words: Optional[Sequence[str]] = None) -> str:
    """The runs' colours, as HTML: a solid line for the run, dashed for the references."""
    items = []
    for index, name in enumerate(names):
        style = "solid" if index == 0 else "dashed"
        word = f" ({text(words[index])})" if words else ""
        items.append(f'<span class="key"><span class="swatch" style="border-top:3px {style} '
                     f'{colour(index)}"></span>{text(name, 140)}{word}</span>')
    return '<div class="legend">' + "".join(items) + "</div>"
