"""Field ownership of server-side apply, as the API server keeps it in
``metadata.managedFields``: one entry per manager and operation (``Apply``, or ``Update``
for a create, update or patch), each naming the fields it owns
(:mod:`~asynckubelet.api.kube.fieldsets`).

An ``Update`` takes the fields it sets from every other manager, without conflicts. An
apply merges its configuration into the live object; a field it would change that
another manager owns is a conflict (``409``, unless forced, which takes the field), a
field it sets to the value it has is shared; a field it applied before and applies no
longer is removed from the object when no manager owns it or anything under it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from asynckubelet.api.kube import fieldsets
from asynckubelet.api.kube.fieldsets import Path

APPLY, UPDATE = "Apply", "Update"
MAX_MANAGER_CHARS = 128
MAX_UPDATE_MANAGERS = 10
"""``Update`` entries kept apart; older ones are merged into :data:`ANCIENT_CHANGES`."""
ANCIENT_CHANGES = "ancient-changes"


@dataclass(frozen=True)
class Conflict:
    """A field an apply would change that another manager owns."""

    entry: Mapping[str, Any]
    path: Path

    @property
    def manager(self) -> str:
        """The owner as the API server names it: ``"kubectl-scale" with subresource
        "scale" using apps/v1``."""
        name = fieldsets.quoted(str(self.entry.get("manager", "")))
        if self.entry.get("subresource"):
            name += f" with subresource {fieldsets.quoted(str(self.entry['subresource']))}"
        if self.entry.get("operation") == UPDATE:
            name += f" using {self.entry.get('apiVersion', '')}"
        return name


class Conflicts(Exception):
    """The conflicts of an apply not forced."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        """``Apply failed with 1 conflict: conflict with "x" using v1: .spec.replicas``."""
        found = self.conflicts
        if len(found) == 1:
            only = found[0]
            return (
                f"Apply failed with 1 conflict: conflict with {only.manager}: "
                f"{fieldsets.shown(only.path)}"
            )
        lines = []
        for manager in sorted({c.manager for c in found}):
            lines.append(f"conflicts with {manager}:")
            lines += [f"- {fieldsets.shown(c.path)}" for c in found if c.manager == manager]
        return f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict[str, str]]:
        return [
            {
                "type": "FieldManagerConflict",
                "message": f"conflict with {c.manager}",
                "field": fieldsets.shown(c.path),
            }
            for c in self.conflicts
        ]


def requested(body: Any) -> list[dict[str, Any]] | None:
    """The ``managedFields`` a write sets, as the API server takes them: ``[]`` (or
    ``[{}]``) resets them, well-formed entries naming fields replace them; None (keep the
    live object's) for anything else, so that a client that drops them loses nothing."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    given = meta.get("managedFields") if isinstance(meta, dict) else None
    if not isinstance(given, list):
        return None
    if all(e == {} for e in given):
        return []
    if not all(_well_formed(e) for e in given):
        return None
    kept = [dict(e) for e in given]
    return kept if any(fieldsets.decode(e["fieldsV1"]) for e in kept) else None


def _well_formed(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("manager"), str)
        and entry.get("operation") in (APPLY, UPDATE)
        and entry.get("fieldsType") == "FieldsV1"
        and isinstance(entry.get("fieldsV1"), dict)
        and isinstance(entry.get("apiVersion", ""), str)
        and isinstance(entry.get("time", ""), str)
        and isinstance(entry.get("subresource", ""), str)
    )


