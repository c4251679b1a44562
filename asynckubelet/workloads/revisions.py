"""The history of a DaemonSet's or a StatefulSet's templates, kept as upstream's controllers
keep it (``pkg/controller/history``, ``pkg/controller/daemon/update.go``,
``pkg/controller/statefulset``): one ``ControllerRevision`` per distinct template, as a
pure function of the owner, its revisions and the revisions its pods carry.

A revision is named ``<owner>-<hash>`` (the template's hash with the owner's
``status.collisionCount``), labelled with the template's labels and
``controller-revision-hash: <hash>``, carries the owner's annotations (kubectl's
``kubernetes.io/change-cause`` among them) and a controller owner reference to it, and
holds in ``data`` the patch ``kubectl rollout undo`` applies: ``{"spec": {"template":
{..., "$patch": "replace"}}}``. Revisions are numbered from 1 up; a template equal to an
earlier revision's (a rollback) re-uses that revision and gives it the next number. When
the name a new revision needs is taken by another template's revision, the collision
count goes up by one and the hash with it (upstream's ``collisionCount``), until a free
name is found. Beyond ``revisionHistoryLimit`` (default 10) the oldest revisions are
removed, never one a pod runs, nor the revision of the template now (nor, for a
StatefulSet, its current revision): a DaemonSet counts every revision but the one of its
template against the limit, a StatefulSet only those nothing uses.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asynckubelet.workloads.deployment import pod_template_hash
from asynckubelet.workloads.pods import controller_of, owner_reference

__all__ = [
    "API_VERSION",
    "DEFAULT_HISTORY_LIMIT",
    "KIND",
    "NAME_PREFIX_MAX",
    "REVISION_HASH",
    "RevisionPlan",
    "Stored",
    "plan_revisions",
    "revision_data",
    "revision_name",
]

API_VERSION = "apps/v1"
KIND = "ControllerRevision"
REVISION_HASH = "controller-revision-hash"
DEFAULT_HISTORY_LIMIT = 10
NAME_PREFIX_MAX = 223
"""``ControllerRevisionName`` cuts the owner's name here, leaving room for the hash."""
COLLISIONS_MAX = 1000
"""Collision counts tried in one pass before giving up (each name taken by another
template's revision)."""


@dataclass(frozen=True)
class Stored:
    """A ControllerRevision of the owner's namespace as stored."""

    body: Mapping[str, Any] = field(repr=False)

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name") or "")

    @property
    def number(self) -> int:
        value = self.body.get("revision")
        return value if isinstance(value, int) else 0

    @property
    def created(self) -> str:
        return str((self.body.get("metadata") or {}).get("creationTimestamp") or "")

    @property
    def hash(self) -> str:
        labels = (self.body.get("metadata") or {}).get("labels") or {}
        return str(labels.get(REVISION_HASH) or "")

    def owned_by(self, uid: str) -> bool:
        owner = controller_of(self.body.get("metadata"))
        return owner is not None and owner.uid == uid


@dataclass
class RevisionPlan:
    """What to do with the owner's revisions, and the revisions it has then."""

    update: str
    """The name of the revision of the owner's template now."""
    update_hash: str
    """Its ``controller-revision-hash``."""
    current: str
    """A StatefulSet's current revision (the one its status named, while it is kept;
    the update revision otherwise)."""
    collision_count: int | None
    """The owner's collision count (None when it never had one)."""
    create: dict[str, Any] | None = None
    """A new revision to store."""
    renumber: dict[str, int] = field(default_factory=dict)
    """Revision name -> its new number (an earlier template made current again)."""
    delete: list[str] = field(default_factory=list)
    """Revisions beyond the history limit."""


def revision_name(owner: str, hash_: str) -> str:
    """``ControllerRevisionName``."""
    return f"{owner[:NAME_PREFIX_MAX]}-{hash_}"


def revision_data(owner: Mapping[str, Any]) -> dict[str, Any]:
    """``getPatch``: the patch that puts the owner's template back."""
    template = copy.deepcopy(dict((owner.get("spec") or {}).get("template") or {}))
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _sorted(revisions: Sequence[Stored]) -> list[Stored]:
    """``SortControllerRevisions``: by number, then creation, then name."""
    return sorted(revisions, key=lambda r: (r.number, r.created, r.name))


