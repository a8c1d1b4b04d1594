"""The report page: one self-contained HTML file (inline CSS and SVG, no script, no network).

It must open from shared storage on an offline cluster, and artifacts may be hostile: every
value goes through svg.text() (escaped), and a Content-Security-Policy forbids scripts and
remote loads even if something slipped through.
"""
from __future__ import annotations

from typing import Any, Tuple

from . import nodegrid, svg
from ..run.humane import duration, number, size, topology, when
from . import lineage_page
from .reference import reference_line
from .runview import KEY_SCALARS, MAX_FINDINGS, RunView
from .style import CSS
from .svg import text
from ..run.runfolder import RunFolder

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MAX_RANK_ROWS = 1024  # rows of the every-rank table; the per-node table holds all ranks


def _phase_card(phase) -> str:
    state = phase.status
    css = "passed" if state == "passed" else "failed" if state == "failed" else \
        "bad" if state.startswith(("exit", "stopped")) else "other"
    bits = []
    if phase.checks:
        failed = len(phase.failed_checks)
        bits.append(f"{phase.checks} checks" + (f", {failed} failed" if failed else ""))
    if phase.seconds is not None:
        bits.append(duration(phase.seconds))
    if phase.name == "training" and phase.exit_status is not None:
        bits.append(f"exit status {phase.exit_status}")
    return (f'<div class="phase" data-phase="{text(phase.name)}"><div class="name">'
            f'{text(phase.name)}</div><div class="state {css}">{text(state)}</div>'
            f'<div class="detail">{text(" · ".join(bits) or "no record")}</div></div>')


def reward_text(p) -> str:
    """The pinned reward function as recorded: file, function and the start of its hash."""
    return (f"{p.get('REWARD_FILE')}: {p.get('REWARD_FUNCTION') or 'compute_score'} "
            f"(sha256 {str(p.get('REWARD_SHA256') or 'not pinned')[:16]})")


def data_text(p) -> str:
    """The data's own converter as recorded: the script and the start of its hash."""
    return (f"{p.get('DATASET_ID')} made by {p.get('DATA_CONVERTER')} "
            f"(sha256 {str(p.get('DATA_CONVERTER_SHA256') or 'not pinned')[:16]})")


def _facts(view: RunView) -> str:
    p, run = view.profile, view.run
    total = view.took()
    items = [
        ("profile", f"{view.profile_name}"),
        ("topology", topology(p.get("NODES"), p.get("GPUS_PER_NODE"), p.get("GPU_MODEL"))),
        ("training", f"{lineage_page.steps_text(view)} · batch {p.get('TRAIN_BATCH_SIZE', '?')}"
                     f" x {p.get('ROLLOUT_N', '?')} responses · lr {number(_float(p.get('LEARNING_RATE')))}"),
        ("rollout", f"{p.get('ROLLOUT_ENGINE', '?')} · max {p.get('MAX_RESPONSE_LENGTH', '?')} "
                    "response tokens"),
        *([("reward", reward_text(p))] if p.get("REWARD_FILE") else []),
        *([("data", data_text(p))] if p.get("DATA_CONVERTER") else []),
        ("started", when(run.get("started_at"))),
        ("took", duration(total)),
        ("driver host", str(run.get("driver_host", "—"))),
        ("python", str(run.get("python", "—"))),
        ("image", str(run.get("image", "not recorded (TWGRPO_IMAGE unset)"))),
        ("storage root", str(run.get("storage_root", "—"))),
    ]
    return '<div class="facts">' + "".join(
        f"<div><span>{text(k)}</span>{text(v)}</div>" for k, v in items) + "</div>"


def _float(value: Any):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _timeline(view: RunView) -> str:
    longest = max([ph.seconds or 0 for ph in view.phases] + [1])
    rows = []
    for ph in view.phases:
        width = 100 * (ph.seconds or 0) / longest
        css = "failed" if ph.status not in ("passed", "running", "not run") else ""
        bar = f'<div class="bar {css}" style="width:{width:.1f}%"></div>' if ph.started else ""
        rows.append(f"<tr><td>{text(ph.name)}</td><td>{text(when(ph.started) if ph.started else '—')}"
                    f'</td><td class="num">{text(duration(ph.seconds))}</td><td>{text(ph.status)}'
                    f'</td><td class="track">{bar}</td></tr>')
    return ('<table class="timeline"><tr><th>phase</th><th>started</th><th>took</th><th>status</th>'
            "<th>share of the longest phase</th></tr>" + "".join(rows) + "</table>")


