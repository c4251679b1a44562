"""kubectl's table layout, and the ``meta.k8s.io/v1`` ``Table`` a server prints into.

kubectl asks the API server for a ``Table`` (server-side printing) and only lays it out:
the columns a resource has, their priority (1: only with ``-o wide``) and the cells of
each row. The node's local API answers the same way, so ``asynckubelet get`` needs neither
the Kubernetes models nor the status rules to print: this module is plain Python and
cheap to import, which keeps a ``get`` through the daemon fast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"
"""The ``Accept`` header kubectl sends for server-side printing."""


def layout(rows: Sequence[Sequence[str]]) -> str:
    """Rows as kubectl prints them: left-aligned columns, three spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(width + 3) for cell, width in zip(row, widths, strict=True)]
        lines.append("".join(cells).rstrip())
    return "\n".join(lines)


def table(
    columns: Sequence[tuple[str, int]],
    rows: Sequence[tuple[Sequence[str], Mapping[str, Any]]],
) -> dict[str, Any]:
    """A ``Table`` of ``columns`` (name, priority) and rows (cells, the object's metadata);
    the ``Name`` column has the ``name`` format, where kubectl puts ``kind/`` before a
    name when it prints several kinds."""
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {
                "name": name,
                "type": "string",
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, priority in columns
        ],
        "rows": [{"cells": list(cells), "object": _partial(meta)} for cells, meta in rows],
    }


def _partial(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A row's object as the API server sends it by default (``includeObject=Metadata``):
    a ``PartialObjectMetadata``, whose kind kubectl needs to decode the row."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": dict(meta)}


def render(
    document: Mapping[str, Any],
    *,
    wide: bool = False,
    all_namespaces: bool = False,
    header: bool = True,
    headers: bool = True,
    show_labels: bool = False,
) -> str:
    """A ``Table`` laid out as kubectl does: priority-0 columns (all with ``wide``), upper
    case headers, ``NAMESPACE`` first with ``all_namespaces``, ``LABELS`` last with
    ``show_labels`` (each row's object's labels). Without ``header`` the header line is
    left out but still sets the columns' widths, as in kubectl's rows of a watch.
    Without ``headers`` (``--no-headers``) it takes no part in them either."""
    definitions = list(document.get("columnDefinitions") or [])
    shown = [i for i, c in enumerate(definitions) if wide or not c.get("priority")]
    names = [str(definitions[i].get("name", "")).upper() for i in shown]
    rows: list[list[str]] = [names]
    for row in document.get("rows") or []:
        cells = list(row.get("cells") or [])
        line = [str(cells[i]) if i < len(cells) else "" for i in shown]
        meta = (row.get("object") or {}).get("metadata") or {}
        if all_namespaces:
            line.insert(0, str(meta.get("namespace") or ""))
        if show_labels:
            line.append(labels_text(meta.get("labels")))
        rows.append(line)
    if all_namespaces:
        names.insert(0, "NAMESPACE")
    if show_labels:
        names.append("LABELS")
    if not headers:
        return layout(rows[1:]) if len(rows) > 1 else ""
    text = layout(rows)
    return text if header else text.partition("\n")[2]


def labels_text(labels: Mapping[str, str] | None) -> str:
    """kubectl's LABELS cell: ``key=value`` pairs by key, comma-separated; ``<none>``."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


__all__ = ["TABLE_ACCEPT", "labels_text", "layout", "render", "table"]
