"""``asynckubelet top pods|nodes``: CPU and memory in use, as ``kubectl top`` prints them.

The node daemon reads the engine's stats (:mod:`asynckubelet.api.resourcemetrics`) and
answers ``metrics.k8s.io`` objects; this command lays them out as kubectl does: CPU in
millicores rounded up (``12m``), memory the working set in mebibytes (``34Mi``), the
node's share of its allocatable in percent.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from asynckubelet.cli.client import require_daemon
from asynckubelet.cli.options import (
    AllNamespacesOpt,
    LabelSelectorOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    NoHeadersOpt,
    OptionalNameArg,
    TopContainersOpt,
    TopSortByOpt,
)
from asynckubelet.cli.output import command, fail, not_found

SORT_KEYS = ("cpu", "memory")


def millicores(text: str) -> int:
    """A CPU quantity in millicores, rounded up (apimachinery's ``MilliValue``)."""
    from asynckubelet.manifests.quantity import parse_quantity

    return math.ceil(parse_quantity(text).value * 1000)


def mebibytes(text: str) -> int:
    """A memory quantity in whole mebibytes (``Value() / 2**20``, the value rounded up)."""
    from asynckubelet.manifests.quantity import parse_quantity

    return math.ceil(parse_quantity(text).value) // 2**20


def _amounts(usage: Mapping[str, str]) -> tuple[int, int]:
    return millicores(usage.get("cpu", "0")), mebibytes(usage.get("memory", "0"))


def _pod_usage(pod: Mapping[str, Any]) -> tuple[int, int]:
    """A pod's sum over its containers (kubectl sums the quantities, then rounds)."""
    from asynckubelet.manifests.quantity import parse_quantity

    cpu = sum(
        (parse_quantity(c["usage"].get("cpu", "0")).value for c in pod.get("containers", [])),
        start=0,
    )
    memory = sum(
        (parse_quantity(c["usage"].get("memory", "0")).value for c in pod.get("containers", [])),
        start=0,
    )
    return math.ceil(cpu * 1000), math.ceil(memory) // 2**20


def _sorted(rows: list[tuple[list[str], tuple[int, int]]], sort_by: str | None) -> list[list[str]]:
    if sort_by is not None:
        index = SORT_KEYS.index(sort_by)
        rows = sorted(rows, key=lambda r: r[1][index], reverse=True)
    return [cells for cells, _ in rows]


def pod_rows(
    items: Sequence[Mapping[str, Any]],
    *,
    containers: bool,
    namespaces: bool,
    sort_by: str | None = None,
) -> list[list[str]]:
    """``kubectl top pod``'s header and rows."""
    header = [
        *(["NAMESPACE"] if namespaces else []),
        *(["POD", "NAME"] if containers else ["NAME"]),
        "CPU(cores)",
        "MEMORY(bytes)",
    ]
    rows: list[tuple[list[str], tuple[int, int]]] = []
    for pod in items:
        meta = pod.get("metadata") or {}
        first = [meta.get("namespace", "")] if namespaces else []
        if containers:
            for c in pod.get("containers") or []:
                cpu, memory = _amounts(c.get("usage") or {})
                rows.append(
                    (
                        [*first, meta.get("name", ""), c["name"], f"{cpu}m", f"{memory}Mi"],
                        (cpu, memory),
                    )
                )
        else:
            cpu, memory = _pod_usage(pod)
            rows.append(([*first, meta.get("name", ""), f"{cpu}m", f"{memory}Mi"], (cpu, memory)))
    return [header, *_sorted(rows, sort_by)]


def node_rows(
    items: Sequence[Mapping[str, Any]],
    allocatable: Mapping[str, Mapping[str, str]],
    *,
    sort_by: str | None = None,
) -> list[list[str]]:
    """``kubectl top node``'s header and rows; a node whose allocatable is not known shows
    ``<unknown>`` percentages."""
    header = ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    rows: list[tuple[list[str], tuple[int, int]]] = []
    for node in items:
        name = (node.get("metadata") or {}).get("name", "")
        usage = node.get("usage") or {}
        cpu, memory = _amounts(usage)
        offered = allocatable.get(name)
        cpu_share = memory_share = "<unknown>"
        if offered:
            cpu_share = _percent(millicores(usage.get("cpu", "0")), millicores(offered["cpu"]))
            memory_share = _percent(
                millicores(usage.get("memory", "0")), millicores(offered["memory"])
            )
        rows.append(([name, f"{cpu}m", cpu_share, f"{memory}Mi", memory_share], (cpu, memory)))
    return [header, *_sorted(rows, sort_by)]


def _percent(used: int, offered: int) -> str:
    return f"{int(used / offered * 100)}%" if offered else "<unknown>"


def _check_sort(sort_by: str | None) -> None:
    if sort_by is not None and sort_by not in SORT_KEYS:
        raise fail("--sort-by accepts only cpu or memory")


def _print(rows: list[list[str]], *, headers: bool) -> None:
    from asynckubelet.kubectl.tables import layout

    shown = rows if headers else rows[1:]
    if shown:
        sys.stdout.write(layout(shown) + "\n")


@command(not_found_as="NotFound")
def pods(
    name: OptionalNameArg = None,
    *,
    namespace: NamespaceOpt = "default",
    all_namespaces: AllNamespacesOpt = False,
    selector: LabelSelectorOpt = None,
    containers: TopContainersOpt = False,
    sort_by: TopSortByOpt = None,
    no_headers: NoHeadersOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """CPU (cores) and memory (bytes) of the pods (--containers: of each container)."""
    _check_sort(sort_by)
    client = require_daemon(node, verb="top")
    where = None if all_namespaces else namespace
    items = client.metrics("pods", where, selector=selector)
    if name is not None:
        items = [i for i in items if (i.get("metadata") or {}).get("name") == name]
        if not items:
            client.pod(namespace, name)
            raise fail("metrics not available yet")
    if not items:
        shown = "" if where is None else f" in {where} namespace"
        sys.stderr.write(f"No resources found{shown}.\n")
        return
    rows = pod_rows(items, containers=containers, namespaces=where is None, sort_by=sort_by)
    _print(rows, headers=not no_headers)


@command()
def nodes(
    name: OptionalNameArg = None,
    *,
    selector: LabelSelectorOpt = None,
    sort_by: TopSortByOpt = None,
    no_headers: NoHeadersOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """CPU (cores, % of allocatable) and memory (bytes, %) of the node."""
    _check_sort(sort_by)
    client = require_daemon(node, verb="top")
    items = client.metrics("nodes", selector=selector)
    if name is not None:
        items = [i for i in items if (i.get("metadata") or {}).get("name") == name]
        if not items:
            raise not_found("NotFound", f'nodes "{name}" not found')
    if not items:
        raise fail("metrics not available yet")
    names = [(i.get("metadata") or {}).get("name", "") for i in items]
    allocatable = {name: client.allocatable(name) for name in names}
    _print(node_rows(items, allocatable, sort_by=sort_by), headers=not no_headers)
