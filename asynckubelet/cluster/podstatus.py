"""Pod status back to the API server: what to send, and when.

The status manager of the node holds each pod's status as :func:`asynckubelet.node.status.
generate` makes it; the API server holds the status controllers and users read. As the
kubelet's status manager (``pkg/kubelet/status``) does, this sends a strategic merge patch
of the ``status`` subresource carrying the pod's UID (so a newer pod of the same name is
never patched), with only the fields the kubelet owns: a condition another component owns
(``DisruptionTarget``, a readiness gate's) is left alone, and a field the node no longer
reports (``reason`` once a sync succeeds again) is removed with ``null``.

A patch is sent only when the status changed: either the node's status differs from the
last one sent, or the API server's copy differs from what the last patch left there
(another writer, such as the node lifecycle controller marking the pods of an unreachable
node not ready, changed it), so an answer that drops fields an older API server does not
know never causes a patch loop. A status never takes a pod out of a terminal phase the
API server holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube.models.core_v1 import PodStatus

from asynckubelet.node.status import KUBELET_CONDITIONS, TERMINAL_PHASES

KUBELET_FIELDS = (
    "phase",
    "conditions",
    "message",
    "reason",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "startTime",
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
    "qosClass",
)
"""``status`` fields the node writes; everything else belongs to someone else."""

_FRACTION = re.compile(r"(T\d\d:\d\d:\d\d)\.\d+")


def _seconds(value: Any) -> Any:
    """Timestamps cut to whole seconds (what the API server stores), recursively."""
    if isinstance(value, str):
        return _FRACTION.sub(r"\1", value)
    if isinstance(value, list):
        return [_seconds(v) for v in value]
    if isinstance(value, dict):
        return {k: _seconds(v) for k, v in value.items()}
    return value


def owned(status: PodStatus | None) -> dict[str, Any]:
    """The node-owned part of ``status`` as API JSON, times in whole seconds."""
    if status is None:
        return {}
    body = status.to_dict()
    out = {key: body[key] for key in KUBELET_FIELDS if body.get(key) is not None}
    if "conditions" in out:
        out["conditions"] = [c for c in out["conditions"] if c.get("type") in KUBELET_CONDITIONS]
    return dict(_seconds(out))


_MERGE_KEYS = {"conditions": "type", "podIPs": "ip", "hostIPs": "ip"}
"""Lists the API server merges by a key (``patchMergeKey``); the others are replaced."""


def status_patch(uid: str, new: Mapping[str, Any], *, current: Mapping[str, Any]) -> dict[str, Any]:
    """The strategic merge patch from ``current`` (the API server's node-owned fields) to
    ``new``: changed and new fields, ``null`` for fields the node no longer reports, and a
    ``$patch: delete`` for each item of a merged list that is gone."""
    status: dict[str, Any] = {}
    for key in KUBELET_FIELDS:
        if key in new:
            if new[key] == current.get(key):
                continue
            merge_key = _MERGE_KEYS.get(key)
            status[key] = (
                _merged_list(new[key], current.get(key) or [], merge_key) if merge_key else new[key]
            )
        elif key in current:
            merge_key = _MERGE_KEYS.get(key)
            status[key] = (
                [{merge_key: i.get(merge_key), "$patch": "delete"} for i in current[key]]
                if merge_key
                else None
            )
    return {"metadata": {"uid": uid}, "status": status}


def _merged_list(
    new: list[dict[str, Any]], current: list[dict[str, Any]], merge_key: str
) -> list[dict[str, Any]]:
    """A list the API server merges item by item: each new item with ``null`` for the
    fields its current twin has and it lacks (a condition's ``reason`` once it is true
    again), and a ``$patch: delete`` for each current item that is gone."""
    twins = {item.get(merge_key): item for item in current}
    out = []
    for item in new:
        twin = twins.get(item.get(merge_key)) or {}
        out.append({**{k: None for k in twin if k not in item}, **item})
    kept = {item.get(merge_key) for item in new}
    out += [
        {merge_key: item.get(merge_key), "$patch": "delete"}
        for item in current
        if item.get(merge_key) not in kept
    ]
    return out


def reverts_terminal(api_phase: str | None, new: Mapping[str, Any]) -> bool:
    """The API server holds a terminal phase that ``new`` would leave."""
    return api_phase in TERMINAL_PHASES and new.get("phase") != api_phase


@dataclass
class PodStatusState:
    """What is known of one pod's status on both sides."""

    namespace: str
    name: str
    uid: str
    api: dict[str, Any] = field(default_factory=dict)
    """The API server's node-owned fields as last seen (watch or patch answer)."""
    api_phase: str | None = None
    sent: dict[str, Any] | None = None
    """The node's status as last sent successfully."""
    left: dict[str, Any] | None = None
    """The API server's node-owned fields right after that patch."""
    wanted: dict[str, Any] | None = None
    """The node's latest status."""

    def observe_api(self, status: PodStatus | None) -> None:
        self.api = owned(status)
        self.api_phase = status.phase if status is not None else None

    def patch_needed(self) -> bool:
        """The node has a status the API server should hear about."""
        if self.wanted is None or reverts_terminal(self.api_phase, self.wanted):
            return False
        if self.sent is None or self.wanted != self.sent:
            return self.wanted != _common(self.api, self.wanted)
        return self.left is not None and self.api != self.left

    def patch(self) -> dict[str, Any]:
        assert self.wanted is not None  # noqa: S101  (type narrowing: patched only when a status is wanted)
        return status_patch(self.uid, self.wanted, current=self.api)

    def patched(self, answer: PodStatus | None, *, sent: dict[str, Any] | None) -> None:
        """A patch carrying ``sent`` succeeded; ``answer`` is the status it left."""
        self.sent = sent
        self.observe_api(answer)
        self.left = self.api


def _common(api: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The API's fields limited to those the node sends (an unsent field is no change)."""
    return {k: api[k] for k in wanted if k in api}


__all__ = [
    "KUBELET_FIELDS",
    "PodStatusState",
    "owned",
    "reverts_terminal",
    "status_patch",
]
