"""The API server's defaulting and validation of Deployments, ReplicaSets, StatefulSets
and Jobs (``pkg/apis/apps``, ``pkg/apis/batch`` and their registry strategies).

A workload is a promise of pods: a mistake in its pod template would otherwise surface
later, pod by pod, as events nobody reads. So, as on a cluster, a workload is refused
whole when its template would make invalid pods, its selector would not select them, or
an update changes what may not change (``spec.selector: Invalid value: ...: field is
immutable``), with the API server's field paths and words. Defaulting fills what ``kubectl
get -o yaml`` shows (``replicas: 1``, ``maxSurge: 25%``, ``backoffLimit: 6``...), the pod
template getting the defaults of the pods it makes.

A Job's selector and its pods' ``controller-uid`` labels are made from the Job's UID when
it is stored (:func:`prepare_job`), as the Job strategy does before validating; fields a
single node does not carry out (indexed completion, pod failure and success policies,
persistent volume claim templates) are refused by name rather than ignored.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from lightkube.models.apps_v1 import (
    Deployment,
    ReplicaSet,
    StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetUpdateStrategy,
)
from lightkube.models.batch_v1 import Job
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests import defaults
from asynckubelet.manifests.messages import (
    GoValue,
    forbidden,
    go_map,
    go_quote,
    invalid,
    is_qualified_name,
    is_valid_label_value,
    not_supported,
    required,
)
from asynckubelet.manifests.objectmeta import validate_labels, validate_object_meta
from asynckubelet.manifests.validation import validate_pod_template

__all__ = [
    "CONTROLLER_UID_LABEL",
    "JOB_NAME_LABEL",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "default_deployment",
    "default_job",
    "default_namespace",
    "default_replicaset",
    "default_statefulset",
    "go_label_selector",
    "parse_label_selector",
    "prepare_job",
    "scaled_value",
    "selector_matches",
    "validate_deployment",
    "validate_deployment_update",
    "validate_job",
    "validate_job_update",
    "validate_label_selector",
    "validate_replicaset",
    "validate_replicaset_update",
    "validate_statefulset",
    "validate_statefulset_update",
]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
IMMUTABLE = "field is immutable"
_NEGATIVE = "must be greater than or equal to 0"
_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_UNSUPPORTED = "not supported on this node"
_PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
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


def go_label_selector(selector: Mapping[str, Any] | None) -> GoValue:
    """A label selector as the API server prints it in an error (``%#v`` of a pointer)."""
    if selector is None:
        return GoValue("(*v1.LabelSelector)(nil)")
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    if expressions:
        shown = ", ".join(
            "v1.LabelSelectorRequirement{"
            f"Key:{go_quote(str(e.get('key') or ''))}, "
            f"Operator:{go_quote(str(e.get('operator') or ''))}, "
            f"Values:{_go_strings(e.get('values'))}}}"
            for e in expressions
        )
        exprs = f"[]v1.LabelSelectorRequirement{{{shown}}}"
    else:
        exprs = "[]v1.LabelSelectorRequirement(nil)"
    return GoValue(f"&v1.LabelSelector{{MatchLabels:{go_map(labels)}, MatchExpressions:{exprs}}}")


def _go_strings(values: Sequence[str] | None) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"


def _selector_dict(selector: LabelSelector | None) -> dict[str, Any] | None:
    return selector.to_dict() if selector is not None else None


def validate_label_selector(selector: LabelSelector | None, path: str) -> list[FieldError]:
    """``ValidateLabelSelector`` (label values in expressions checked strictly)."""
    if selector is None:
        return []
    errs = validate_labels(selector.matchLabels, f"{path}.matchLabels")
    for i, expr in enumerate(selector.matchExpressions or []):
        at = f"{path}.matchExpressions[{i}]"
        if expr.operator in ("In", "NotIn"):
            if not expr.values:
                errs.append(
                    required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif expr.operator in ("Exists", "DoesNotExist"):
            if expr.values:
                errs.append(
                    forbidden(
                        f"{at}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(invalid(f"{at}.operator", expr.operator, "not a valid selector operator"))
        errs.extend(invalid(f"{at}.key", expr.key, m) for m in is_qualified_name(expr.key))
        for j, value in enumerate(expr.values or []):
            errs.extend(invalid(f"{at}.values[{j}]", value, m) for m in is_valid_label_value(value))
    return errs


def _selector_valid(selector: LabelSelector | None) -> bool:
    """Whether ``LabelSelectorAsSelector`` would accept it (operators known, values given)."""
    if selector is None:
        return True
    for expr in selector.matchExpressions or []:
        if expr.operator not in _OPERATORS:
            return False
        if expr.operator in ("In", "NotIn") and not expr.values:
            return False
    return True


def selector_matches(
    selector: LabelSelector | Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    """Whether ``labels`` match ``selector`` (``matchLabels`` and ``matchExpressions``);
    an empty selector matches everything, a missing one nothing."""
    if selector is None:
        return False
    data = selector.to_dict() if isinstance(selector, LabelSelector) else dict(selector)
    for key, value in (data.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in data.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in _OPERATORS:
            return False
    return True


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
        kind = "StatefulSet" if workload == "statefulset" else "ReplicaSet"
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


# -- Job ---------------------------------------------------------------------------------------


def default_job(doc: dict[str, Any]) -> None:
    """``SetDefaults_Job`` (with ``JobPodReplacementPolicy``), and the pod template's."""
    meta = _namespace(doc)
    spec = doc.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.get("template")
    labels = (
        ((template or {}).get("metadata") or {}).get("labels")
        if isinstance(template, dict)
        else None
    )
    if labels and not meta.get("labels"):
        meta["labels"] = dict(labels)
    if not spec.get("completionMode"):
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if not spec.get("podReplacementPolicy"):
        failed = spec.get("podFailurePolicy") is not None
        spec["podReplacementPolicy"] = "Failed" if failed else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    _template(spec)


def prepare_job(doc: dict[str, Any], *, uid: str) -> None:
    """The Job strategy's ``generateSelector``, in place: unless ``manualSelector``, the
    pod template gets the ``job-name`` and ``controller-uid`` labels (both spellings) and
    the selector selects ``batch.kubernetes.io/controller-uid``. Labels a user set are
    kept (validation then names a conflict)."""
    spec = doc.setdefault("spec", {})
    if spec.get("manualSelector") is True:
        return
    name = str((doc.get("metadata") or {}).get("name") or "")
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match = selector.get("matchLabels")
    if not isinstance(match, dict):
        match = selector["matchLabels"] = {}
    match.setdefault(CONTROLLER_UID_LABEL, uid)


def validate_job(obj: Job, *, absent: frozenset[str] = frozenset()) -> list[FieldError]:
    """``ValidateJob`` on the Job as its strategy validates it: its selector generated
    (:func:`prepare_job`) from its UID, or a stand-in before it has one."""
    doc = obj.to_dict()
    given = copy.deepcopy((doc.get("spec") or {}).get("selector"))
    uid = str((doc.get("metadata") or {}).get("uid") or _PLACEHOLDER_UID)
    prepare_job(doc, uid=uid)
    job = cast(Job, Job.from_dict(doc))
    errs = validate_object_meta(job.metadata, namespaced=True)
    # Before it has a UID, the selector is shown as written, not with a stand-in UID.
    shown = given if uid == _PLACEHOLDER_UID else (doc.get("spec") or {}).get("selector")
    errs += _generated_selector(job, uid=uid, shown=shown)
    spec = job.spec
    if spec is None:
        return [*errs, required("spec.template")]
    for name in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
        _nonnegative(errs, f"spec.{name}", getattr(spec, name))
    _nonnegative(errs, "spec.ttlSecondsAfterFinished", spec.ttlSecondsAfterFinished)
    mode = spec.completionMode
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported("spec.completionMode", mode, ("NonIndexed", "Indexed")))
    elif mode == "Indexed":
        errs.append(forbidden("spec.completionMode", f"Indexed completion is {_UNSUPPORTED}"))
    _unsupported(
        errs, "spec.backoffLimitPerIndex", spec.backoffLimitPerIndex, "backoffLimitPerIndex"
    )
    _unsupported(errs, "spec.maxFailedIndexes", spec.maxFailedIndexes, "maxFailedIndexes")
    _unsupported(errs, "spec.podFailurePolicy", spec.podFailurePolicy, "a pod failure policy")
    _unsupported(errs, "spec.successPolicy", spec.successPolicy, "a success policy")
    _unsupported(errs, "spec.managedBy", spec.managedBy, "another controller")
    replacement = spec.podReplacementPolicy
    if replacement is not None and replacement not in ("TerminatingOrFailed", "Failed"):
        errs.append(
            not_supported(
                "spec.podReplacementPolicy", replacement, ("Failed", "TerminatingOrFailed")
            )
        )
    errs.extend(validate_pod_template(spec.template, "spec.template"))
    policy = spec.template.spec.restartPolicy if spec.template and spec.template.spec else None
    if policy in (None, "", "Always"):
        errs.append(
            required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"')
        )
    elif policy not in ("OnFailure", "Never"):
        errs.append(
            not_supported("spec.template.spec.restartPolicy", policy, ("OnFailure", "Never"))
        )
    if spec.selector is None:
        errs.append(required("spec.selector"))
    else:
        errs.extend(validate_label_selector(spec.selector, "spec.selector"))
    generated = not any(e.detail.endswith("`selector` not auto-generated") for e in errs)
    # Against a selector that was not generated, the template's generated labels (with a
    # stand-in UID) would only confuse.
    if (
        _selector_valid(spec.selector)
        and spec.selector is not None
        and generated
        and not selector_matches(spec.selector, _template_labels(spec.template))
    ):
        errs.append(
            invalid(
                "spec.template.metadata.labels",
                go_map(_raw_labels(spec.template)),
                "`selector` does not match template `labels`",
            )
        )
    return errs


def _generated_selector(job: Job, *, uid: str, shown: Any) -> list[FieldError]:
    """``validateGeneratedSelector``: the labels and selector generation made are there."""
    spec = job.spec
    if spec is None or spec.manualSelector or spec.selector is None:
        return []
    errs: list[FieldError] = []
    name = job.metadata.name if job.metadata is not None else ""
    labels = _template_labels(spec.template)
    expected = {
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name or "",
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name or "",
    }
    for key, value in expected.items():
        if key not in labels:
            errs.append(required(f"spec.template.metadata.labels[{key}]", f"must be '{value}'"))
        elif labels[key] != value:
            errs.append(
                invalid(f"spec.template.metadata.labels[{key}]", labels[key], f"must be '{value}'")
            )
    if not selector_matches(spec.selector, expected):
        errs.append(
            invalid(
                "spec.selector",
                go_label_selector(shown),
                "`selector` not auto-generated",
            )
        )
    return errs


def validate_job_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateJobSpecUpdate``: ``new`` (prepared with the stored Job's UID, see
    :func:`prepare_job`) against the stored Job."""
    errs: list[FieldError] = []
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    _immutable(errs, "spec.completions", spec.get("completions"), old_spec.get("completions"))
    selector = spec.get("selector")
    _immutable(
        errs, "spec.selector", selector, old_spec.get("selector"), go_label_selector(selector)
    )
    template = spec.get("template")
    _immutable(
        errs,
        "spec.template",
        template,
        old_spec.get("template"),
        GoValue("core.PodTemplateSpec{...}"),
    )
    for name in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy"):
        _immutable(errs, f"spec.{name}", spec.get(name), old_spec.get(name))
    return errs


def prepared_copy(doc: Mapping[str, Any], *, uid: str) -> dict[str, Any]:
    """A Job document prepared as :func:`prepare_job` would store it, ``doc`` untouched."""
    prepared = copy.deepcopy(dict(doc))
    prepare_job(prepared, uid=uid)
    return prepared


def template_meta(template: PodTemplateSpec | None) -> ObjectMeta:
    return (template.metadata if template is not None else None) or ObjectMeta()


_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


def parse_label_selector(text: str) -> dict[str, Any]:
    """A label selector as kubectl's ``-l`` takes it (``app=web,tier!=db,env in (a,b),
    !legacy``), as a ``LabelSelector`` dict; raise :class:`ValueError` with the API
    server's words for a key or value it refuses (``unable to parse requirement: key:
    Invalid value: ...``), or naming the term it cannot read."""
    labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for term in _split_terms(text):
        if not term.strip():
            continue
        for op, kind in (("!=", "NotIn"), ("==", "In"), ("=", "In")):
            if op in term:
                key, _, value = term.partition(op)
                key, value = key.strip(), value.strip()
                _check_requirement(key, [value])
                if kind == "In" and labels.get(key, value) == value:
                    labels[key] = value
                else:
                    expressions.append({"key": key, "operator": kind, "values": [value]})
                break
        else:
            match = _SET_TERM.match(term)
            if match is None:
                raise ValueError(f"unable to parse requirement: invalid term {term.strip()!r}")
            negated, key, op, values = match.groups()
            if op is not None:
                if negated:
                    raise ValueError(f"unable to parse requirement: invalid term {term.strip()!r}")
                items = [v.strip() for v in values.split(",") if v.strip()]
                _check_requirement(key, items)
                expressions.append(
                    {"key": key, "operator": "In" if op == "in" else "NotIn", "values": items}
                )
            else:
                _check_requirement(key, [])
                expressions.append(
                    {"key": key, "operator": "DoesNotExist" if negated else "Exists"}
                )
    selector: dict[str, Any] = {}
    if labels:
        selector["matchLabels"] = labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def _check_requirement(key: str, values: list[str]) -> None:
    """Raise the API server's error for a selector term's key or values."""
    problems = is_qualified_name(key)
    if problems:
        raise ValueError(
            f"unable to parse requirement: key: Invalid value: {go_quote(key)}: "
            + "; ".join(problems)
        )
    for i, value in enumerate(values):
        problems = is_valid_label_value(value)
        if problems:
            raise ValueError(
                f"unable to parse requirement: values[{i}][{key}]: Invalid value: "
                f"{go_quote(value)}: " + "; ".join(problems)
            )


def _split_terms(text: str) -> list[str]:
    """Terms separated by commas outside parentheses."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return terms
