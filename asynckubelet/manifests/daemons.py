"""The API server's defaulting and validation of DaemonSets (``apps/v1``) and CronJobs
(``batch/v1``).

Mirrors ``SetDefaults_DaemonSet`` and ``SetDefaults_CronJob``, ``ValidateDaemonSet`` and
``ValidateCronJobCreate`` (``pkg/apis/apps/validation``, ``pkg/apis/batch/validation``):
a DaemonSet's selector must select its template, whose pods restart ``Always``; a
CronJob's schedule must parse as cron (:mod:`~asynckubelet.manifests.cron`), its
``timeZone`` must be an IANA zone (never ``Local``, never ``TZ=`` in the schedule), and
its Job template is checked as a Job's spec is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lightkube.models.apps_v1 import DaemonSet
from lightkube.models.batch_v1 import CronJob, Job

from asynckubelet.errors import FieldError
from asynckubelet.manifests import jobs
from asynckubelet.manifests.cron import ScheduleError, parse_schedule
from asynckubelet.manifests.messages import GoValue, invalid, not_supported, required
from asynckubelet.manifests.objectmeta import validate_object_meta
from asynckubelet.manifests.selectors import go_label_selector
from asynckubelet.manifests.workloads import (
    _given,
    _immutable,
    _int_or_percent,
    _namespace,
    _nonnegative,
    _not_over_100,
    _selected_template,
    _template,
    _value_of,
)

__all__ = [
    "default_cronjob",
    "default_daemonset",
    "validate_cronjob",
    "validate_cronjob_update",
    "validate_daemonset",
    "validate_daemonset_update",
]

CRONJOB_NAME_MAX = 52
"""A CronJob's name leaves room for the ``-<minutes>`` of its Jobs' names."""
_ZONE_PART = re.compile(r"^[A-Za-z\.\-_0-9+]{1,14}$")


def default_daemonset(doc: dict[str, Any]) -> None:
    """``SetDefaults_DaemonSet``."""
    _namespace(doc)
    spec = doc.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(spec)


def validate_daemonset(obj: DaemonSet, *, absent: frozenset[str] = frozenset()) -> list[FieldError]:
    """``ValidateDaemonSet``."""
    errs = validate_object_meta(obj.metadata, namespaced=True, label_name=True)
    spec = obj.spec
    if spec is None:
        return [*errs, required("spec.selector")]
    selector = _given(spec.selector, absent)
    _selected_template(errs, selector, spec.template, "spec", workload="daemonset")
    _nonnegative(errs, "spec.minReadySeconds", spec.minReadySeconds)
    _nonnegative(errs, "spec.revisionHistoryLimit", spec.revisionHistoryLimit)
    strategy = spec.updateStrategy
    kind = strategy.type if strategy is not None else None
    if not kind:
        errs.append(required("spec.updateStrategy.type"))
    elif kind not in ("RollingUpdate", "OnDelete"):
        errs.append(not_supported("spec.updateStrategy.type", kind, ("OnDelete", "RollingUpdate")))
    elif kind == "RollingUpdate":
        rolling = strategy.rollingUpdate if strategy is not None else None
        if rolling is None:
            errs.append(required("spec.updateStrategy.rollingUpdate"))
        else:
            path = "spec.updateStrategy.rollingUpdate"
            unavailable, surge = rolling.maxUnavailable, rolling.maxSurge
            _int_or_percent(errs, f"{path}.maxUnavailable", unavailable)
            _not_over_100(errs, f"{path}.maxUnavailable", unavailable)
            _int_or_percent(errs, f"{path}.maxSurge", surge)
            _not_over_100(errs, f"{path}.maxSurge", surge)
            if _value_of(unavailable) == 0 and _value_of(surge) == 0:
                errs.append(
                    invalid(
                        f"{path}.maxUnavailable",
                        unavailable,
                        "may not be 0 when `maxSurge` is 0",
                    )
                )
            if _value_of(unavailable) != 0 and _value_of(surge) != 0:
                errs.append(
                    invalid(
                        f"{path}.maxSurge",
                        surge,
                        "may not be set when maxUnavailable is non-zero",
                    )
                )
    return errs


def validate_daemonset_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateDaemonSetSpecUpdate``: the selector may not change."""
    errs: list[FieldError] = []
    selector = (new.get("spec") or {}).get("selector")
    _immutable(errs, "spec.selector", selector, (old.get("spec") or {}).get("selector"))
    return errs


