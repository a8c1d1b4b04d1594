"""The test cluster's network: named network namespaces, a bridge in a switch namespace of its
own and a veth pair from each host to it, made with pyroute2 (netlink from Python, so iproute2
is not needed and the GPU machine runs the same code as CI). Needs root."""
from __future__ import annotations

import contextlib

try:  # pure Python netlink: no iproute2 needed
    from pyroute2 import IPRoute, netns
except ImportError:  # netcluster.missing_prerequisites() says so
    IPRoute = netns = None

NETNS_DIR = "/var/run/netns"  # where named network namespaces are bind-mounted


def create_switch(switch: str) -> None:
    """The switch namespace with its bridge br0, up."""
    netns.create(switch)
    with IPRoute(netns=switch) as ns:
        ns.link("add", ifname="br0", kind="bridge")
        ns.link("set", index=ns.link_lookup(ifname="br0")[0], state="up")
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")


def wire(host: str, switch: str, inside: str, outside: str, ip: str) -> None:
    """The host's namespace, a veth pair from it to the switch's bridge, eth0 with the host's IP."""
    netns.create(host)
    with IPRoute() as machine:
        machine.link("add", ifname=inside, kind="veth", peer=outside)
        machine.link("set", index=machine.link_lookup(ifname=inside)[0], net_ns_fd=host)
        machine.link("set", index=machine.link_lookup(ifname=outside)[0], net_ns_fd=switch)
    with IPRoute(netns=switch) as ns:
        port = ns.link_lookup(ifname=outside)[0]
        ns.link("set", index=port, master=ns.link_lookup(ifname="br0")[0])
        ns.link("set", index=port, state="up")
    with IPRoute(netns=host) as ns:
        index = ns.link_lookup(ifname=inside)[0]
        ns.link("set", index=index, ifname="eth0")
        ns.addr("add", index=index, address=ip, prefixlen=24)
        ns.link("set", index=index, state="up")
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")


@contextlib.contextmanager
def isolated_interface(host: str, address: str, name: str = "eth1"):
    """A second interface, up, in one host's namespace, on a subnet no other host can reach (a
    veth pair whose peer stays in the host: the dummy kind may be absent); removed afterwards."""
    with IPRoute(netns=host) as ns:
        ns.link("add", ifname=name, kind="veth", peer=f"{name}p")
        link = ns.link_lookup(ifname=name)[0]
        ns.addr("add", index=link, address=address, prefixlen=24)
        ns.link("set", index=link, state="up")
        ns.link("set", index=ns.link_lookup(ifname=f"{name}p")[0], state="up")
    try:
        yield
    finally:
        with IPRoute(netns=host) as ns:
            ns.link("del", index=ns.link_lookup(ifname=name)[0])


def ns_pids(name: str):
    """The processes in the named network namespace."""
    return netns.ns_pids().get(name, []) if netns else []


def remove_netns(name: str) -> None:
    if netns and name in netns.listnetns():
        try:
            netns.remove(name)
        except OSError:
            pass
