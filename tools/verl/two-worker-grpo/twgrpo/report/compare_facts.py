"""What ran and how it went, for make compare: one row per fact, a value per run.

Each fact is read from a run's view (runview.py reads and bounds the records); a value is a
short string, or None when the run does not record it (then that fact cannot be compared and
says so). The run's own folder and its storage root are written as <run folder> and <storage>
first, so two runs on two volumes compare on what they ran.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Sequence

from ..run.humane import duration, number, repeats, size
from ..run.profile_keys import DEFAULTS
from ..run.runfolder import runs_dir
from .runview import RunView

# The order a difference is named in: the first aspect that differs heads the headline.
ASPECTS = ("pins", "recipe", "bundle", "topology", "environment", "lineage")
PIN_KEYS = ("VERL_COMMIT", "VERL_REPO_URL", "VERL_SUMS_SHA256", "MODEL_HUB", "MODEL_ID",
            "MODEL_REVISION", "MODEL_SUMS_SHA256", "MODEL_WEIGHTS", "DATASET_HUB", "DATASET_ID",
            "DATASET_REVISION", "DATASET_VARIANT", "DATA_SUMS_SHA256", "TRAIN_ROWS", "TEST_ROWS")
TOPOLOGY_KEYS = ("NODES", "GPUS_PER_NODE", "GPU_MODEL", "MIN_DRIVER", "NCCL_TRANSPORT",
                 "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX")
LABEL_KEYS = ("PROFILE_NAME",)  # a name: the values it stands for are compared one by one
ALWAYS = ("image", "reward")  # asked for, recorded by no bundle yet: shown as not recorded
# Training-command overrides that belong to another aspect than the recipe.
OVERRIDE_ASPECT = {"trainer.nnodes": "topology", "trainer.n_gpus_per_node": "topology",
                   "trainer.resume_mode": "lineage", "trainer.resume_from_path": "lineage",
                   "trainer.del_local_ckpt_after_load": "lineage"}
MAX_OVERRIDES = 400
MAX_KEYS = 200  # profile keys compared (a profile has about 50; a forged run.json may hold more)
MAX_VALUE = 300  # characters of one value kept


@dataclasses.dataclass
class Fact:
    aspect: str
    what: str
    values: List[Optional[str]]

    def state(self, i: int) -> str:
        """'same', 'differs' or 'unknown' (not recorded by one of the two) for run 0 vs run i."""
        a, b = self.values[0], self.values[i]
        if a is None or b is None:
            return "unknown"
        return "same" if a == b else "differs"


def _cut(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def as_dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def profile_values(view: RunView) -> Dict[str, str]:
    """The run's recorded profile values, a key recorded before it existed at its default."""
    values = as_dict(as_dict(view.run.get("profile")).get("values"))
    if not values:
        return {}
    return {**DEFAULTS, **{k: str(v) for k, v in values.items()}}


def normalize(text: str, view: RunView) -> str:
    """<run folder> and <storage> in place of this run's folder and storage root (and <RUN_ID>
    in the run's NCCL debug pipe name)."""
    root = view.run.get("storage_root")
    if isinstance(root, str) and len(root) > 1:
        root = root.rstrip("/")
        recorded = view.run.get("run_id")  # a copied folder keeps the paths its run wrote
        for run_id in {view.run_id, recorded if isinstance(recorded, str) and recorded else view.run_id}:
            text = text.replace(str(runs_dir(root) / run_id), "<run folder>")
            # the NCCL debug pipe: node-local, named by the run (the launcher's TORCH_NCCL_DEBUG_INFO_PIPE_FILE)
            text = text.replace(f"twgrpo-nccl-{run_id}-rank_", "twgrpo-nccl-<RUN_ID>-rank_")
        text = text.replace(root, "<storage>")
    return text


def overrides(view: RunView) -> Dict[str, str]:
    """key -> value of the training command's Hydra overrides, normalized."""
    argv = [a for a in _list(view.run.get("training_command"))[:MAX_OVERRIDES] if isinstance(a, str)]
    if "verl.trainer.main_ppo" in argv:
        argv = argv[argv.index("verl.trainer.main_ppo") + 1:]
    out = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq:
            out[key] = normalize(value, view)
    return out


def _nodes(view: RunView) -> List[Dict[str, Any]]:
    return [n for n in _list(view.records.get("preflight", {}).get("nodes")) if isinstance(n, dict)]


