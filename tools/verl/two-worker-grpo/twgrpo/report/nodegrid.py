"""The topology of a large run (more than 4 nodes or 4 GPUs per node): one card per Ray node in a
CSS grid that reflows with the window, so up to MAX_CARDS nodes x 8 GPUs stay legible from 900 to
1400 px with nothing clipped and no line drawn across another node. A larger run draws its
outliers and the first of its usual nodes, and says how many it draws and what kinds of nodes
(GPUs, ranks, transport) it has and how many of each. Each card is a small inline SVG of
its GPUs with the rank on each; a GPU whose UUID another node reports too, or whose bus id two
ranks of one node share, is marked as shared. Ranks are summarised per node; the full rank table
is collapsed. A CPU-only node (no GPU in Ray) gets a card that says so.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Set, Tuple

from .svg import INK, LINE, MUTED, text

TILE_W, TILE_H, GAP, PER_ROW = 56, 40, 6, 4
MAX_GPUS = 16


def needs_grid(workers: List[Dict[str, Any]], gpus_per_node: List[int]) -> bool:
    return len(workers) > 4 or max(gpus_per_node or [0]) > 4


def _gpus(worker: Dict[str, Any], detail: Dict[str, Any]) -> List[Dict[str, Any]]:
    query = detail.get("gpu_query", {}) if isinstance(detail, dict) else {}
    gpus = query.get("gpus", []) if isinstance(query, dict) else []
    gpus = [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
    if not gpus and worker.get("gpu_node", True):
        count = worker.get("gpu_count") if isinstance(worker.get("gpu_count"), int) else 0
        gpus = [{"index": i} for i in range(min(count, MAX_GPUS))]
    return gpus[:MAX_GPUS]


def shared_uuids(details: List[Dict[str, Any]]) -> Set[str]:
    """GPU UUIDs that more than one node reports: one physical GPU seen by several Ray nodes."""
    seen = Counter()
    for detail in details:
        uuids = {g.get("uuid") for g in _gpus({}, detail) if isinstance(g.get("uuid"), str)}
        seen.update(uuids)
    return {uuid for uuid, count in seen.items() if count > 1}


def _ranks(numbers: List[int]) -> str:
    """0, 1, 2, 5 -> '0–2, 5'."""
    spans, out = [], []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    for a, b in spans:
        out.append(str(a) if a == b else f"{a}–{b}")
    return ", ".join(out) or "none"


def _card_svg(gpus: List[Dict[str, Any]], mine: List[Dict[str, Any]], shared: Set[str]) -> str:
    rows = max(1, (len(gpus) + PER_ROW - 1) // PER_ROW)
    width, height = PER_ROW * (TILE_W + GAP) - GAP, rows * (TILE_H + GAP) - GAP
    buses = Counter(a.get("bus_id") for a in mine if a.get("bus_id"))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="node-svg" viewBox="0 0 {width} '
           f'{height}" width="{width}" height="{height}" role="img" font-family="sans-serif">']
    for i, gpu in enumerate(gpus):
        x, y = (i % PER_ROW) * (TILE_W + GAP), (i // PER_ROW) * (TILE_H + GAP)
        index = gpu.get("index", i)
        ranks = [a for a in mine if a.get("nvml_dev", a.get("cuda_dev")) == index]
        is_shared = gpu.get("uuid") in shared or any(buses[a.get("bus_id")] > 1 for a in ranks)
        fill, stroke = ("#dbeafe", LINE) if ranks else ("#f1f5f9", "#cbd2d9")
        dash = ' stroke-dasharray="4 2"' if is_shared else ""
        label = ",".join(f"r{a.get('rank')}" for a in ranks[:2]) or "—"
        title = f"GPU {index}" + (f" {gpu.get('name')}" if gpu.get("name") else "") + \
            (f", ranks {', '.join(str(a.get('rank')) for a in ranks)}" if ranks else ", no rank") + \
            (", shared with another node or rank" if is_shared else "")
        out.append(f'<g class="gpu{" shared" if is_shared else ""}"><title>{text(title)}</title>'
                   f'<rect x="{x}" y="{y}" width="{TILE_W}" height="{TILE_H}" rx="5" fill="{fill}" '
                   f'stroke="{stroke}"{dash}/><text x="{x + 5}" y="{y + 15}" font-size="11" '
                   f'fill="{MUTED}">GPU {text(index, 4)}{" ⇄" if is_shared else ""}</text>'
                   f'<text x="{x + 5}" y="{y + 32}" font-size="12" font-weight="bold" '
                   f'fill="{INK if ranks else MUTED}" class="rank">{text(label, 9)}</text></g>')
    out.append("</svg>")
    return "".join(out)


MAX_CARDS = 80  # cards drawn (64 nodes of 8 GPUs and a CPU-only head are all drawn); every node is in the summary table and in a group below the cards


def by_node(workers: List[Dict[str, Any]], actors: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """Each worker's ranks (by node id, or by hostname for a rank without one), in one pass."""
    ids = {w.get("node_id"): i for i, w in enumerate(workers) if w.get("node_id")}
    hosts = {w.get("hostname"): i for i, w in enumerate(workers)}
    mine: List[List[Dict[str, Any]]] = [[] for _ in workers]
    for actor in actors:
        at = ids.get(actor.get("node_id")) if actor.get("node_id") else hosts.get(actor.get("hostname"))
        if at is not None:
            mine[at].append(actor)
    return mine