def _transport(view: RunView) -> Tuple[str, str]:
    """(a short label for the picture, the evidence in a sentence)."""
    actors = view.actors
    if not actors:
        text_ = "No rank placement yet: postflight writes actor-placement.json from training.log."
        return "ranks: not placed yet", text_
    socket = all(a.get("nccl_transport") == "Socket" for a in actors)
    ib = all(a.get("nccl_transport") == "IB" for a in actors)
    rdma_off = all(a.get("rdma_disabled") for a in actors)
    world = len(actors)
    peers = sorted({str(a.get("connected_peer_ranks", "?")) for a in actors})
    if ib:
        hcas = sorted({len(a.get("ib_devices") or []) for a in actors})
        short = (f"{world} ranks · NCCL over InfiniBand · "
                 f"{'/'.join(map(str, hcas))} IB ports per rank")
        return short, (f"Evidence from training.log: all {world} ranks finished NCCL init and "
                       "logged NET/IB : Using with their IB devices and Using network IB "
                       "(NCCL_IB_DISABLE set by environment to 0).")
    nccl = "NCCL over Socket (TCP)" if socket else "NCCL transport not proven to be Socket"
    rdma = "RDMA off" if rdma_off else "RDMA not proven off"
    short = f"{world} {'rank' if world == 1 else 'ranks'} · {nccl} · {rdma}"
    gloo = ("a single rank has no Gloo peers" if world == 1 else
            f"each rank's Gloo full mesh connected {', '.join(peers)} of {world - 1} peers")
    long = (f"Evidence from training.log: {'the rank' if world == 1 else f'all {world} ranks'} "
            f"finished NCCL init; {nccl}, {rdma} (NCCL_IB_DISABLE set by environment to 1); {gloo}.")
    return short, long


def _ranks_table(view: RunView) -> str:
    hosts = {w.get("node_id"): w.get("hostname") for w in view.workers}  # rows are drawn in one pass
    rows = "".join(
        f'<tr><td>{text(a.get("rank"))}</td><td>{text(hosts.get(a.get("node_id"), a.get("hostname", "?")))}'
        f'</td><td>{text(a.get("node_ip", "?"))}</td><td>{text(a.get("pid", "?"))}</td>'
        f'<td>{text(a.get("cuda_dev", "?"))}</td><td>{text(a.get("nccl_transport", "?"))}</td>'
        f'<td>{"off" if a.get("rdma_disabled") else "on" if a.get("nccl_transport") == "IB" else "?"}'
        '</td></tr>' for a in view.actors[:MAX_RANK_ROWS])
    if not rows:
        return ""
    cut = (f'<p class="sub">The first {MAX_RANK_ROWS} of {len(view.actors)} ranks; the table per '
           "node above holds every rank.</p>" if len(view.actors) > MAX_RANK_ROWS else "")
    return (cut + "<table><tr><th>rank</th><th>host</th><th>IP</th><th>pid</th><th>CUDA device</th>"
            "<th>NCCL</th><th>RDMA</th></tr>" + rows + "</table>")


def _chart(tag: str, points, small: bool = False, resumed_at=None, reference=None) -> str:
    last = f"step {points[-1][0]}: {number(points[-1][1])}" if points else "no points"
    if reference:
        last += f" · reference {number(reference[-1][1])}"
    size_ = (240, 118, resumed_at, reference) if small else (300, 150, resumed_at, reference)
    return (f'<figure class="chart{" small" if small else ""}" data-tag="{text(tag)}"><figcaption>'
            f'<span class="tag">{text(tag)}</span><span class="last">{text(last)}</span></figcaption>'
            f"{svg.line_chart(points, *size_)}</figure>")


def _charts(view: RunView) -> str:
    if not view.series:
        return '<p class="sub">No TensorBoard scalars could be read (see the findings).</p>'
    key = [(t, p) for t, p in view.series if t in KEY_SCALARS]
    rest = [(t, p) for t, p in view.series if t not in KEY_SCALARS]
    ref = view.reference[1] if view.reference else {}
    out = [reference_line(view), "<h3>Key metrics</h3>", '<div class="charts">',
           *(_chart(t, p, False, view_resumed(view), ref.get(t)) for t, p in key), "</div>"]
    if rest:
        out += [f"<h3>Every other scalar, A to Z ({len(rest)})</h3>", '<div class="charts small">',
                *(_chart(t, p, True, view_resumed(view), ref.get(t)) for t, p in rest), "</div>"]
    if view.more_tags:
        out.append(f'<p class="sub">{len(view.more_tags)} more scalars are in TensorBoard: '
                   f'{text(", ".join(view.more_tags[:20]), 600)}</p>')
    return "".join(out)