def _packages(view: RunView) -> Dict[str, Optional[str]]:
    """package -> its version(s) over the nodes ('2.49.2', or '2.49.2 / 2.48.0' when mixed)."""
    seen: Dict[str, List[str]] = {}
    for node in _nodes(view)[:64]:
        for name, info in list(as_dict(node.get("packages")).items())[:64]:
            version = as_dict(info).get("version")
            seen.setdefault(str(name), [])
            text = "absent" if version is None else str(version)
            if text not in seen[str(name)]:
                seen[str(name)].append(text)
    return {name: " / ".join(versions) for name, versions in seen.items()}


def _ranks_per_node(view: RunView) -> Optional[str]:
    if not view.actors:
        return None
    counts: Dict[str, int] = {}
    for actor in view.actors:
        key = str(actor.get("node_id") or actor.get("hostname") or "?")
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.values(), reverse=True)  # past 16 nodes, each run once: 8 (x2048)
    return " + ".join(map(str, ordered)) if len(ordered) <= 16 else repeats(ordered)


def _transport(view: RunView) -> Optional[str]:
    kinds = sorted({str(a.get("nccl_transport", "?")) for a in view.actors})
    if not kinds:
        return None
    rdma = {bool(a.get("rdma_disabled")) for a in view.actors}
    return "/".join(kinds) + (", RDMA off" if rdma == {True} else ", RDMA on" if rdma == {False}
                              else ", RDMA mixed")


def _gpus(view: RunView) -> Optional[str]:
    if not view.workers:
        return None
    names: Dict[str, int] = {}
    for worker in view.workers:
        for name in _list(worker.get("gpu_names"))[:64]:
            names[str(name)] = names.get(str(name), 0) + 1
    return ", ".join(f"{count} x {name}" for name, count in sorted(names.items())) or "no GPU"


def _drivers(view: RunView) -> Optional[str]:
    found = sorted({str(d) for w in view.workers for d in _list(w.get("driver"))[:8]})
    return ", ".join(found) if found else None


def _inputs(view: RunView) -> Dict[str, Any]:
    return as_dict(view.records.get("inputs", {}).get("evidence"))


def _lineage(view: RunView) -> Dict[str, Optional[str]]:
    lin = view.lineage
    if lin is None:
        return {"resumed from": None, "steps inherited": None}
    parent = f"{lin.parent[0]} at step {lin.parent[1]}" if lin.parent else "— (a fresh run)"
    return {"resumed from": parent, "steps inherited": str(lin.inherited)}


def what_ran(views: Sequence[RunView]) -> List[Fact]:
    """Every fact of what the runs ran, in aspect order."""
    facts: List[Fact] = []

    def add(aspect: str, what: str, get) -> None:
        facts.append(Fact(aspect, what, [_cut(get(v)) for v in views]))

    profiles = [profile_values(v) for v in views]
    keys = sorted(set().union(*profiles))[:MAX_KEYS] if profiles else []
    for key in PIN_KEYS:
        if any(key in p for p in profiles):
            facts.append(Fact("pins", key, [_cut(p.get(key)) if p else None for p in profiles]))
    add("pins", "verl tree SHA256SUMS (inputs)", lambda v: _inputs(v).get("verl_sums_sha256"))
    add("pins", "model SHA256SUMS (inputs)", lambda v: _inputs(v).get("model_sums_sha256"))
    add("pins", "data SHA256SUMS (inputs)", lambda v: _inputs(v).get("data_sums_sha256"))
    add("pins", "data converter", lambda v: as_dict(_inputs(v).get("dataset_manifest")).get("converter"))
    add("pins", "reward", lambda v: as_dict(_inputs(v).get("reward")).get("sha256")
        or _inputs(v).get("reward_sha256"))
    for key in keys:
        if key not in PIN_KEYS and key not in TOPOLOGY_KEYS and key not in LABEL_KEYS:
            facts.append(Fact("recipe", key, [_cut(p.get(key)) if p else None for p in profiles]))
    commands = [overrides(v) if v.run.get("training_command") else {} for v in views]
    for key in sorted(set().union(*commands)):
        if key in ("trainer.experiment_name",):  # the RUN_ID itself, already normalized away
            continue
        values = [c.get(key, "(not set)") if c else None for c in commands]
        facts.append(Fact(OVERRIDE_ASPECT.get(key, "recipe"), f"override {key}",
                          [_cut(x) for x in values]))
    add("bundle", "bundle version", lambda v: v.run.get("bundle_version"))
    add("bundle", "bundle SHA256SUMS", lambda v: v.run.get("bundle_sums_sha256"))
    add("bundle", "launcher sha256", lambda v: v.run.get("launcher_sha256"))
    for key in TOPOLOGY_KEYS:
        if any(key in p for p in profiles):
            facts.append(Fact("topology", key, [_cut(p.get(key)) if p else None for p in profiles]))
    add("topology", "world size", lambda v: as_dict(v.run.get("profile")).get("world_size"))
    add("topology", "Ray nodes (preflight)", lambda v: len(v.workers) if v.workers else None)
    add("topology", "GPUs (preflight)", _gpus)
    add("topology", "ranks per node (training.log)", _ranks_per_node)
    add("topology", "NCCL transport", _transport)
    add("environment", "image", lambda v: v.run.get("image"))
    add("environment", "python", lambda v: v.run.get("python"))
    add("environment", "NVIDIA driver", _drivers)
    packages = [_packages(v) for v in views]
    for name in sorted(set().union(*packages))[:64]:
        facts.append(Fact("environment", f"package {name}",
                          [_cut(p.get(name, "absent")) if p else None for p in packages]))
    add("lineage", "resumed from", lambda v: _lineage(v)["resumed from"])
    add("lineage", "steps inherited", lambda v: _lineage(v)["steps inherited"])
    return [f for f in facts if f.what in ALWAYS or any(x is not None for x in f.values)]


