"""Every object's metadata as the API server checks it: name, namespace, labels, annotations.

Each kind this node accepts gets these checks before its own, so a name or label a cluster
would refuse is refused here in the same words. Mirrors apimachinery's
``pkg/api/validation/objectmeta.go`` (``ValidateObjectMeta``, ``ValidateAnnotations``) and
``pkg/apis/meta/v1/validation/validation.go`` (``ValidateLabels``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    required,
    too_long,
)

__all__ = ["validate_labels", "validate_object_meta"]

_MAX_ANNOTATION_BYTES = 256 * 1024


def _names(errs: list[FieldError], path: str, value: str, msgs: Iterable[str]) -> None:
    errs.extend(invalid(path, value, m) for m in msgs)


def validate_object_meta(
    meta: ObjectMeta | None, *, namespaced: bool, label_name: bool = False
) -> list[FieldError]:
    """``ValidateObjectMeta``: name, namespace, labels and annotations."""
    errs: list[FieldError] = []
    meta = meta or ObjectMeta()
    if not meta.name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        check = is_dns1123_label if label_name else is_dns1123_subdomain
        _names(errs, "metadata.name", meta.name, check(meta.name))
    if namespaced and meta.namespace:
        _names(errs, "metadata.namespace", meta.namespace, is_dns1123_label(meta.namespace))
    errs += validate_labels(meta.labels, "metadata.labels")
    errs += _validate_annotations(meta.annotations, "metadata.annotations")
    return errs


def validate_labels(labels: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """``ValidateLabels``: qualified names for keys, label values for values."""
    errs: list[FieldError] = []
    for key, value in (labels or {}).items():
        _names(errs, path, key, is_qualified_name(key))
        if not isinstance(value, str):
            errs.append(invalid(f"{path}[{key}]", value, "must be a string"))
        else:
            _names(errs, path, value, is_valid_label_value(value))
    return errs


def _validate_annotations(annotations: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    size = 0
    for key, value in (annotations or {}).items():
        _names(errs, path, key, is_qualified_name(key.lower()))
        size += len(key) + len(str(value))
    if size > _MAX_ANNOTATION_BYTES:
        errs.append(too_long(path, _MAX_ANNOTATION_BYTES))
    return errs
