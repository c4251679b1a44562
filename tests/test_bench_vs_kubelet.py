"""The pure parts of ``bench/vs_kubelet.py`` and ``bench/kubelet_host.py``: the options, the
side-by-side table, the undoing of the kubelet's iptables chains, its CNI list."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench() -> Iterator[tuple[ModuleType, ModuleType]]:
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("vs_kubelet"), importlib.import_module("kubelet_host")
    finally:
        sys.path.remove(str(BENCH))
        for name in ("vs_kubelet", "kubelet_host", "cluster_node", "node_scale", "phases"):
            sys.modules.pop(name, None)


def test_the_defaults_run_the_kubelet_first_at_its_upstream_api_qps(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    vs, _ = bench
    args = vs.parse_args([])

    assert args.pods == 30
    assert args.idle == 60.0
    assert args.kubelet_api_qps == 5
    assert args.nodes == ["kubelet", "asynckubelet"]
    assert vs.parse_args(["--nodes", " asynckubelet ,kubelet"]).nodes == [
        "asynckubelet",
        "kubelet",
    ]


def test_the_table_puts_each_node_in_a_column_of_its_figures(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    vs, _ = bench
    kubelet = vs.Figures(
        node="kubelet",
        ready=[10.0] * 29 + [20.0],
        node_cpu=4.123,
        engine_cpu=1.5,
        rss_mb=101.26,
        delete=25.0,
    )
    agent = vs.Figures(
        node="asynckubelet", ready=[6.0], node_cpu=0.5, engine_cpu=0.1, rss_mb=80.0, delete=7.4
    )

    text = vs.table(100, [kubelet, agent], labels={"kubelet": "kubelet v1.20.2 (dockershim)"})
    lines = text.splitlines()

    assert lines[0].split("  ")[0].strip() == "figure"
    assert lines[0].endswith("kubelet v1.20.2 (dockershim)  asynckubelet")
    rows = {line[:31].strip(): line[31:].split() for line in lines[2:]}
    assert rows["apply -> Ready, p50 (s)"] == ["10.00", "6.00"]
    assert rows["apply -> Ready, p99 (s)"] == ["20.00", "6.00"]
    assert rows["idle CPU, node (% of a core)"] == ["4.12", "0.50"]
    assert rows["idle CPU, engine (% of a core)"] == ["1.50", "0.10"]
    assert rows["node memory, RSS (MB)"] == ["101.3", "80.0"]
    assert rows["delete 100 pods (s)"] == ["25.00", "7.40"]
    assert len({len(line) for line in lines}) == 1


FIREWALL_DROP = (
    '-A KUBE-FIREWALL -m comment --comment "kubernetes firewall for dropping marked packets" '
    "-m mark --mark 0x8000/0x8000 -j DROP"
)
RULES_AFTER = f"""-P INPUT ACCEPT
-P FORWARD DROP
-N DOCKER-USER
-N KUBE-FIREWALL
-N KUBE-KUBELET-CANARY
-N CNI-0a1b2c
-N MINE
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -j KUBE-FIREWALL
-A FORWARD -j DOCKER-USER
-A POSTROUTING -s 10.1.0.2/32 -m comment --comment "name: \\"vsk\\" id: \\"abc\\"" -j CNI-0a1b2c
{FIREWALL_DROP}
-A CNI-0a1b2c -d 10.1.0.0/24 -j ACCEPT
-A MINE -j KUBE-OLD
"""


def test_only_the_kubelets_new_chains_and_the_jumps_to_them_are_undone(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    _, host = bench
    before = {"DOCKER-USER", "MINE", "KUBE-OLD"}

    commands = host.undo_commands(RULES_AFTER, before)

    assert commands == [
        ["-D", "INPUT", "-j", "KUBE-FIREWALL"],
        ["-D", "OUTPUT", "-j", "KUBE-FIREWALL"],
        ["-D", "POSTROUTING", "-s", "10.1.0.2/32", "-m", "comment", "--comment",
         'name: "vsk" id: "abc"', "-j", "CNI-0a1b2c"],
        ["-F", "CNI-0a1b2c"],
        ["-F", "KUBE-FIREWALL"],
        ["-F", "KUBE-KUBELET-CANARY"],
        ["-X", "CNI-0a1b2c"],
        ["-X", "KUBE-FIREWALL"],
        ["-X", "KUBE-KUBELET-CANARY"],
    ]  # fmt: skip
    assert host.undo_commands(RULES_AFTER, host.chains(RULES_AFTER)) == []


def test_the_kubelets_cni_list_is_a_bridge_with_its_own_address_records(
    bench: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    _, host = bench
    config = json.loads(
        host.cni_config(name="vsk-1", bridge="vskk1", subnet="10.201.0.0/24", ipam_dir=tmp_path)
    )

    (plugin,) = config["plugins"]
    assert config["name"] == "vsk-1"
    assert plugin["type"] == "bridge"
    assert plugin["bridge"] == "vskk1"
    assert plugin["isGateway"] is True
    assert plugin["ipam"]["ranges"] == [[{"subnet": "10.201.0.0/24"}]]
    assert plugin["ipam"]["dataDir"] == str(tmp_path)


def test_the_kubelet_keeps_its_state_under_its_root_and_serves_on_loopback(
    bench: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    _, host = bench
    command = host.kubelet_command(
        kubelet=Path("/cache/kubelet"),
        root=tmp_path,
        node="n1",
        kubeconfig=tmp_path / "k",
        docker_url="unix:///run/d.sock",
        pause="p:1",
        port=12345,
        api_qps=100,
    )
    flags = dict(arg.split("=", 1) for arg in command[1:])

    for flag in ("--root-dir", "--cert-dir", "--volume-plugin-dir", "--cni-conf-dir",
                 "--cni-cache-dir", "--experimental-dockershim-root-directory"):  # fmt: skip
        assert flags[flag].startswith(str(tmp_path)), flag
    assert flags["--container-runtime-endpoint"] == f"unix://{tmp_path}/dockershim.sock"
    assert flags["--address"] == "127.0.0.1"
    assert flags["--read-only-port"] == "0"
    assert flags["--kube-api-qps"] == "100"
    assert flags["--kube-api-burst"] == "200"
    assert flags["--enforce-node-allocatable"] == ""
