"""The API server's validation of ControllerRevisions (``apps/v1``).

Mirrors ``ValidateControllerRevision`` and ``ValidateControllerRevisionUpdate``
(``pkg/apis/apps/validation``): a revision is named as any namespaced object, holds
``data`` (a JSON object here: the patch of the owner's template its controller wrote),
its ``revision`` is not negative, and its ``data`` never changes once stored. A ``null``
or empty ``data`` is refused as a missing one: no controller writes it, and an undo with
it would change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube.models.apps_v1 import ControllerRevision

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import invalid, required
from asynckubelet.manifests.objectmeta import validate_object_meta
from asynckubelet.manifests.workloads import _immutable, _namespace, _nonnegative

__all__ = [
    "default_controllerrevision",
    "validate_controllerrevision",
    "validate_controllerrevision_update",
]


def default_controllerrevision(doc: dict[str, Any]) -> None:
    """A revision without a namespace is the ``default`` namespace's."""
    _namespace(doc)


def validate_controllerrevision(
    obj: ControllerRevision, *, absent: frozenset[str] = frozenset()
) -> list[FieldError]:
    """``ValidateControllerRevision``."""
    errs = validate_object_meta(obj.metadata, namespaced=True)
    if not isinstance(obj.data, dict) and obj.data is not None:
        errs.append(invalid("data", type(obj.data).__name__, "must be a JSON object"))
    elif not obj.data:
        errs.append(required("data", "data is mandatory"))
    _nonnegative(errs, "revision", obj.revision)
    return errs


def validate_controllerrevision_update(
    new: Mapping[str, Any], old: Mapping[str, Any]
) -> list[FieldError]:
    """``ValidateControllerRevisionUpdate``: ``data`` may not change."""
    errs: list[FieldError] = []
    _immutable(errs, "data", new.get("data"), old.get("data"))
    return errs
