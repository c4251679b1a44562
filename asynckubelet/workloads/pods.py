"""What the controllers read off a pod, and how they make one.

The controllers decide from pods as the API server would hand them out: metadata
(labels, owner references, deletion timestamp), spec and the status the node reports.
:class:`PodView` is one such pod with what each controller asks of it (active? ready?
available? when did it finish?), the same answers upstream's ``controller`` helpers give
(``FilterActivePods``, ``IsPodAvailable``, the Job's ``getFinishedTime``). Pods are made
as ``GetPodFromTemplate`` makes them: the template's labels, annotations and spec, a
name from the controller's prefix, a fresh UID and a controller reference to the owner.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from lightkube.models.core_v1 import Pod, PodCondition, PodStatus

__all__ = [
    "ALPHANUMS",
    "OwnerRef",
    "PodView",
    "controller_of",
    "make_pod",
    "owner_reference",
    "random_suffix",
]

ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
"""``rand.String``'s alphabet: no vowels, no confusable digits."""
SUFFIX_LENGTH = 5
"""``SimpleNameGenerator``'s random part of a generated name."""
MAX_NAME = 63


def random_suffix(length: int = SUFFIX_LENGTH) -> str:
    return "".join(secrets.choice(ALPHANUMS) for _ in range(length))


def generate_name(prefix: str) -> str:
    """``names.SimpleNameGenerator``: the prefix (cut to leave room) and five random
    characters."""
    base = prefix[: MAX_NAME - SUFFIX_LENGTH]
    return f"{base}{random_suffix()}"


def _time(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class OwnerRef:
    """A controller reference: who owns an object."""

    api_version: str
    kind: str
    name: str
    uid: str


def owner_reference(*, api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    """``metav1.NewControllerRef``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(metadata: Mapping[str, Any] | None) -> OwnerRef | None:
    """``metav1.GetControllerOf``: the owner reference marked ``controller``."""
    for ref in (metadata or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return OwnerRef(
                api_version=str(ref.get("apiVersion") or ""),
                kind=str(ref.get("kind") or ""),
                name=str(ref.get("name") or ""),
                uid=str(ref.get("uid") or ""),
            )
    return None


@dataclass(frozen=True)
class PodView:
    """One pod of a controller, with its latest status (None: not reported yet)."""

    pod: Pod = field(repr=False)
    stored: bool = True
    """Whether the node still holds the pod as an object (False: it is being deleted)."""

    @property
    def name(self) -> str:
        return (self.pod.metadata.name if self.pod.metadata else None) or ""

    @property
    def namespace(self) -> str:
        return (self.pod.metadata.namespace if self.pod.metadata else None) or "default"

    @property
    def uid(self) -> str:
        return (self.pod.metadata.uid if self.pod.metadata else None) or ""

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.pod.metadata.labels if self.pod.metadata else None) or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict((self.pod.metadata.annotations if self.pod.metadata else None) or {})

    @property
    def finalizers(self) -> list[str]:
        return list((self.pod.metadata.finalizers if self.pod.metadata else None) or [])

    @property
    def status(self) -> PodStatus:
        return self.pod.status or PodStatus()

    @property
    def phase(self) -> str:
        return self.status.phase or "Pending"

    @property
    def created(self) -> datetime | None:
        return _time(self.pod.metadata.creationTimestamp if self.pod.metadata else None)

    @property
    def deleting(self) -> bool:
        meta = self.pod.metadata
        return not self.stored or (meta is not None and meta.deletionTimestamp is not None)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def active(self) -> bool:
        """``FilterActivePods``: neither finished nor being deleted."""
        return not self.terminal and not self.deleting

    def condition(self, kind: str) -> PodCondition | None:
        return next((c for c in self.status.conditions or [] if c.type == kind), None)

    @property
    def ready(self) -> bool:
        found = self.condition("Ready")
        return found is not None and found.status == "True"

    @property
    def ready_since(self) -> datetime | None:
        found = self.condition("Ready")
        if found is None or found.status != "True":
            return None
        return _time(found.lastTransitionTime)

    def available(self, min_ready_seconds: int, now: datetime) -> bool:
        """``IsPodAvailable``: ready for at least ``min_ready_seconds``."""
        if not self.ready:
            return False
        if min_ready_seconds <= 0:
            return True
        since = self.ready_since
        return since is not None and (now - since).total_seconds() >= min_ready_seconds

    @property
    def restarts(self) -> int:
        return sum(
            c.restartCount or 0
            for c in [
                *(self.status.initContainerStatuses or []),
                *(self.status.containerStatuses or []),
            ]
        )

    def finished_at(self) -> datetime:
        """The Job controller's ``getFinishedTime``: the last container's finish, else
        when Ready turned False, else the deletion time less the grace period, else the
        creation time."""
        times: list[datetime] = []
        for c in self.status.containerStatuses or []:
            term = c.state.terminated if c.state is not None else None
            finished = _time(term.finishedAt) if term is not None else None
            if finished is None:
                times = []
                break
            times.append(finished)
        if times:
            return max(times)
        ready = self.condition("Ready")
        if ready is not None and ready.status == "False":
            since = _time(ready.lastTransitionTime)
            if since is not None:
                return since
        meta = self.pod.metadata
        deleted = _time(meta.deletionTimestamp) if meta is not None else None
        if deleted is not None:
            return deleted
        return self.created or datetime.fromtimestamp(0, UTC)


def make_pod(
    *,
    template: Mapping[str, Any],
    namespace: str,
    name: str,
    owner: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    finalizers: Sequence[str] = (),
    hostname: str | None = None,
    subdomain: str | None = None,
) -> Pod:
    """``GetPodFromTemplate``: a pod of ``template`` (a ``PodTemplateSpec`` dict) named
    ``name``, owned by ``owner`` (a controller reference)."""
    meta = template.get("metadata") or {}
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    if hostname is not None:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "labels": {**(meta.get("labels") or {}), **(labels or {})},
            "ownerReferences": [dict(owner)],
        },
        "spec": spec,
    }
    if meta.get("annotations"):
        body["metadata"]["annotations"] = dict(meta["annotations"])
    found = [*(meta.get("finalizers") or []), *finalizers]
    if found:
        body["metadata"]["finalizers"] = found
    return cast(Pod, Pod.from_dict(body))