def labels(views: Sequence[RunView]) -> List[Fact]:
    """Facts shown for orientation, never counted as a difference: the profile's name, the
    volume, the driver host, the start."""
    return [Fact("label", what, [_cut(get(v)) for v in views]) for what, get in (
        ("profile", lambda v: v.profile_name), ("storage root", lambda v: v.run.get("storage_root")),
        ("driver host", lambda v: v.run.get("driver_host")),
        ("started", lambda v: v.run.get("started_at")))]


def _mean(points) -> Optional[float]:
    values = [v for _, v in points if math.isfinite(v)]
    mean = sum(values) / len(values) if values else None
    return mean if mean is None or math.isfinite(mean) else None


def _own(view: RunView, tag: str):
    """A scalar's points the run logged itself (not its parents')."""
    points = dict(view.series).get(tag, [])
    start = view.lineage.parent[1] if view.lineage and view.lineage.parent else None
    return [(s, v) for s, v in points if start is None or s > start]


def checkpoint_bytes(view: RunView) -> Optional[int]:
    """Bytes of the shards of the run's last checkpoint step."""
    steps: Dict[str, int] = {}
    for name, count, _ in view.shards:
        if isinstance(count, int) and name.startswith("checkpoints/global_step_"):
            step = name.split("/")[1]
            steps[step] = steps.get(step, 0) + count
    if not steps:
        return None
    return steps[max(steps, key=lambda s: int(s.rsplit("_", 1)[1]) if s.rsplit("_", 1)[1].isdigit() else -1)]


def how_it_went(views: Sequence[RunView]) -> List[Dict[str, Any]]:
    """Rows of {what, values (numbers or None), shown (text)}: never judged, only set side by
    side with their ratio to the first run."""
    rows = [("verdict", [v.verdict.status for v in views], None)]
    rows.append(("took", [v.took() for v in views], duration))
    names = []
    for view in views:
        names += [ph.name for ph in view.phases if ph.name not in names]
    for name in names:
        rows.append((f"phase {name}", [next((ph.seconds for ph in v.phases if ph.name == name), None)
                                        for v in views], duration))
    rows.append(("seconds per step (own steps)", [_mean(_own(v, "timing_s/step")) for v in views],
                 lambda x: number(x)))
    rows.append(("throughput, tokens/s (own steps)", [_mean(_own(v, "perf/throughput")) for v in views],
                 lambda x: number(x)))
    rows.append(("checkpoint size (last step)", [checkpoint_bytes(v) for v in views], size))
    out = []
    for what, values, fmt in rows:
        shown = [str(x) if fmt is None else fmt(x) if x is not None else "—" for x in values]
        out.append({"what": what, "values": values, "shown": shown})
    return out
