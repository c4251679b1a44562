"""The CNI configuration lists of the top-level ``cni/`` folder: the default list is the same
as the package's runtime copy, every list is accepted by the node's loader, each shows what
its README line says, and no list declares a capability the node gives no value."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest

from asynckubelet.network import PodDNS, PodNetworkRequest, PortMapping
from asynckubelet.network.cni import (
    PROJECT_CONF_DIR,
    CNIPlugin,
    load_config,
    parse_config,
    supports_gc,
)
from asynckubelet.network.cniconf import NetworkConfigList
from asynckubelet.network.cniexec import capability_args

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cni"
DEFAULT = "10-asynckubelet.conflist"
LISTS = sorted(p.name for p in SHIPPED.glob("*.conflist"))


def shipped(name: str) -> NetworkConfigList:
    return parse_config((SHIPPED / name).read_bytes(), source=name)


def bridge_ipam(network: NetworkConfigList) -> dict[str, Any]:
    (bridge,) = [p for p in network.plugins if p["type"] == "bridge"]
    return dict(bridge["ipam"])


def test_the_folder_ships_the_four_lists() -> None:
    assert LISTS == [
        DEFAULT,
        "20-dual-stack.conflist",
        "30-ips.conflist",
        "40-cni-1.1.conflist",
    ]


def test_the_default_list_is_the_same_as_the_packages_runtime_copy() -> None:
    assert (SHIPPED / DEFAULT).read_bytes() == PROJECT_CONF_DIR.joinpath(DEFAULT).read_bytes()


def test_without_other_configuration_the_node_loads_the_runtime_copy() -> None:
    network = load_config([ROOT / "no-such-dir", PROJECT_CONF_DIR])
    assert network.raw == (SHIPPED / DEFAULT).read_bytes()


@pytest.mark.parametrize("name", LISTS)
def test_each_list_is_the_one_the_loader_picks_from_its_own_directory(
    name: str, tmp_path: Path
) -> None:
    (tmp_path / name).write_bytes((SHIPPED / name).read_bytes())
    network = load_config([tmp_path])
    expected = shipped(name)
    assert (network.name, network.cni_version, network.plugins) == (
        expected.name,
        expected.cni_version,
        expected.plugins,
    )
    assert network.source == str(tmp_path / name)


def test_each_list_has_its_own_name_bridge_and_subnet() -> None:
    networks = [shipped(name) for name in LISTS]
    subnets = [r[0]["subnet"] for n in networks for r in bridge_ipam(n)["ranges"]]
    bridges = [p["bridge"] for n in networks for p in n.plugins if p["type"] == "bridge"]
    assert len({n.name for n in networks}) == len(networks)
    assert len(set(bridges)) == len(networks)
    nets = [ipaddress.ip_network(s) for s in subnets]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


def test_the_dual_stack_list_gives_an_ipv4_then_an_ipv6_range_with_a_route_for_each() -> None:
    ipam = bridge_ipam(shipped("20-dual-stack.conflist"))
    versions = [ipaddress.ip_network(r[0]["subnet"]).version for r in ipam["ranges"]]
    assert versions == [4, 6]
    assert [r["dst"] for r in ipam["routes"]] == ["0.0.0.0/0", "::/0"]


def test_the_ips_list_declares_ips_on_the_plugin_whose_ipam_is_host_local() -> None:
    network = shipped("30-ips.conflist")
    declaring = [p for p in network.plugins if (p.get("capabilities") or {}).get("ips")]
    assert [(p["type"], p["ipam"]["type"]) for p in declaring] == [("bridge", "host-local")]


def test_the_ips_list_hands_the_requested_address_to_that_plugin_as_runtime_config() -> None:
    network = shipped("30-ips.conflist")
    args = capability_args(request(ips=("10.140.0.50",)))
    conf = CNIPlugin.plugin_conf(network, network.plugins[0], prev=None, capability_args=args)
    assert conf["runtimeConfig"] == {"ips": ["10.140.0.50"]}
    assert "capabilities" not in conf


def test_only_the_1_1_list_lets_status_and_gc_reach_a_plugin_that_speaks_1_1() -> None:
    speaks = ["0.4.0", "1.0.0", "1.1.0"]
    assert {name: supports_gc(shipped(name).cni_version, speaks) for name in LISTS} == {
        DEFAULT: False,
        "20-dual-stack.conflist": False,
        "30-ips.conflist": False,
        "40-cni-1.1.conflist": True,
    }


def test_the_1_1_list_is_the_default_list_at_version_1_1() -> None:
    default = json.loads((SHIPPED / DEFAULT).read_bytes())
    newer = json.loads((SHIPPED / "40-cni-1.1.conflist").read_bytes())
    assert newer["cniVersion"] == "1.1.0"
    for doc in (default, newer):
        doc.pop("cniVersion")
        doc.pop("name")
        doc["plugins"][0].pop("bridge")
        doc["plugins"][0]["ipam"].pop("ranges")
    assert newer == default


def request(**fields: Any) -> PodNetworkRequest:
    return PodNetworkRequest(sandbox_id="s", pod_name="p", namespace="default", uid="u", **fields)


def test_every_capability_a_list_declares_is_one_the_node_gives_a_value() -> None:
    supplied = set(
        capability_args(
            request(
                port_mappings=(PortMapping(container_port=80, host_port=8080),),
                dns=PodDNS(servers=("10.0.0.10",)),
                ips=("10.138.0.5",),
            )
        )
    )
    assert supplied == {"portMappings", "dns", "ips"}
    declared = {
        capability
        for name in LISTS
        for plugin in shipped(name).plugins
        for capability, on in (plugin.get("capabilities") or {}).items()
        if on
    }
    assert declared <= supplied
