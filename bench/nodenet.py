"""A node network of a benchmark's own: a bridge and pod range no other node uses, and its
removal at the end, so that a benchmark's ``serve`` neither takes a developer's default
node network (``akl0``, its range, its cluster DNS address) nor leaves one behind."""

from __future__ import annotations

import subprocess
import uuid


def private_bridge() -> str:
    """A bridge name of the project's own prefix, unused by any other node."""
    return f"akb{uuid.uuid4().hex[:8]}"


def free_cidr() -> str:
    """A /24 of 10.200.0.0-10.249.255.0 that no route of this host covers."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        n = uuid.uuid4().int
        cidr = f"10.{200 + n % 50}.{(n >> 8) % 256}.0/24"
        if cidr.rsplit(".", 1)[0] + "." not in routes:
            return cidr
    raise SystemExit("no free /24 in 10.200.0.0/10")


def remove_node_network(bridge: str, cidr: str, *, firewall: str = "iptables") -> None:
    """The bridge, its firewall rules and its records, as the node made them."""
    import anyio

    from asynckubelet.network.bridge import DEFAULT_STATE_DIR, BridgeConfig, BridgePlugin

    plugin = BridgePlugin(
        BridgeConfig(bridge=bridge, pod_cidr=cidr, firewall=firewall, state_dir=DEFAULT_STATE_DIR)
    )
    anyio.run(plugin.remove_node_network)
