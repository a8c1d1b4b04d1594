"""Which peers each node tries in preflight's node-to-node rounds (reachability, the storage
trial's renamed files, Ray's ports), and how a node's report of them stays small.

Up to ALL_PAIRS_UP_TO nodes every pair is tried. A larger cluster tries a plan linear in the
nodes: each node its two neighbours on a ring and RANDOM_PEERS others drawn from the seed (the
run id, so the same run gets the same plan and preflight.json records it), so every node is
tried both ways by at least two peers and a node nobody can reach is found; 2,000 nodes try
some 12,000 pairs, not 4 million. A node reports a count of its good peers and names at most
NAMED_PEERS failed ones (Failures), so the driver holds a few hundred bytes a node.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List

ALL_PAIRS_UP_TO = 8  # nodes; beyond, a ring plus random peers
RANDOM_PEERS = 4
NAMED_PEERS = 16  # failed peers a node names; the rest are counted


def plan(ordinals: List[int], seed: str) -> Dict[int, List[int]]:
    """Each node's targets: every other node up to ALL_PAIRS_UP_TO nodes, else its ring
    neighbours and RANDOM_PEERS others (the same for the same seed)."""
    order = sorted(set(ordinals))
    if len(order) <= ALL_PAIRS_UP_TO:
        return {o: [p for p in order if p != o] for o in order}
    rng = random.Random(seed)
    count = len(order)
    targets: Dict[int, List[int]] = {}
    for at, ordinal in enumerate(order):
        chosen = {order[(at + 1) % count], order[(at - 1) % count]}
        while len(chosen) < min(2 + RANDOM_PEERS, count - 1):
            peer = order[rng.randrange(count)]
            if peer != ordinal:
                chosen.add(peer)
        targets[ordinal] = sorted(chosen)
    return targets


def expected_incoming(targets: Dict[int, List[int]]) -> Dict[int, int]:
    """How many peers will try each node."""
    counts = {o: 0 for o in targets}
    for peers in targets.values():
        for peer in peers:
            counts[peer] = counts.get(peer, 0) + 1
    return counts


def record(targets: Dict[int, List[int]], seed: str) -> Dict[str, Any]:
    """What preflight.json keeps of a round's plan: enough to see which pairs were tried and
    to draw the same plan again (plan(ordinals, seed))."""
    return {"seed": seed, "rule": "all pairs" if all(
                len(peers) == len(targets) - 1 for peers in targets.values()) else
            f"ring neighbours and {RANDOM_PEERS} peers drawn from the seed",
            "nodes": len(targets), "pairs": sum(len(peers) for peers in targets.values()),
            "targets": {str(o): peers for o, peers in sorted(targets.items())}}


class Failures:
    """A node's failed peers: the first NAMED_PEERS by name with what happened, the rest
    counted, so a report stays the same size however many peers fail."""

    def __init__(self) -> None:
        self.named: Dict[str, Any] = {}
        self.count = 0

    def add(self, peer: int, what: Any) -> None:
        self.count += 1
        if len(self.named) < NAMED_PEERS:
            self.named[str(peer)] = what
