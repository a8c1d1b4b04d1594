"""What a healthy run of a given size may need of its readers: every limit a reader puts on a
run's records, its log's evidence and its listings, derived from the run's own size (nodes,
ranks, steps) with a per-item budget, so that no constant is a cliff a big healthy run falls off.

The budgets are generous multiples of what the bundle writes per item (measured on real and
synthesized runs: a node's probe in preflight.json is 4-10 KiB, a rank's entries in
actor-placement.json and verification.json under 1 KiB, a step at most a validation step number
in verification.json, which lists only a long run's first and last rollout steps). The size
itself comes from the run's profile (run.json's, else the one postflight recorded in
verification.json, through run/runrecord.size; or the profile a reader was given). A hostile
run.json (or verification.json) cannot claim more than the MOST_* sizes, nor make a reader
take more than the CEILING_* bytes and parse cost (the byte ceiling is 50 times a 2,048 x 8 run's
largest record), CEILING_EVIDENCE log items and CEILING_ITEMS list entries, so memory and time
stay bounded on any input. A limit that is reached anyway is told as
a finding by the reader that reached it.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from ..formats import bounded

# Per-item budgets, in bytes of a JSON record.
RECORD_BASE = 16 << 20     # any run's records may be this large (the bundle's former flat cap)
RECORD_PER_NODE = 64 << 10
RECORD_PER_RANK = 8 << 10
RECORD_PER_STEP = 64
# What parsing a record may cost (bounded.cost's estimate) per byte the record may have.
MEMORY_BASE = 64 << 20
MEMORY_PER_BYTE = 8
# Items of one list or object a reader keeps (typed.py), per item of the run.
ITEMS_BASE = 4096
ITEMS_PER_RANK = 8         # a rank's checkpoint shards (3 per saved step), its placement entry
ITEMS_PER_NODE = 4
ITEMS_PER_STEP = 4         # a step's rollouts entry, its scalars
# Evidence items one scan of training.log holds (formats/trainlines.py).
EVIDENCE_BASE = 100_000
EVIDENCE_PER_RANK = 64     # transport (12 over IB), Gloo, 3 resume loads, Init of 24 communicators
EVIDENCE_PER_STEP = 8      # the step in three forms, and repeats
# Sizes a run.json may claim: far past any cluster, so only a hostile record meets them.
MOST_NODES = 1 << 14
MOST_GPUS_PER_NODE = 16
MOST_STEPS = 10_000_000
MOST_ROWS = 10_000_000
CEILING_BYTES = 1 << 30
CEILING_MEMORY = 2 << 30
CEILING_EVIDENCE = 2_000_000  # about 300 MB of held evidence; a 2,048 x 8 run holds 150,000
CEILING_ITEMS = 4_000_000  # list entries kept (file lists, record items): a few hundred MB at
# most; a 2,048 x 8 run of 100,000 steps needs 550,000


@dataclasses.dataclass(frozen=True)
class Size:
    nodes: int = 2
    gpus_per_node: int = 2
    steps: int = 2
    rows: int = 8  # rollout rows a step: TRAIN_BATCH_SIZE x ROLLOUT_N

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def record_bytes(self) -> int:
        return min(RECORD_BASE + self.nodes * RECORD_PER_NODE + self.ranks * RECORD_PER_RANK
                   + self.steps * RECORD_PER_STEP, CEILING_BYTES)

    @property
    def record_memory(self) -> int:
        return min(MEMORY_BASE + MEMORY_PER_BYTE * (self.record_bytes - RECORD_BASE), CEILING_MEMORY)

    @property
    def items(self) -> int:
        return min(ITEMS_BASE + self.ranks * ITEMS_PER_RANK + self.nodes * ITEMS_PER_NODE
                   + self.steps * ITEMS_PER_STEP, CEILING_ITEMS)

    @property
    def evidence(self) -> int:
        return min(EVIDENCE_BASE + self.ranks * EVIDENCE_PER_RANK + self.steps * EVIDENCE_PER_STEP,
                   CEILING_EVIDENCE)


def _count(values: Mapping[str, object], key: str, most: int) -> Optional[int]:
    text = str(values.get(key, "")).strip()
    if not bounded.ascii_digits(text) or len(text) > 9:
        return None
    return min(max(int(text), 1), most)


def of_values(values: Mapping[str, object]) -> Size:
    """The size a profile's values (NODES, GPUS_PER_NODE, TARGET_STEPS) describe; the default
    (the tutorial's 2 x 2, 2 steps) for what is missing or not a count."""
    default = Size()
    batch, n = _count(values, "TRAIN_BATCH_SIZE", MOST_ROWS), _count(values, "ROLLOUT_N", MOST_ROWS)
    return Size(_count(values, "NODES", MOST_NODES) or default.nodes,
                _count(values, "GPUS_PER_NODE", MOST_GPUS_PER_NODE) or default.gpus_per_node,
                _count(values, "TARGET_STEPS", MOST_STEPS) or default.steps,
                min(batch * n, MOST_ROWS) if batch and n else default.rows)


def of_profile(profile) -> Size:
    """The size of a loaded profile (run/profile.py)."""
    return of_values(getattr(profile, "values", {}) or {})
