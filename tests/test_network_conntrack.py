"""Which tracked UDP and SCTP flows of Services are stale after a change of endpoints."""

from __future__ import annotations

from asynckubelet.network.conntrack import StaleFlows, stale_flows
from asynckubelet.network.firewall import ServiceRule


def rule(*endpoints: str, protocol: str = "UDP", node_port: int = 0) -> ServiceRule:
    return ServiceRule(
        name="default/dns:dns",
        protocol=protocol,
        cluster_ip="10.96.0.10",
        port=53,
        node_port=node_port,
        endpoints=tuple((ip, 5353) for ip in endpoints),
    )


def test_unchanged_rules_leave_every_flow_alone() -> None:
    assert stale_flows([rule("10.0.0.2")], [rule("10.0.0.2")]) == []


def test_a_removed_endpoint_is_named_and_the_serving_ones_kept() -> None:
    assert stale_flows(
        [rule("10.0.0.2", "10.0.0.3", node_port=30053)], [rule("10.0.0.3", node_port=30053)]
    ) == [
        StaleFlows(
            protocol="UDP",
            cluster_ip="10.96.0.10",
            port=53,
            node_ports=(30053,),
            serving=frozenset({("10.0.0.3", 5353)}),
            removed=frozenset({"10.0.0.2"}),
        )
    ]


def test_a_first_endpoint_clears_what_was_refused_before() -> None:
    """Datagrams sent while the Service had no endpoint were refused, and their flow would
    stay refused: a change from none to one counts too (no endpoint removed)."""
    (found,) = stale_flows([rule()], [rule("10.0.0.2")])
    assert found.serving == frozenset({("10.0.0.2", 5353)})
    assert found.removed == frozenset()


def test_a_service_gone_clears_all_its_flows_and_tcp_is_never_touched() -> None:
    (found,) = stale_flows([rule("10.0.0.2"), rule("10.0.0.9", protocol="TCP")], [])
    assert (found.protocol, found.serving, found.removed) == (
        "UDP",
        frozenset(),
        frozenset({"10.0.0.2"}),
    )
    assert stale_flows([rule("10.0.0.2", protocol="TCP")], [rule(protocol="TCP")]) == []


def test_at_start_every_udp_and_sctp_port_is_looked_at() -> None:
    found = stale_flows(
        None, [rule("10.0.0.2"), rule("10.0.0.3", protocol="SCTP"), rule(protocol="TCP")]
    )
    assert [f.protocol for f in found] == ["SCTP", "UDP"]
