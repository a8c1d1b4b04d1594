"""A rank's evidence in the training log, as a scan holds it: an NCCL communicator's Init line
(which process on which device held the rank) and a process's NCCL transport lines.

A log segment's scan comes back from its worker process holding tens of thousands of these,
and the process that asked unpickles them alone, while the others wait: each is pickled as its
fields and rebuilt by one call, not as a dataclass's default state dict (slower to load). A
scan's transports are pickled as frozen(): each distinct set of IPs, networks or devices is
one frozen set held by every transport naming it (every rank of a segment names the same eight
IB devices), so it is pickled once and unpickled once, not a set a rank (2,048 x 8: 0.12 s of
the whole log's 0.30 s to load). A set grows in place (grown()): a frozen one, as a scan comes
back, is copied once, when it first grows.
"""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple


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


NONE: FrozenSet[str] = frozenset()  # a transport's sets until a line names an item


def grown(held: AbstractSet[str], more: Iterable[str]) -> Set[str]:
    """held with more added, in place where held is a set already (a frozen set, as a scan
    comes back or as a transport starts, is copied first): an item costs the same however
    many a process names."""
    if type(held) is not set:
        held = set(held)
    held.update(more)
    return held


@dataclasses.dataclass
class Transport:
    ib_disable: List[str] = dataclasses.field(default_factory=list)
    socket_ips: AbstractSet[str] = NONE
    networks: AbstractSet[str] = NONE
    ib_devices: AbstractSet[str] = NONE  # "mlx5_0:1/IB"

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (Transport, (self.ib_disable, self.socket_ips, self.networks, self.ib_devices))


def frozen(transport: Dict[Any, Transport]) -> Dict[Any, Transport]:
    """The transports as a scan is pickled: copies whose sets are frozen, each distinct set one
    object however many transports name it (the originals are left as they are)."""
    held: Dict[FrozenSet[str], FrozenSet[str]] = {}

    def one(items: AbstractSet[str]) -> FrozenSet[str]:
        if not items:
            return NONE
        made = frozenset(items)
        return held.setdefault(made, made)

    return {key: Transport(t.ib_disable, one(t.socket_ips), one(t.networks), one(t.ib_devices))
            for key, t in transport.items()}