def entries(body: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``managedFields`` entries of ``body`` (those that are not objects left out)."""
    found = ((body or {}).get("metadata") or {}).get("managedFields") or []
    return [dict(e) for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    operation = str(entry.get("operation", ""))
    version = str(entry.get("apiVersion", "")) if operation == UPDATE else ""
    return (str(entry.get("manager", "")), operation, version, str(entry.get("subresource", "")))


def _entry(
    manager: str, operation: str, api_version: str, subresource: str, now: str, fields: set[Path]
) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fieldsets.encode(fields),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _sorted(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In the API server's order: by operation, time, manager, version, subresource."""
    return sorted(
        found,
        key=lambda e: tuple(
            str(e.get(k, "")) for k in ("operation", "time", "manager", "apiVersion", "subresource")
        ),
    )


def updated(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    kind: str,
    manager: str,
    api_version: str,
    now: str,
    subresource: str = "",
    owners: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The entries of ``new`` after ``manager`` wrote it over ``old`` (None: created),
    starting from ``owners`` when the write set them (:func:`requested`), else from
    ``old``'s."""
    changed, removed = fieldsets.changed_set(old, new, kind)
    me = (manager, UPDATE, api_version, subresource)
    kept: list[dict[str, Any]] = []
    mine: dict[str, Any] | None = None
    owned: set[Path] = set()
    for entry in entries(old) if owners is None else owners:
        fields = fieldsets.decode(entry.get("fieldsV1")) - removed
        if _identity(entry) == me:
            mine, owned = entry, fields
            continue
        left = fields - changed
        if left:
            kept.append({**entry, "fieldsV1": fieldsets.encode(left)})
    if changed:
        kept.append(_entry(manager, UPDATE, api_version, subresource, now, owned | changed))
    elif mine is not None and owned:
        kept.append({**mine, "fieldsV1": fieldsets.encode(owned)})
    return _sorted(_capped(kept))


def _capped(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most :data:`MAX_UPDATE_MANAGERS` ``Update`` entries: the oldest merged, by API
    version, into an ``ancient-changes`` entry (upstream's ``capManagersManager``)."""
    managed = {_identity(e): e for e in found}
    updaters = [k for k, e in managed.items() if e.get("operation") == UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return found
    updaters.sort(key=lambda k: (str(managed[k].get("time", "")), k))
    first_of: dict[str, tuple[str, str, str, str]] = {}
    length = len(updaters)
    for key in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        entry = managed[key]
        version = str(entry.get("apiVersion", ""))
        bucket = (ANCIENT_CHANGES, UPDATE, version, "")
        if version not in first_of:
            first_of[version] = key
            continue
        if bucket not in managed:
            first = managed.pop(first_of[version])
            managed[bucket] = {**first, "manager": ANCIENT_CHANGES}
            managed[bucket].pop("subresource", None)
        merged = fieldsets.decode(entry.get("fieldsV1")) | fieldsets.decode(
            managed[bucket].get("fieldsV1")
        )
        managed[bucket] = {
            **managed[bucket],
            "fieldsV1": fieldsets.encode(merged),
            "time": entry.get("time"),
        }
        del managed[key]
        length -= 1
    return list(managed.values())


def applied(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    kind: str,
    manager: str,
    api_version: str,
    now: str,
    force: bool,
    allowed: Set[Path] = frozenset(),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``config`` applied by ``manager`` to ``live`` (None: created): the object and its
    entries. Raises :class:`Conflicts` when it would change another manager's fields and
    is not forced; conflicts all on ``allowed`` fields (:func:`last_applied_fields`) are
    forced, as upstream's ``lastAppliedManager`` forces them."""
    mine = fieldsets.applied_set(config, kind)
    result = fieldsets.merged(copy.deepcopy(dict(live or {})), config, kind)
    changed, _ = fieldsets.changed_set(live, result, kind)
    me = (manager, APPLY, "", "")
    previous: set[Path] = set()
    found: list[tuple[dict[str, Any], set[Path], set[Path]]] = []
    conflicts: list[Conflict] = []
    for entry in entries(live):
        fields = fieldsets.decode(entry.get("fieldsV1"))
        if _identity(entry) == me:
            previous = fields
            continue
        clash = fields & changed
        conflicts += [Conflict(entry, p) for p in sorted(clash)]
        found.append((entry, fields, clash))
    if conflicts and not force:
        blocking = [c for c in conflicts if c.path not in allowed]
        if blocking:
            raise Conflicts(blocking)
        force = True
    others = [(e, fields - clash if force else fields) for e, fields, clash in found]
    owned = mine.union(*(f for _, f in others))
    holding = {p[:i] for p in owned for i in range(1, len(p))}
    for path in sorted(previous - owned - holding, key=len):
        fieldsets.remove(result, path)
    kept = [{**e, "fieldsV1": fieldsets.encode(f)} for e, f in others if f]
    kept.append(_entry(manager, APPLY, api_version, "", now, mine))
    return result, _sorted(kept)


def option_errors(query: Mapping[str, str], *, apply: bool, patch: bool) -> list[dict[str, str]]:
    """What the API server refuses in a write's ``fieldManager`` and ``force`` (upstream's
    ``ValidatePatchOptions``), as ``Status`` causes: a manager missing from an apply, one
    over 128 bytes or with a character that does not print, ``force`` on another patch."""
    given = query.get("fieldManager", "")
    causes = []
    if patch and not apply and "force" in query:
        causes.append(
            _cause("FieldValueForbidden", "force", "may not be specified for non-apply patch")
        )
    if apply and not given:
        causes.append(_cause("FieldValueRequired", "fieldManager", "is required for apply patch"))
    if len(given.encode()) > MAX_MANAGER_CHARS:
        causes.append(
            _cause(
                "FieldValueTooLong",
                "fieldManager",
                f"may not be more than {MAX_MANAGER_CHARS} bytes",
            )
        )
    for i, char in enumerate(given):
        if not char.isprintable():
            at = len(given[:i].encode())
            shown = fieldsets.quoted(given)
            detail = f"{shown}: invalid character U+{ord(char):04X} (at position {at})"
            causes.append(_cause("FieldValueInvalid", "fieldManager", detail))
    return causes


WORDS = {
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueTooLong": "Too long",
    "FieldValueInvalid": "Invalid value",
}


def _cause(reason: str, field: str, detail: str) -> dict[str, str]:
    return {"reason": reason, "message": f"{WORDS[reason]}: {detail}", "field": field}


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LAST_APPLIED_MANAGER = "kubectl"
"""The one manager whose conflicts on the fields of the client-side apply annotation are
forced (how ``kubectl apply --server-side`` takes over from ``kubectl apply``)."""


def last_applied_fields(live: Mapping[str, Any] | None, kind: str, manager: str) -> set[Path]:
    """The fields of ``live``'s client-side apply annotation, when ``manager`` is kubectl's
    server-side apply (none otherwise, or when the annotation does not read)."""
    if manager != LAST_APPLIED_MANAGER or live is None:
        return set()
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        config = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return set()
    return fieldsets.applied_set(config, kind) if isinstance(config, dict) else set()


def manager_of(query: Mapping[str, str], user_agent: str) -> str:
    """The ``fieldManager`` asked for, else the API server's default: the client's
    ``User-Agent`` up to its first ``/``, its printable characters, 128 at most."""
    if query.get("fieldManager"):
        return query["fieldManager"]
    prefix = "".join(c for c in user_agent.split("/", 1)[0] if c.isprintable())
    return prefix[:MAX_MANAGER_CHARS]


__all__ = [
    "APPLY",
    "UPDATE",
    "Conflict",
    "Conflicts",
    "applied",
    "entries",
    "last_applied_fields",
    "manager_of",
    "option_errors",
    "requested",
    "updated",
]
