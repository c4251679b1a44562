"""Events in the ``events.k8s.io/v1`` shape: the same Events as the core group's.

The API server keeps one Event and serves it in both groups; the newer group names its
fields otherwise (upstream's conversion): the object it is about is ``regarding``, the
message is ``note``, the component and its host are ``reportingController`` and
``reportingInstance``, and the fields of the older reporting (``source``, the first and
last timestamps and the count) carry ``deprecated`` before their names. An Event
recorded the older way has no ``eventTime``: it is ``null``, as the API server shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_VERSION = "events.k8s.io/v1"
RESOURCE = "events.events.k8s.io"
"""The resource as the API server names it in its messages and field selectors."""


def to_events_v1(core: Mapping[str, Any]) -> dict[str, Any]:
    """The ``events.k8s.io/v1`` Event of a core ``v1`` Event."""
    source = core.get("source") or {}
    body: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": API_VERSION,
        "metadata": dict(core.get("metadata") or {}),
        "eventTime": core.get("eventTime"),
        "reportingController": core.get("reportingComponent") or source.get("component") or "",
        "reportingInstance": core.get("reportingInstance") or source.get("host") or "",
        "action": core.get("action") or "",
        "reason": core.get("reason") or "",
        "regarding": core.get("involvedObject") or {},
        "note": core.get("message") or "",
        "type": core.get("type") or "",
    }
    for old, new in (("related", "related"), ("series", "series")):
        if core.get(old):
            body[new] = core[old]
    deprecated = {
        "deprecatedSource": source,
        "deprecatedFirstTimestamp": core.get("firstTimestamp"),
        "deprecatedLastTimestamp": core.get("lastTimestamp"),
        "deprecatedCount": core.get("count"),
    }
    body.update({k: v for k, v in deprecated.items() if v})
    return {k: v for k, v in body.items() if v != ""}


__all__ = ["API_VERSION", "RESOURCE", "to_events_v1"]