def _shape(worker: Dict[str, Any], mine: List[Dict[str, Any]]) -> Tuple[Any, ...]:
    """What makes nodes alike: GPU count and models, ranks placed, NCCL transports."""
    names = worker.get("gpu_names") if isinstance(worker.get("gpu_names"), list) else []
    return (worker.get("gpu_count"), tuple(sorted({str(n) for n in names})), len(mine),
            tuple(sorted({str(a.get("nccl_transport", "?")) for a in mine})))


def _described(shape: Tuple[Any, ...]) -> str:
    count, names, ranks, transports = shape
    return (f"{count if isinstance(count, int) else '?'} GPU(s) {'/'.join(names) or ''}, "
            f"{ranks} rank(s), NCCL {'/'.join(transports) or '—'}")


def groups(workers: List[Dict[str, Any]], mine: List[List[Dict[str, Any]]]) -> Tuple[List[int], str]:
    """(the workers to draw: outliers first, then the first of the usual kind, in node order,
    at most MAX_CARDS; a sentence saying how many are drawn and what the nodes are like)."""
    shapes = [_shape(w, m) for w, m in zip(workers, mine)]
    counted = Counter(shapes).most_common()
    usual = counted[0][0] if counted else None
    outliers = [i for i, shape in enumerate(shapes) if shape != usual]
    drawn = outliers[:MAX_CARDS // 2]
    drawn += [i for i in range(len(workers)) if shapes[i] == usual][:MAX_CARDS - len(drawn)]
    told = "; ".join(f"{count} node(s): {_described(shape)}" for shape, count in counted[:8])
    more = f"; and {len(counted) - 8} more kinds" if len(counted) > 8 else ""
    odd = (f" Outliers (unlike the {counted[0][1]} usual nodes): "
           + ", ".join(str(workers[i].get("hostname", "?")) for i in outliers[:20])
           + (f" and {len(outliers) - 20} more" if len(outliers) > 20 else "") + ".") if outliers else ""
    head = (f"Drawn: {len(drawn)} of {len(workers)} nodes (outliers first); every node is in the "
            "table below." if len(drawn) < len(workers) else f"Drawn: all {len(workers)} nodes.")
    return sorted(drawn), f"{head} {told}{more}.{odd}"


def cards(workers: List[Dict[str, Any]], details: List[Dict[str, Any]],
          actors: List[Dict[str, Any]], transport: str) -> str:
    by_id = {d.get("node_id"): d for d in details if isinstance(d, dict)}
    shared = shared_uuids(list(by_id.values()))
    mine_of = by_node(workers, actors)
    drawn, told = groups(workers, mine_of)
    out = [f'<p class="sub node-groups">{text(told, 4000)}</p><div class="node-grid topology-grid">']
    for at in drawn:
        worker, mine = workers[at], mine_of[at]
        host = worker.get("hostname", "?")
        gpus = _gpus(worker, by_id.get(worker.get("node_id"), {}))
        role = "head" if worker.get("is_head") else "worker"
        kind = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" if gpus else "CPU only"
        ranks = _ranks([a["rank"] for a in mine if isinstance(a.get("rank"), int)])
        out.append(f'<figure class="node-card node" data-hostname="{text(host)}">'
                   f'<figcaption><b>node {text(worker.get("ordinal", "?"))} · {text(host, 40)}</b>'
                   f'<span>{text(worker.get("node_ip", "?"), 40)} · Ray {role} · {kind}</span>'
                   f'<span class="ranks">ranks {text(ranks, 80)}</span></figcaption>'
                   + (_card_svg(gpus, mine, shared) if gpus else
                      '<p class="cpu-only">no GPU: verl places no rank here</p>')
                   + "</figure>")
    out.append(f'</div><p class="transport">{text(transport, 160)}</p>')
    return "".join(out)


def ranks_summary(workers: List[Dict[str, Any]], actors: List[Dict[str, Any]]) -> str:
    """One row per node (ranks as spans), for runs whose full rank table is long; every node,
    so the browser's find reaches any host of thousands."""
    rows = []
    for worker, mine in zip(workers, by_node(workers, actors)):
        devices = sorted({str(a.get("nccl_transport", "?")) for a in mine}) or ["—"]
        rows.append(f'<tr><td>{text(worker.get("hostname", "?"))}</td>'
                    f'<td>{text(worker.get("node_ip", "?"))}</td><td class="num">{len(mine)}</td>'
                    f'<td>{text(_ranks([a["rank"] for a in mine if isinstance(a.get("rank"), int)]))}'
                    f'</td><td>{text(", ".join(devices))}</td></tr>')
    return ('<table class="rank-summary"><tr><th>host</th><th>IP</th><th>ranks</th>'
            '<th>which</th><th>NCCL</th></tr>' + "".join(rows) + "</table>")