def view_resumed(view: RunView):
    """The step a resumed run started after (its charts mark it), None for a fresh run."""
    return view.lineage.parent[1] if view.lineage and view.lineage.parent else None


def _samples(view: RunView) -> str:
    if not view.samples:
        return '<p class="sub">No rollout file could be read.</p>'
    out = []
    for step, data in sorted(view.samples.items()):
        s = data["scores"]
        out.append(f"<h3>Step {text(step)}: {text(data['count'])} responses, score mean "
                   f"{text(number(s['mean']))}, min {text(number(s['min']))}, max "
                   f"{text(number(s['max']))}" + (f", {data['bad']} malformed" if data["bad"] else "")
                   + f" (the first {len(data['rows'])} shown)</h3>")
        rows = "".join(f'<tr><td><pre>{text(r["input"], 700)}</pre></td><td><pre>{text(r["output"], 700)}'
                       f'</pre></td><td>{text(r["gts"], 80)}</td><td class="num">'
                       f'{text(number(r["score"]))}</td></tr>' for r in data["rows"])
        out.append('<table class="samples"><tr><th>prompt</th><th>response</th><th>expected</th>'
                   f"<th>score</th></tr>{rows}</table>")
    return "".join(out)


def _shards(view: RunView) -> str:
    if not view.shards:
        return '<p class="sub">No checkpoint shard found.</p>'
    rows = "".join(f'<tr><td class="mono">{text(name, 160)}</td><td class="num">{text(size(n))}'
                   f"</td><td>{text(state)}</td></tr>" for name, n, state in view.shards)
    return "<table><tr><th>shard</th><th>size</th><th>state</th></tr>" + rows + "</table>"


def _findings(view: RunView) -> str:
    if not view.findings and view.verdict.status != "SUCCESS":
        return (f'<p class="sub">No findings in the records, but the run has no SUCCESS: '
                f"{text(view.verdict.summary, 600)}</p>")
    if not view.findings:
        return '<p class="ok-line">No findings: every check passed and every record was readable.</p>'
    out, groups = [], view.finding_groups()
    for group in groups[:MAX_FINDINGS]:  # the first few of each id, its hint once
        items = "".join(f"<div>{text(view.shown(f.obj), 160)}: {text(f.message, 1200)}</div>"
                        for f in group.shown)
        more = f'<div class="sub">{text(view.unshown(group, len(group.shown)))}</div>' if group.more else ""
        count = f" × {group.total:,}" if group.total > 1 else ""
        hint = f'<div class="hint">What to do: {text(group.hint, 600)}</div>' if group.hint else ""
        out.append(f'<div class="finding {group.level}"><span class="id">{text(group.id)}</span>'
                   f'{count} <span class="mono">{text(group.where)}</span>{items}{more}{hint}</div>')
    if len(groups) > MAX_FINDINGS:
        out.append(f'<p class="sub">... and {len(groups) - MAX_FINDINGS:,} more kinds of finding, '
                   "not drawn: the phases' records have them</p>")
    return "".join(out)


def _provenance(view: RunView) -> str:
    run, p = view.run, view.profile
    ev = view.records.get("inputs", {}).get("evidence", {})
    ev = ev if isinstance(ev, dict) else {}
    manifest = ev.get("dataset_manifest", {}) if isinstance(ev.get("dataset_manifest"), dict) else {}
    rows = [
        ("bundle SHA256SUMS", run.get("bundle_sums_sha256", "—")),
        ("launcher", run.get("launcher_sha256", "—")),
        ("verl", f"commit {ev.get('verl_commit', p.get('VERL_COMMIT', '—'))}"
                 + (f" · tree SHA256SUMS {ev['verl_sums_sha256']}" if ev.get("verl_sums_sha256")
                    else " (clean tree by git status; no tree manifest)" if ev.get("verl_clean")
                    else "")),
        ("model", f"{p.get('MODEL_HUB', '?')}/{p.get('MODEL_ID', '?')} @ {p.get('MODEL_REVISION', '?')}"
                  f" · SHA256SUMS {ev.get('model_sums_sha256', p.get('MODEL_SUMS_SHA256', '—'))}"),
        ("data", f"{p.get('DATASET_HUB', '?')}/{p.get('DATASET_ID', '?')} @ "
                 f"{manifest.get('revision', p.get('DATASET_REVISION', '?'))} · SHA256SUMS "
                 f"{ev.get('data_sums_sha256', p.get('DATA_SUMS_SHA256', '—'))}"),
        ("rows", ", ".join(f"{k} {number(v)}" for k, v in sorted(ev.get("parquet_rows", {}).items()))
         if isinstance(ev.get("parquet_rows"), dict) else "—"),
    ]
    table = "<table>" + "".join(f'<tr><th>{text(k)}</th><td class="mono">{text(v, 300)}</td></tr>'
                                for k, v in rows) + "</table>"
    command = run.get("training_command")
    if isinstance(command, list):
        table += ("<details><summary>the training command</summary><pre>"
                  + text(" ".join(str(c) for c in command[:400]), 40000) + "</pre></details>")
    return table


