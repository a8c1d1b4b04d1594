"""A rank's evidence in the training log, as a scan holds it: an NCCL communicator's Init line
(which process on which device held the rank) and a process's NCCL transport lines.

A log segment's scan comes back from its worker process holding tens of thousands of these,
and the process that asked unpickles them alone, while the others wait: each is pickled as its
fields and rebuilt by one call, not as a dataclass's default state dict (slower to load).
"""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Set, Tuple


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


@dataclasses.dataclass
class Transport:
    ib_disable: List[str] = dataclasses.field(default_factory=list)
    socket_ips: Set[str] = dataclasses.field(default_factory=set)
    networks: Set[str] = dataclasses.field(default_factory=set)
    ib_devices: Set[str] = dataclasses.field(default_factory=set)  # "mlx5_0:1/IB"

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (Transport, (self.ib_disable, self.socket_ips, self.networks, self.ib_devices))
