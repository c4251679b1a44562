"""The API server's defaulting and validation of Deployments, ReplicaSets and StatefulSets
(``pkg/apis/apps`` and their registry strategies), and the rules Jobs share with them.

A workload is a promise of pods: a mistake in its pod template would otherwise surface
later, pod by pod, as events nobody reads. So, as on a cluster, a workload is refused
whole when its template would make invalid pods, its selector would not select them, or
an update changes what may not change (``spec.selector: Invalid value: ...: field is
immutable``), with the API server's field paths and words. Defaulting fills what ``kubectl
get -o yaml`` shows (``replicas: 1``, ``maxSurge: 25%``...), the pod template getting the
defaults of the pods it makes; fields a single node does not carry out (persistent volume
claim templates) are refused by name rather than ignored.

Mirrors ``pkg/apis/apps/v1/defaults.go`` and ``pkg/apis/apps/validation/validation.go``;
Jobs are :mod:`~asynckubelet.manifests.jobs`', label selectors
:mod:`~asynckubelet.manifests.selectors`'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from lightkube.models.apps_v1 import (
    Deployment,
    ReplicaSet,
    StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetUpdateStrategy,
)
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests import defaults
from asynckubelet.manifests.messages import forbidden, go_map, invalid, not_supported, required
from asynckubelet.manifests.objectmeta import validate_object_meta
from asynckubelet.manifests.selectors import (
    _selector_dict,
    _selector_valid,
    go_label_selector,
    selector_matches,
    validate_label_selector,
)
from asynckubelet.manifests.validation import validate_pod_template

__all__ = [
    "default_deployment",
    "default_namespace",
    "default_replicaset",
    "default_statefulset",
    "scaled_value",
    "validate_deployment",
    "validate_deployment_update",
    "validate_replicaset",
    "validate_replicaset_update",
    "validate_statefulset",
    "validate_statefulset_update",
]

IMMUTABLE = "field is immutable"
_NEGATIVE = "must be greater than or equal to 0"
_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
_UNSUPPORTED = "not supported on this node"
_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)

IntOrPercent = int | str


# -- shared rules ------------------------------------------------------------------------------


def default_namespace(doc: dict[str, Any]) -> None:
    """A namespaced object without a namespace is the ``default`` namespace's."""
    _namespace(doc)


