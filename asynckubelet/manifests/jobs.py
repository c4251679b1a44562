"""The API server's defaulting and validation of Jobs (``pkg/apis/batch`` and the Job
registry strategy).

A Job's selector and its pods' ``controller-uid`` labels are made from the Job's UID when
it is stored (:func:`prepare_job`), as the Job strategy does before validating; fields a
single node does not carry out (indexed completion, pod failure and success policies) are
refused by name rather than ignored. Mirrors ``pkg/apis/batch/v1/defaults.go``
(``SetDefaults_Job``), ``pkg/registry/batch/job/strategy.go`` (``generateSelector``) and
``pkg/apis/batch/validation/validation.go`` (``ValidateJob``, ``validateGeneratedSelector``,
``ValidateJobSpecUpdate``); the rules shared with the apps kinds are
:mod:`~asynckubelet.manifests.workloads`'.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

from lightkube.models.batch_v1 import Job

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    GoValue,
    forbidden,
    go_map,
    invalid,
    not_supported,
    required,
)
from asynckubelet.manifests.objectmeta import validate_object_meta
from asynckubelet.manifests.selectors import (
    _selector_valid,
    go_label_selector,
    selector_matches,
    validate_label_selector,
)
from asynckubelet.manifests.validation import validate_pod_template
from asynckubelet.manifests.workloads import (
    _UNSUPPORTED,
    _immutable,
    _namespace,
    _nonnegative,
    _raw_labels,
    _template,
    _template_labels,
    _unsupported,
)

__all__ = [
    "CONTROLLER_UID_LABEL",
    "JOB_NAME_LABEL",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "default_job",
    "prepare_job",
    "validate_job",
    "validate_job_update",
]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
_PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


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
