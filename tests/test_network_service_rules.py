"""The Service rules each firewall generates: what kube-proxy would make, as text checked
here line by line, and hostile values refused before they reach any rule text."""

from __future__ import annotations

import pytest

from asynckubelet import errors
from asynckubelet.network.firewall import ServiceRule, probabilities
from asynckubelet.network.iptables import service_chain, services_restore
from asynckubelet.network.nftables import NFTables, endpoint_chain
from asynckubelet.network.nftables import service_chain as nft_service_chain

WEB = ServiceRule(
    name="default/web:http",
    protocol="TCP",
    cluster_ip="10.96.0.10",
    port=80,
    node_port=30080,
    endpoints=(("10.137.0.5", 8080), ("10.137.0.6", 8080), ("10.137.0.7", 8080)),
)
EMPTY = ServiceRule(name="default/empty:", protocol="UDP", cluster_ip="10.96.0.11", port=53)
BALANCER = ServiceRule(
    name="default/lb:",
    protocol="TCP",
    cluster_ip="10.96.0.12",
    port=8081,
    node_port=30081,
    published_port=8081,
    endpoints=(("10.137.0.8", 80),),
)


def test_each_endpoint_is_picked_with_equal_odds_as_kube_proxy_does() -> None:
    assert probabilities(1) == []
    assert probabilities(3) == ["0.3333333333", "0.5000000000"]


def test_iptables_sends_the_cluster_ip_and_node_port_to_a_random_ready_endpoint() -> None:
    chain = service_chain("akl0", WEB)
    lines = services_restore("akl0", [WEB]).splitlines()
    assert lines == [
        "*nat",
        ":AKL-SVCS-akl0 - [0:0]",
        f":{chain} - [0:0]",
        "-A AKL-SVCS-akl0 -d 10.96.0.10/32 -p tcp --dport 80 -m comment --comment "
        f"default/web:http -j {chain}",
        "-A AKL-SVCS-akl0 -p tcp --dport 30080 -m addrtype --dst-type LOCAL -m comment "
        f"--comment default/web:http -j {chain}",
        f"-A {chain} -p tcp -m statistic --mode random --probability 0.3333333333 -j DNAT "
        "--to-destination 10.137.0.5:8080",
        f"-A {chain} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT "
        "--to-destination 10.137.0.6:8080",
        f"-A {chain} -p tcp -j DNAT --to-destination 10.137.0.7:8080",
        "COMMIT",
        "*filter",
        ":AKL-SVRJ-akl0 - [0:0]",
        "COMMIT",
    ]


def test_iptables_rejects_a_cluster_ip_without_ready_endpoints() -> None:
    text = services_restore("akl0", [EMPTY])
    assert (
        "-A AKL-SVRJ-akl0 -d 10.96.0.11/32 -p udp --dport 53 -m comment --comment "
        "default/empty: -j REJECT" in text.splitlines()
    )
    assert "AKL-SVC-" not in text.replace("AKL-SVCS-", "")


def test_iptables_publishes_a_load_balancer_on_its_own_port_too() -> None:
    chain = service_chain("akl0", BALANCER)
    text = services_restore("akl0", [BALANCER])
    for port in (30081, 8081):
        assert (
            f"-A AKL-SVCS-akl0 -p tcp --dport {port} -m addrtype --dst-type LOCAL -m comment "
            f"--comment default/lb: -j {chain}" in text.splitlines()
        )


def test_iptables_empties_and_deletes_the_chains_of_services_gone_in_the_same_commit() -> None:
    lines = services_restore("akl0", [WEB], stale=["AKL-SVC-0123456789ABCDEF"]).splitlines()
    nat = lines[: lines.index("COMMIT")]
    assert ":AKL-SVC-0123456789ABCDEF - [0:0]" in nat
    assert nat[-1] == "-X AKL-SVC-0123456789ABCDEF"


def test_iptables_chain_names_fit_its_limit_and_differ_per_bridge() -> None:
    assert len(service_chain("a" * 15, WEB)) <= 28
    assert service_chain("akl0", WEB) != service_chain("akl1", WEB)


def test_nftables_picks_an_endpoint_with_numgen_and_a_verdict_map() -> None:
    fw = NFTables()
    svc = nft_service_chain(WEB)
    seps = [endpoint_chain(WEB, i) for i in range(3)]
    lines = fw.services_script(bridge="akl0", rules=[WEB]).splitlines()
    t = "ip akl_akl0"
    assert lines[:2] == [f"add chain {t} services", f"flush chain {t} services"]
    for sep, ip in zip(seps, ("10.137.0.5", "10.137.0.6", "10.137.0.7"), strict=True):
        assert f"add rule {t} {sep} meta l4proto tcp dnat to {ip}:8080" in lines
    picks = ", ".join(f"{i} : goto {sep}" for i, sep in enumerate(seps))
    assert f"add rule {t} {svc} numgen random mod 3 vmap {{ {picks} }}" in lines
    assert (
        f"add rule {t} services ip daddr 10.96.0.10 tcp dport 80 jump {svc} comment "
        '"default/web:http"' in lines
    )
    assert (
        f"add rule {t} services fib daddr type local tcp dport 30080 jump {svc} comment "
        '"default/web:http"' in lines
    )


def test_nftables_rejects_a_cluster_ip_without_ready_endpoints() -> None:
    lines = NFTables().services_script(bridge="akl0", rules=[EMPTY]).splitlines()
    assert (
        "add rule ip akl_akl0 services ip daddr 10.96.0.11 udp dport 53 reject comment "
        '"default/empty:"' in lines
    )


def test_nftables_deletes_chains_of_services_gone_after_emptying_them() -> None:
    lines = (
        NFTables()
        .services_script(bridge="akl0", rules=[], existing=["svc_old", "sep_old"])
        .splitlines()
    )
    t = "ip akl_akl0"
    assert lines.index(f"flush chain {t} svc_old") < lines.index(f"delete chain {t} svc_old")
    assert lines.index(f"delete chain {t} svc_old") < lines.index(f"delete chain {t} sep_old")


def test_the_network_table_hooks_the_services_chain_on_prerouting_and_output() -> None:
    script = NFTables().network_script(
        bridge="akl0", subnet="10.137.0.0/16", masquerade=True, nat=True
    )
    assert "add rule ip akl_akl0 prerouting jump services" in script
    assert "add rule ip akl_akl0 output jump services" in script


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "default/web:http\n-A INPUT -j ACCEPT"},
        {"name": "default/web:http comment"},
        {"protocol": "ICMP"},
        {"cluster_ip": "10.96.0.1 -j ACCEPT"},
        {"cluster_ip": "fd00::1"},
        {"port": 0},
        {"node_port": 70000},
        {"endpoints": (("10.0.0.1;", 80),)},
        {"endpoints": (("10.0.0.1", True),)},
    ],
)
def test_a_rule_with_a_value_that_is_not_what_it_claims_is_refused(bad: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "name": "default/web:http",
        "protocol": "TCP",
        "cluster_ip": "10.96.0.10",
        "port": 80,
    }
    fields.update(bad)
    with pytest.raises(errors.NetworkError):
        ServiceRule(**fields)  # type: ignore[arg-type]