def _namespace(doc: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = doc.setdefault("metadata", {})
    if not meta.get("namespace"):
        meta["namespace"] = "default"
    return meta


def _template(spec: dict[str, Any]) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        defaults.default_pod_template(template)


def _given(selector: LabelSelector | None, absent: frozenset[str]) -> LabelSelector | None:
    """The selector as written: None when the document had none (the model's stand-in)."""
    return None if "spec.selector" in absent else selector


def _empty_selector(selector: LabelSelector) -> bool:
    return not selector.matchLabels and not selector.matchExpressions


def _nonnegative(errs: list[FieldError], path: str, value: int | None) -> None:
    if value is not None and value < 0:
        errs.append(invalid(path, value, _NEGATIVE))


def _template_labels(template: PodTemplateSpec | None) -> dict[str, str]:
    return dict(_raw_labels(template) or {})


def _raw_labels(template: PodTemplateSpec | None) -> dict[str, str] | None:
    meta = template.metadata if template is not None else None
    return meta.labels if meta is not None else None


def _selected_template(
    errs: list[FieldError],
    selector: LabelSelector | None,
    template: PodTemplateSpec | None,
    path: str,
    *,
    workload: str,
    restart_policy: bool = True,
) -> None:
    """The selector (required, non-empty, selecting the template's labels) and the pod
    template, as ``ValidatePodTemplateSpecForReplicaSet`` checks them."""
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs.extend(validate_label_selector(selector, f"{path}.selector"))
        if _empty_selector(selector):
            errs.append(
                invalid(
                    f"{path}.selector",
                    go_label_selector(_selector_dict(selector)),
                    f"empty selector is invalid for {workload}",
                )
            )
    if not _selector_valid(selector):
        errs.append(
            invalid(
                f"{path}.selector",
                go_label_selector(_selector_dict(selector)),
                "invalid label selector",
            )
        )
    elif (selector is None or not _empty_selector(selector)) and not selector_matches(
        selector, _template_labels(template)
    ):
        # A missing selector selects nothing (``labels.Nothing()``), an empty one everything.
        errs.append(
            invalid(
                f"{path}.template.metadata.labels",
                go_map(_raw_labels(template)),
                "`selector` does not match template `labels`",
            )
        )
    errs.extend(validate_pod_template(template, f"{path}.template"))
    if template is None or template.spec is None or not restart_policy:
        return
    policy = template.spec.restartPolicy
    if policy != "Always":
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", policy, ("Always",)))
    if template.spec.activeDeadlineSeconds is not None:
        kind = {"statefulset": "StatefulSet", "daemonset": "DaemonSet"}.get(workload, "ReplicaSet")
        errs.append(
            forbidden(
                f"{path}.template.spec.activeDeadlineSeconds",
                f"activeDeadlineSeconds in {kind} is not Supported",
            )
        )


def _percent(value: IntOrPercent | None) -> int | None:
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def _int_or_percent(errs: list[FieldError], path: str, value: IntOrPercent | None) -> None:
    """``ValidatePositiveIntOrPercent``."""
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            errs.append(invalid(path, value, _PERCENT_MSG))
    elif isinstance(value, int):
        _nonnegative(errs, path, value)


def _value_of(value: IntOrPercent | None) -> int:
    """``getIntOrPercentValue``: the number, or the percentage's number."""
    percent = _percent(value)
    if percent is not None:
        return percent
    return value if isinstance(value, int) else 0


def scaled_value(value: IntOrPercent | None, total: int, *, round_up: bool) -> int:
    """``GetScaledValueFromIntOrPercent``: an int as it is, a percentage of ``total``
    rounded up or down; an invalid value counts as 0."""
    if isinstance(value, int):
        return value
    percent = _percent(value)
    if percent is None:
        return 0
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def _not_over_100(errs: list[FieldError], path: str, value: IntOrPercent | None) -> None:
    percent = _percent(value)
    if percent is not None and percent > 100:
        errs.append(invalid(path, value, "must not be greater than 100%"))


def _immutable(errs: list[FieldError], path: str, new: Any, old: Any, shown: Any = None) -> None:
    if new != old:
        errs.append(invalid(path, shown if shown is not None else new, IMMUTABLE))


def _unsupported(errs: list[FieldError], path: str, value: Any, what: str) -> None:
    if value is not None:
        errs.append(forbidden(path, f"{what} is {_UNSUPPORTED}"))


# -- Deployment and ReplicaSet -----------------------------------------------------------------


def default_deployment(doc: dict[str, Any]) -> None:
    """``SetDefaults_Deployment`` (apps/v1), the pod template's defaults included."""
    _namespace(doc)
    spec = doc.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(spec)


def default_replicaset(doc: dict[str, Any]) -> None:
    """``SetDefaults_ReplicaSet``."""
    _namespace(doc)
    spec = doc.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _template(spec)


def validate_deployment(
    obj: Deployment, *, absent: frozenset[str] = frozenset()
) -> list[FieldError]:
    """``ValidateDeployment``."""
    errs = validate_object_meta(obj.metadata, namespaced=True)
    spec = obj.spec
    if spec is None:
        return [*errs, required("spec.selector")]
    _nonnegative(errs, "spec.replicas", spec.replicas)
    _selected_template(
        errs, _given(spec.selector, absent), spec.template, "spec", workload="deployment"
    )
    strategy = spec.strategy
    kind = strategy.type if strategy is not None else None
    rolling = strategy.rollingUpdate if strategy is not None else None
    if kind == "Recreate":
        if rolling is not None:
            errs.append(
                forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                )
            )
    elif kind == "RollingUpdate":
        if rolling is None:
            errs.append(
                required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")
            )
        else:
            path = "spec.strategy.rollingUpdate"
            _int_or_percent(errs, f"{path}.maxUnavailable", rolling.maxUnavailable)
            _int_or_percent(errs, f"{path}.maxSurge", rolling.maxSurge)
            if _value_of(rolling.maxUnavailable) == 0 and _value_of(rolling.maxSurge) == 0:
                errs.append(
                    invalid(
                        f"{path}.maxUnavailable",
                        rolling.maxUnavailable,
                        "may not be 0 when `maxSurge` is 0",
                    )
                )
            _not_over_100(errs, f"{path}.maxUnavailable", rolling.maxUnavailable)
    else:
        errs.append(not_supported("spec.strategy.type", kind, ("Recreate", "RollingUpdate")))
    _nonnegative(errs, "spec.minReadySeconds", spec.minReadySeconds)
    _nonnegative(errs, "spec.revisionHistoryLimit", spec.revisionHistoryLimit)
    deadline = spec.progressDeadlineSeconds
    if deadline is not None:
        _nonnegative(errs, "spec.progressDeadlineSeconds", deadline)
        if deadline <= (spec.minReadySeconds or 0):
            errs.append(
                invalid(
                    "spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"
                )
            )
    return errs


def validate_deployment_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """What apps/v1 forbids an update of a Deployment to change: its selector."""
    return _selector_update(new, old)


def validate_replicaset(
    obj: ReplicaSet, *, absent: frozenset[str] = frozenset()
) -> list[FieldError]:
    """``ValidateReplicaSet``."""
    errs = validate_object_meta(obj.metadata, namespaced=True)
    spec = obj.spec
    if spec is None:
        return [*errs, required("spec.selector")]
    _nonnegative(errs, "spec.replicas", spec.replicas)
    _nonnegative(errs, "spec.minReadySeconds", spec.minReadySeconds)
    # Upstream says "deployment" here too.
    selector = _given(spec.selector, absent)
    _selected_template(errs, selector, spec.template, "spec", workload="deployment")
    return errs


