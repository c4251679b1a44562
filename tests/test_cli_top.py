"""``asynckubelet top``'s layout: kubectl's columns, CPU in millicores rounded up, memory in
whole mebibytes, the node's share of its allocatable."""

from __future__ import annotations

from typing import Any

import pytest

from asynckubelet.cli.commands import top


def pod(name: str, namespace: str, *containers: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "containers": [
            {"name": c, "usage": {"cpu": cpu, "memory": mem}} for c, cpu, mem in containers
        ],
    }


@pytest.mark.parametrize(
    ("quantity", "millis"),
    [("0", 0), ("12m", 12), ("1", 1000), ("1500u", 2), ("123456n", 1), ("999999999n", 1000)],
)
def test_cpu_is_shown_in_millicores_rounded_up(quantity: str, millis: int) -> None:
    assert top.millicores(quantity) == millis


@pytest.mark.parametrize(
    ("quantity", "mebibytes"),
    [("0", 0), ("3456Ki", 3), ("12Mi", 12), ("1Gi", 1024), ("1048577", 1)],
)
def test_memory_is_shown_in_whole_mebibytes(quantity: str, mebibytes: int) -> None:
    assert top.mebibytes(quantity) == mebibytes


ITEMS = [
    pod("web", "default", ("app", "250m", "20Mi"), ("proxy", "1500u", "1024Ki")),
    pod("db", "data", ("db", "1", "100Mi")),
]


def test_pods_are_summed_over_their_containers() -> None:
    assert top.pod_rows(ITEMS, containers=False, namespaces=False) == [
        ["NAME", "CPU(cores)", "MEMORY(bytes)"],
        ["web", "252m", "21Mi"],
        ["db", "1000m", "100Mi"],
    ]


def test_containers_get_a_row_each_after_the_namespace() -> None:
    assert top.pod_rows(ITEMS, containers=True, namespaces=True)[:2] == [
        ["NAMESPACE", "POD", "NAME", "CPU(cores)", "MEMORY(bytes)"],
        ["default", "web", "app", "250m", "20Mi"],
    ]


@pytest.mark.parametrize(("key", "first"), [("cpu", "db"), ("memory", "db")])
def test_sort_by_puts_the_largest_first(key: str, first: str) -> None:
    rows = top.pod_rows(ITEMS, containers=False, namespaces=False, sort_by=key)
    assert rows[1][0] == first


def test_nodes_show_their_share_of_allocatable() -> None:
    node = {"metadata": {"name": "n1"}, "usage": {"cpu": "500m", "memory": "1Gi"}}
    rows = top.node_rows([node], {"n1": {"cpu": "2", "memory": "4Gi"}})
    assert rows == [
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"],
        ["n1", "500m", "25%", "1024Mi", "25%"],
    ]


def test_a_node_of_unknown_allocatable_shows_unknown_shares() -> None:
    node = {"metadata": {"name": "n1"}, "usage": {"cpu": "500m", "memory": "1Gi"}}
    assert top.node_rows([node], {})[1] == ["n1", "500m", "<unknown>", "1024Mi", "<unknown>"]
