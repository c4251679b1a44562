"""The nft batches of the nftables firewall: one table of ours per bridge and family, base
chains refilled on every setup, and per pod one chain of DNAT rules reached by one jump."""

from __future__ import annotations

import pytest

from asynckubelet import errors
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.network.firewall import DNAT
from asynckubelet.network.nftables import NFTables, owner_comment, pod_chain, table_name

SANDBOX = "0123456789abcdef0123456789abcdef"


def test_a_pods_script_makes_its_chain_its_dnat_rules_and_one_jump() -> None:
    script = NFTables(family="ip").hostports_script(
        bridge="akl0",
        sandbox_id=SANDBOX,
        maps=[
            DNAT(host_port=8080, pod_ip="10.137.0.5", container_port=80),
            DNAT(53, "10.137.0.5", 53, protocol="UDP", host_ip="127.0.0.1"),
        ],
    )
    assert script.splitlines() == [
        "add chain ip akl_akl0 pod_0123456789abcdef",
        "flush chain ip akl_akl0 pod_0123456789abcdef",
        "add rule ip akl_akl0 pod_0123456789abcdef tcp dport 8080 dnat to 10.137.0.5:80",
        "add rule ip akl_akl0 pod_0123456789abcdef ip daddr 127.0.0.1 udp dport 53 "
        "dnat to 10.137.0.5:53",
        "add rule ip akl_akl0 hostports jump pod_0123456789abcdef",
    ]


def test_a_pods_script_deletes_jumps_an_earlier_attempt_left() -> None:
    script = NFTables(family="ip").hostports_script(
        bridge="akl0", sandbox_id=SANDBOX, maps=[DNAT(80, "10.137.0.5", 80)], stale=[7, 9]
    )
    assert script.splitlines()[:2] == [
        "delete rule ip akl_akl0 hostports handle 7",
        "delete rule ip akl_akl0 hostports handle 9",
    ]


def test_an_ipv6_pods_dnat_puts_the_address_in_brackets_in_an_ip6_table() -> None:
    script = NFTables(family="ip6").hostports_script(
        bridge="akl0", sandbox_id=SANDBOX, maps=[DNAT(8080, "fd00:ac1::5", 80, host_ip="::")]
    )
    assert "add rule ip6 akl_akl0 pod_0123456789abcdef tcp dport 8080 dnat to [fd00:ac1::5]:80" in (
        script.splitlines()
    )


@pytest.mark.parametrize(
    ("masquerade", "present"),
    [(True, True), (False, False)],
    ids=["masquerade on", "masquerade off"],
)
def test_egress_masquerade_is_in_the_network_script_only_when_on(
    masquerade: bool, present: bool
) -> None:
    script = NFTables(family="ip").network_script(
        bridge="akl0", subnet="10.137.0.0/16", masquerade=masquerade, nat=True
    )
    rule = (
        "add rule ip akl_akl0 postrouting ip saddr 10.137.0.0/16 ip daddr != 10.137.0.0/16 "
        'oifname != "akl0" masquerade'
    )
    assert (rule in script.splitlines()) is present


def test_the_network_script_masquerades_loopback_and_hairpin_and_dnats_local_addresses() -> None:
    lines = (
        NFTables(family="ip")
        .network_script(bridge="akl0", subnet="10.137.0.0/16", masquerade=False, nat=True)
        .splitlines()
    )
    assert (
        'add rule ip akl_akl0 postrouting ip saddr 127.0.0.0/8 oifname "akl0" masquerade' in lines
    )
    assert (
        'add rule ip akl_akl0 postrouting ip saddr 10.137.0.0/16 oifname "akl0" '
        "ct status dnat masquerade" in lines
    )
    assert "add rule ip akl_akl0 prerouting fib daddr type local jump hostports" in lines
    assert "add rule ip akl_akl0 output fib daddr type local jump hostports" in lines


@pytest.mark.parametrize("nat", [True, False])
def test_the_ipv4_network_script_guards_the_hosts_loopback_before_anything_else(
    nat: bool,
) -> None:
    lines = (
        NFTables(family="ip")
        .network_script(bridge="akl0", subnet="10.137.0.0/16", masquerade=True, nat=nat)
        .splitlines()
    )
    guard = (
        'add rule ip akl_akl0 input iifname "akl0" ip daddr 127.0.0.0/8 '
        "ip saddr != 127.0.0.0/8 ct state != { established, related } ct status & dnat == 0 "
        'counter drop comment "block incoming localnet connections"'
    )
    assert "add chain ip akl_akl0 input { type filter hook input priority filter; }" in lines
    assert lines.count(guard) == 1
    assert lines.index("flush chain ip akl_akl0 input") < lines.index(guard)


def test_without_nat_the_network_script_only_forwards() -> None:
    lines = (
        NFTables(family="ip6")
        .network_script(bridge="akl0", subnet="fd00:ac1::/64", masquerade=True, nat=False)
        .splitlines()
    )
    assert lines == [
        "add table ip6 akl_akl0",
        "add chain ip6 akl_akl0 forward { type filter hook forward priority filter; }",
        "flush chain ip6 akl_akl0 forward",
        'add rule ip6 akl_akl0 forward iifname "akl0" accept',
        'add rule ip6 akl_akl0 forward oifname "akl0" accept',
    ]


@pytest.mark.parametrize(
    ("bridge", "table"),
    [("akl0", "akl_akl0"), ("akb-test.1", "akl_akb_test_1")],
)
def test_the_table_is_named_after_the_bridge(bridge: str, table: str) -> None:
    assert table_name(bridge) == table


def test_names_of_the_pod_chain_and_the_ownership_comment() -> None:
    assert pod_chain(SANDBOX) == "pod_0123456789abcdef"
    assert owner_comment("akl0") == "akl:akl0"


def test_the_bridge_backend_uses_nftables_for_both_families_when_asked() -> None:
    plugin = BridgePlugin(BridgeConfig(firewall="nftables", pod_cidr_v6="fd00:ac1::/64"))
    assert isinstance(plugin.firewall, NFTables)
    assert plugin.firewall.family == "ip"
    assert isinstance(plugin.firewall6, NFTables)
    assert plugin.firewall6.family == "ip6"


def test_an_unknown_firewall_is_refused_by_name() -> None:
    with pytest.raises(errors.NetworkError, match="firewall must be one of iptables, nftables"):
        BridgePlugin(BridgeConfig(firewall="pf"))


def test_the_factory_refuses_nftables_without_nft(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(errors.NetworkError, match="nft binary"):
        make_network_plugin("bridge", firewall="nftables")
