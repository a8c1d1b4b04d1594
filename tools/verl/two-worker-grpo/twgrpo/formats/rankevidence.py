"""A rank's evidence in the training log, as a scan holds it: an NCCL communicator's Init line
(which process on which device held the rank) and a process's NCCL transport lines.

A log segment's scan comes back from its worker process holding tens of thousands of these,
and the process that asked unpickles them alone, while the others wait: each is pickled as its
fields and rebuilt by one call, not as a dataclass's default state dict (slower to load). A
Transport's IPs, networks and devices are frozen sets, replaced as they grow, never changed,
and each distinct one is held once (shared()): every rank of a segment names the same eight
IB devices, so the segment pickles that set once and its unpickling builds it once, not a set
a rank (2,048 x 8: 0.12 s of the whole log's 0.30 s to load).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple


@dataclasses.dataclass
class InitEvent:
    host: str
    pid: int
    cuda: int
    nvml: int
    bus: str
    nranks: int
    prefix_pid: Optional[int]
    line: int

    def placement(self) -> Tuple[str, int, int, int, str]:
        return (self.host, self.pid, self.cuda, self.nvml, self.bus)

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (InitEvent, (self.host, self.pid, self.cuda, self.nvml, self.bus, self.nranks,
                            self.prefix_pid, self.line))


NONE: FrozenSet[str] = frozenset()
_SHARED: Dict[FrozenSet[str], FrozenSet[str]] = {}
SHARED_MOST, SHARED_ITEMS = 4096, 64  # sets held for sharing, and items in each: bounded memory


def shared(held: FrozenSet[str], more: Iterable[str] = ()) -> FrozenSet[str]:
    """held with more added: the one object held for that set where there is one."""
    grown = held.union(more)
    same = _SHARED.get(grown)
    if same is None:
        same = grown
        if len(_SHARED) < SHARED_MOST and len(grown) <= SHARED_ITEMS:
            _SHARED[grown] = grown
    return same


@dataclasses.dataclass
class Transport:
    ib_disable: List[str] = dataclasses.field(default_factory=list)
    socket_ips: FrozenSet[str] = NONE
    networks: FrozenSet[str] = NONE
    ib_devices: FrozenSet[str] = NONE  # "mlx5_0:1/IB"

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (Transport, (self.ib_disable, self.socket_ips, self.networks, self.ib_devices))
