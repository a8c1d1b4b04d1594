"""A later log segment's rank evidence (NCCL init events, transport, Gloo peers) merged into
the scan before it, as LogScan.merge does for the rest.

Where the evidence budget has room for every item a key brings, they are taken in a few set
and list steps, without a call an item at thousands of ranks: what the item-by-item adds
(LogScan.add_init, add_transport, add_gloo) would hold and count. A key new here is taken
whole. Otherwise each item is added on its own, and the budget decides as it does in a scan.
"""
from __future__ import annotations

from typing import Any

from .rankevidence import shared


def merge_evidence(total: Any, other: Any) -> None:
    """other's inits, transport and gloo into total (LogScans), in that order."""
    for key, phases in other.inits.items():
        mine = total.inits.get(key)
        if room_for(total, sum(map(len, phases.values()))):
            if mine is None:
                total.inits[key] = phases
            else:
                for phase, events in phases.items():
                    mine.setdefault(phase, []).extend(events)
            continue
        for phase, events in phases.items():
            for event in events:
                total.add_init(key, phase, event)
    for key, t in other.transport.items():
        mine = total.transport.get(key)
        if mine is None:
            if room_for(total, 1 + len(t.ib_disable) + len(t.socket_ips) + len(t.networks) + len(t.ib_devices)):
                total.transport[key] = t
                continue
        else:
            ips, networks, devices = (t.socket_ips - mine.socket_ips, t.networks - mine.networks,
                                      t.ib_devices - mine.ib_devices)
            if room_for(total, len(t.ib_disable) + len(ips) + len(networks) + len(devices)):
                mine.ib_disable += t.ib_disable
                mine.socket_ips = shared(mine.socket_ips, ips)
                mine.networks = shared(mine.networks, networks)
                mine.ib_devices = shared(mine.ib_devices, devices)
                continue
        for ib in t.ib_disable:
            total.add_transport(key, ib=ib)
        total.add_transport(key, ips=sorted(t.socket_ips))
        for network in sorted(t.networks):
            total.add_transport(key, network=network)
        total.add_transport(key, ib_devices=sorted(t.ib_devices))
    for key, seen in other.gloo.items():
        held = total.gloo.get(key)
        new = seen if held is None else seen - held
        if seen and room_for(total, len(new)):
            if held is None:
                total.gloo[key] = seen
            else:
                held |= new
            continue
        for pair in sorted(seen):
            total.add_gloo(key, pair)


def room_for(total: Any, items: int) -> bool:
    """Whether ``items`` more evidence items may be held by total (then counted as held):
    False leaves the count as it was, and the items are added one at a time."""
    if total.kept + items <= total.most:
        total.kept += items
        return True
    return False