def validate_replicaset_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    return _selector_update(new, old)


def _selector_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    selector = (new.get("spec") or {}).get("selector")
    _immutable(
        errs,
        "spec.selector",
        selector,
        (old.get("spec") or {}).get("selector"),
        go_label_selector(selector),
    )
    return errs


# -- StatefulSet -------------------------------------------------------------------------------


def default_statefulset(doc: dict[str, Any]) -> None:
    """``SetDefaults_StatefulSet``."""
    _namespace(doc)
    spec = doc.setdefault("spec", {})
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        if strategy.get("rollingUpdate") is None:
            strategy["rollingUpdate"] = {}
    rolling = strategy.get("rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
        rolling.setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if not retention.get("whenDeleted"):
        retention["whenDeleted"] = "Retain"
    if not retention.get("whenScaled"):
        retention["whenScaled"] = "Retain"
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(spec)


def _statefulset_strategy(strategy: StatefulSetUpdateStrategy | None) -> list[FieldError]:
    """A StatefulSet's ``spec.updateStrategy``."""
    errs: list[FieldError] = []
    kind = strategy.type if strategy is not None else None
    rolling = strategy.rollingUpdate if strategy is not None else None
    if not kind:
        errs.append(required("spec.updateStrategy"))
    elif kind == "OnDelete":
        if rolling is not None:
            errs.append(
                invalid(
                    "spec.updateStrategy.rollingUpdate",
                    rolling,
                    "only allowed for updateStrategy 'RollingUpdate'",
                )
            )
    elif kind == "RollingUpdate":
        if rolling is not None:
            path = "spec.updateStrategy.rollingUpdate"
            _nonnegative(errs, f"{path}.partition", rolling.partition)
            if rolling.maxUnavailable is not None:
                _int_or_percent(errs, f"{path}.maxUnavailable", rolling.maxUnavailable)
                if _value_of(rolling.maxUnavailable) == 0:
                    errs.append(
                        invalid(f"{path}.maxUnavailable", rolling.maxUnavailable, "cannot be 0")
                    )
                _not_over_100(errs, f"{path}.maxUnavailable", rolling.maxUnavailable)
    else:
        errs.append(invalid("spec.updateStrategy", kind, "must be 'RollingUpdate' or 'OnDelete'"))
    return errs


def _retention_policy(
    retention: StatefulSetPersistentVolumeClaimRetentionPolicy | None,
) -> list[FieldError]:
    """A StatefulSet's ``spec.persistentVolumeClaimRetentionPolicy``."""
    errs: list[FieldError] = []
    if retention is not None:
        for name in ("whenDeleted", "whenScaled"):
            value = getattr(retention, name)
            if value not in ("Retain", "Delete"):
                errs.append(
                    not_supported(
                        f"spec.persistentVolumeClaimRetentionPolicy.{name}",
                        value,
                        ("Retain", "Delete"),
                    )
                )
    return errs


def validate_statefulset(
    obj: StatefulSet, *, absent: frozenset[str] = frozenset()
) -> list[FieldError]:
    """``ValidateStatefulSet``; the template's pod spec is checked as a pod's too (the
    API server leaves that to the pods' creation, which here would fail unseen)."""
    errs = validate_object_meta(obj.metadata, namespaced=True, label_name=True)
    spec = obj.spec
    if spec is None:
        return [*errs, required("spec.selector")]
    policy = spec.podManagementPolicy
    if not policy:
        errs.append(required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        errs.append(
            invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'")
        )
    errs.extend(_statefulset_strategy(spec.updateStrategy))
    errs.extend(_retention_policy(spec.persistentVolumeClaimRetentionPolicy))
    _nonnegative(errs, "spec.replicas", spec.replicas)
    _nonnegative(errs, "spec.minReadySeconds", spec.minReadySeconds)
    if spec.ordinals is not None:
        _nonnegative(errs, "spec.ordinals.start", spec.ordinals.start)
    selector = _given(spec.selector, absent)
    _selected_template(errs, selector, spec.template, "spec", workload="statefulset")
    if spec.volumeClaimTemplates:
        errs.append(
            forbidden(
                "spec.volumeClaimTemplates",
                f"persistent volume claims are {_UNSUPPORTED} (it has no storage provisioner)",
            )
        )
    return errs


def validate_statefulset_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateStatefulSetUpdate``: only some spec fields may change."""
    kept_new = {k: v for k, v in (new.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
    kept_old = {k: v for k, v in (old.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
    if kept_new == kept_old:
        return []
    fields = ", ".join(f"'{f}'" for f in _STATEFULSET_MUTABLE[:-1])
    return [
        forbidden(
            "spec",
            f"updates to statefulset spec for fields other than {fields} and "
            f"'{_STATEFULSET_MUTABLE[-1]}' are forbidden",
        )
    ]


def template_meta(template: PodTemplateSpec | None) -> ObjectMeta:
    return (template.metadata if template is not None else None) or ObjectMeta()