def _topology(view: RunView) -> str:
    if not view.workers:
        return '<p class="sub">No node list (preflight.json is missing or unreadable).</p>'
    details = view.records.get("preflight", {}).get("nodes", [])
    details = details if isinstance(details, list) else []
    short, long = _transport(view)
    counts = [w.get("gpu_count") for w in view.workers if isinstance(w.get("gpu_count"), int)]
    if nodegrid.needs_grid(view.workers, counts):  # many nodes or GPUs: cards that reflow
        return (f'<div class="figure-wrap grid">{nodegrid.cards(view.workers, details, view.actors, short)}'
                f'<p class="sub">{text(long, 600)}</p></div>'
                + nodegrid.ranks_summary(view.workers, view.actors)
                + f"<details><summary>every rank ({len(view.actors)})</summary>{_ranks_table(view)}"
                "</details>")
    picture = svg.topology(view.workers, details, view.actors, short)
    return (f'<div class="figure-wrap">{picture}<p class="sub">{text(long, 600)}</p></div>'
            + _ranks_table(view))


def render(view: RunView, generated_at: str) -> str:
    v = view.verdict
    notes = "".join(f'<div class="note">{text(n, 2000)}</div>' for n in view.notes())
    conflicts = "".join(f'<div class="note warn">Conflict: {text(c, 600)}</div>' for c in v.conflicts)
    conflicts += "".join(f'<div class="note warn">An earlier SUCCESS was superseded by a failing '
                         f're-run and kept as {text(name, 120)}</div>' for name in v.superseded)
    word = v.status
    why = v.summary.split(": ", 1)[1] if v.summary.startswith(word + ":") else v.summary
    board = str(RunFolder(view.run_dir).tensorboard)
    sections = [
        f"<h1>{text(view.run_id)}</h1>",
        f'<p class="sub">two-worker GRPO run · profile {text(view.profile_name)} · '
        f"{text(topology(view.profile.get('NODES'), view.profile.get('GPUS_PER_NODE'), view.profile.get('GPU_MODEL')))}</p>",
        f'<section class="banner {text(word)}" id="verdict"><div class="word">{text(word)}</div>'
        f'<div class="why">{text(why, 400)}</div>'
        + lineage_page.resume_line(view)
        + (f'<div class="checks">Failed checks — {text(view.failed_checks(), 600)}</div>'
           if view.failed_checks() else "") + "</section>", conflicts,
        '<div class="phases">' + "".join(_phase_card(ph) for ph in view.phases) + "</div>",
        notes, _facts(view),
        f'<h2 id="findings">Findings ({view.finding_total():,})</h2>', _findings(view),
        '<h2 id="timeline">Timeline</h2>', _timeline(view),
        '<h2 id="lineage">Lineage</h2>', lineage_page.section(view),
        '<h2 id="topology">Topology</h2>', _topology(view),
        '<h2 id="metrics">Metrics over steps</h2>',
        '<p class="sub">Each chart: the training step across, the scalar\'s value up, read from the run\'s TensorBoard events.</p>',
        _charts(view),
        '<h2 id="rollouts">Rollout samples</h2>', _samples(view),
        '<h2 id="checkpoint">Checkpoint</h2>', _shards(view),
        '<h2 id="provenance">Inputs and provenance</h2>', _provenance(view),
        f"<footer>Written {text(when(generated_at))} by verify-two-worker-grpo-v1.py report from "
        f"the run folder {text(view.run_dir, 400)}. Every scalar over every step: "
        f"<code>tensorboard --logdir {text(board, 400)}</code></footer>",
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{text(word)} · {text(view.run_id)}</title><style>{CSS}</style></head>"
            "<body><main>" + "".join(sections) + "</main></body></html>\n")