def plan_revisions(
    owner: Mapping[str, Any],
    revisions: Sequence[Stored],
    *,
    kind: str,
    live: Collection[str] = (),
) -> RevisionPlan:
    """The revision bookkeeping of ``owner`` (a stored ``DaemonSet`` or ``StatefulSet``,
    ``kind``) given the ControllerRevisions of its namespace and the ``live`` revisions
    its pods carry (their ``controller-revision-hash`` labels: a DaemonSet's pods carry
    the hash, a StatefulSet's the revision's name)."""
    meta = owner.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    status = owner.get("status") or {}
    given = status.get("collisionCount")
    collision = given if isinstance(given, int) else None
    data = revision_data(owner)
    owned = _sorted([r for r in revisions if r.owned_by(uid)])
    taken = {r.name: r for r in revisions}
    following = owned[-1].number + 1 if owned else 1
    equal = [r for r in owned if r.body.get("data") == data]
    plan: RevisionPlan
    if equal:
        chosen = equal[-1]
        # A revision without the label goes by its name, as upstream's daemon controller
        # labels it.
        plan = RevisionPlan(chosen.name, chosen.hash or chosen.name, "", collision)
        if chosen is not owned[-1]:
            plan.renumber[chosen.name] = following
    else:
        template = (owner.get("spec") or {}).get("template") or {}
        for _ in range(COLLISIONS_MAX):
            hash_ = pod_template_hash(template, collision)
            wanted = revision_name(name, hash_)
            found = taken.get(wanted)
            if found is None:
                break
            collision = (collision or 0) + 1
        else:
            raise RuntimeError(f"no free revision name for {kind.lower()} {name}")
        plan = RevisionPlan(wanted, hash_, "", collision)
        plan.create = _body(owner, kind=kind, name=wanted, hash_=hash_, data=data, number=following)
    named = str(status.get("currentRevision") or "")
    kept = {r.name for r in owned} | {plan.update}
    plan.current = named if kind == "StatefulSet" and named in kept else plan.update
    plan.delete = _pruned(owner, owned, plan, kind=kind, live=live)
    return plan


def _body(
    owner: Mapping[str, Any], *, kind: str, name: str, hash_: str, data: Any, number: int
) -> dict[str, Any]:
    """``NewControllerRevision`` (and the DaemonSet's ``snapshot``)."""
    meta = owner.get("metadata") or {}
    template_meta = ((owner.get("spec") or {}).get("template") or {}).get("metadata") or {}
    ref = owner_reference(
        api_version=API_VERSION, kind=kind, name=str(meta["name"]), uid=str(meta["uid"])
    )
    made: dict[str, Any] = {
        "name": name,
        "namespace": meta.get("namespace") or "default",
        "labels": {**dict(template_meta.get("labels") or {}), REVISION_HASH: hash_},
        "ownerReferences": [ref],
    }
    if meta.get("annotations"):
        made["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": made,
        "data": copy.deepcopy(data),
        "revision": number,
    }


def _limit(owner: Mapping[str, Any]) -> int:
    given = (owner.get("spec") or {}).get("revisionHistoryLimit")
    return given if isinstance(given, int) and given >= 0 else DEFAULT_HISTORY_LIMIT


def _pruned(
    owner: Mapping[str, Any],
    owned: Sequence[Stored],
    plan: RevisionPlan,
    *,
    kind: str,
    live: Collection[str],
) -> list[str]:
    """The revisions beyond the history limit, oldest first (``cleanupHistory``,
    ``truncateHistory``)."""
    limit = _limit(owner)
    old = [r for r in owned if r.name != plan.update]
    if kind == "DaemonSet":
        extra = len(old) - limit
        unused = [r for r in old if r.hash not in live]
    else:
        used = {plan.update, plan.current, *live}
        unused = [r for r in old if r.name not in used]
        extra = len(unused) - limit
    return [r.name for r in unused[: max(extra, 0)]]