def default_cronjob(doc: dict[str, Any]) -> None:
    """``SetDefaults_CronJob``, and the pod template's defaults."""
    _namespace(doc)
    spec = doc.setdefault("spec", {})
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    template = spec.get("jobTemplate")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        _template(template["spec"])


def _time_zone(errs: list[FieldError], zone: str | None) -> None:
    """``validateTimeZone``."""
    if zone is None:
        return
    path = "spec.timeZone"
    if not zone:
        errs.append(invalid(path, zone, "timeZone must be nil or non-empty string"))
        return
    for part in zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.match(part):
            errs.append(invalid(path, zone, "unknown time zone " + zone))
            return
    if zone.lower() == "local":
        errs.append(
            invalid(
                path,
                zone,
                "timeZone must be an explicit time zone as defined in "
                "https://www.iana.org/time-zones",
            )
        )
        return
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        errs.append(invalid(path, zone, "unknown time zone " + zone))


def validate_cronjob(obj: CronJob, *, absent: frozenset[str] = frozenset()) -> list[FieldError]:
    """``ValidateCronJobCreate``."""
    errs = validate_object_meta(obj.metadata, namespaced=True)
    name = obj.metadata.name if obj.metadata is not None else None
    if name and len(name) > CRONJOB_NAME_MAX:
        errs.append(
            invalid("metadata.name", name, f"must be no more than {CRONJOB_NAME_MAX} characters")
        )
    spec = obj.spec
    if spec is None:
        return [*errs, required("spec.schedule")]
    if not spec.schedule:
        errs.append(required("spec.schedule"))
    elif "TZ" in spec.schedule:
        errs.append(
            invalid(
                "spec.schedule",
                spec.schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            )
        )
    else:
        try:
            parse_schedule(spec.schedule)
        except ScheduleError as exc:
            errs.append(invalid("spec.schedule", spec.schedule, str(exc)))
    _time_zone(errs, spec.timeZone)
    _nonnegative(errs, "spec.startingDeadlineSeconds", spec.startingDeadlineSeconds)
    _nonnegative(errs, "spec.successfulJobsHistoryLimit", spec.successfulJobsHistoryLimit)
    _nonnegative(errs, "spec.failedJobsHistoryLimit", spec.failedJobsHistoryLimit)
    policy = spec.concurrencyPolicy
    if not policy:
        errs.append(required("spec.concurrencyPolicy"))
    elif policy not in ("Allow", "Forbid", "Replace"):
        errs.append(not_supported("spec.concurrencyPolicy", policy, ("Allow", "Forbid", "Replace")))
    errs.extend(_job_template(obj))
    return errs


def _job_template(obj: CronJob) -> list[FieldError]:
    """``ValidateJobTemplateSpec``: the Job template's spec, checked as a Job made of it
    would be; its selector is always generated, so one given is refused."""
    template = obj.spec.jobTemplate if obj.spec is not None else None
    template_spec = template.spec if template is not None else None
    if template_spec is None:
        return [required("spec.jobTemplate.spec.template")]
    errs: list[FieldError] = []
    if template_spec.selector is not None:
        errs.append(
            invalid(
                "spec.jobTemplate.spec.selector",
                go_label_selector(template_spec.selector.to_dict()),
                "`selector` will be auto-generated",
            )
        )
    if template_spec.manualSelector:
        errs.append(
            not_supported("spec.jobTemplate.spec.manualSelector", GoValue("true"), ("nil", "false"))
        )
    if errs:
        return errs
    meta = obj.metadata
    job = cast(
        Job,
        Job.from_dict(
            {
                "metadata": {
                    "name": (meta.name if meta is not None else None) or "cronjob",
                    "namespace": (meta.namespace if meta is not None else None) or "default",
                },
                "spec": template_spec.to_dict(),
            },
        ),
    )
    found = jobs.validate_job(job)
    return [
        e._replace(field=e.field.replace("spec.", "spec.jobTemplate.spec.", 1))
        for e in found
        if e.field.startswith("spec.")
    ]


def validate_cronjob_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateCronJobUpdate``'s spec checks: a Job template's selector is immutable."""
    errs: list[FieldError] = []
    new_selector = (((new.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get(
        "selector"
    )
    old_selector = (((old.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get(
        "selector"
    )
    _immutable(errs, "spec.jobTemplate.spec.selector", new_selector, old_selector)
    return errs
