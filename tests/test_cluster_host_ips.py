"""Pods' hostIP on a cluster node is the Node's InternalIP, as the kubelet takes it from its
Node object (``--node-ip`` when given), not the address of the host's default route."""

from __future__ import annotations

import pytest

from asynckubelet.cluster.agent import pod_host_ips


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        ((("InternalIP", "127.0.0.1"), ("Hostname", "n1")), ("127.0.0.1",)),
        (
            (("InternalIP", "10.0.0.5"), ("InternalIP", "fd00::5"), ("Hostname", "n1")),
            ("10.0.0.5", "fd00::5"),
        ),
        ((("Hostname", "n1"), ("ExternalIP", "203.0.113.9")), ("203.0.113.9",)),
        ((("Hostname", "n1"),), ()),
        ((), ()),
    ],
)
def test_pods_host_ips_are_the_nodes_internal_ips(
    addresses: tuple[tuple[str, str], ...], expected: tuple[str, ...]
) -> None:
    assert pod_host_ips(addresses) == expected
