"""Every kind the node accepts, by ``(apiVersion, kind)``: its model, its names and the
API server's rules for it.

The loader, the node's object store, its local API and the command line all speak of
kinds through this table, so a kind added here (its defaulting, validation and names) is
loaded, stored, listed, printed by name and deleted like the others. The first five are
the core kinds with rules of their own in :mod:`asynckubelet.manifests.loader`; the
others are loaded generically: strict decode, :attr:`KindInfo.default`, the typed model,
:attr:`KindInfo.validate`, and, for kinds with a pod template, the template checked as
the pods it makes would be (unhonoured fields, Pod Security).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube.models.apps_v1 import (
    ControllerRevision,
    DaemonSet,
    Deployment,
    ReplicaSet,
    StatefulSet,
)
from lightkube.models.batch_v1 import CronJob, Job
from lightkube.models.core_v1 import (
    ConfigMap,
    Namespace,
    Pod,
    PodTemplateSpec,
    Secret,
    Service,
    ServiceAccount,
)

from asynckubelet.errors import FieldError
from asynckubelet.manifests import daemons, jobs, revisions, workloads
from asynckubelet.manifests.objectmeta import validate_object_meta

__all__ = [
    "CORE_KINDS",
    "KINDS",
    "LAST_APPLIED",
    "KindInfo",
    "api_versions",
    "info",
    "kind_of_resource",
    "pod_template",
]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""Where an object whose live form the node changes keeps the form it was applied in."""

Defaulter = Callable[[dict[str, Any]], None]
Validator = Callable[..., list[FieldError]]
UpdateValidator = Callable[[Mapping[str, Any], Mapping[str, Any]], list[FieldError]]
Preparer = Callable[..., None]


@dataclass(frozen=True)
class KindInfo:
    """One kind: what it is called and what the API server does with it."""

    kind: str
    api_version: str
    model: type
    resource: str
    """kubectl's singular resource name (``deployment``)."""
    plural: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = True
    default: Defaulter | None = None
    validate: Validator | None = None
    validate_update: UpdateValidator | None = None
    """Checks of an update against the stored object (immutable fields)."""
    prepare: Preparer | None = None
    """What the API server does to a stored object given its UID (``prepare(doc, uid=)``)."""
    controlled: bool = False
    """The node's controllers write to the live object (status, annotations): a verdict
    compares the applied form, kept in :data:`LAST_APPLIED`."""
    template_path: str | None = None
    """Where the pod template is (``spec.template``), for kinds that make pods."""
    nullable: tuple[str, ...] = ()
    """Fields the model requires that the API server reads as absent (a nil pointer) when
    a document leaves them out: the validator is told which were (``absent=``)."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """kubectl's ``resource.group`` (``deployment.apps``; ``pod`` for the core group)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


CORE_KINDS = ("Namespace", "ConfigMap", "Secret", "Pod", "Service")

_TABLE = (
    KindInfo("Namespace", "v1", Namespace, "namespace", "namespaces", ("ns",), namespaced=False),
    KindInfo("ConfigMap", "v1", ConfigMap, "configmap", "configmaps", ("cm",)),
    KindInfo("Secret", "v1", Secret, "secret", "secrets"),
    KindInfo("Pod", "v1", Pod, "pod", "pods", ("po",)),
    KindInfo("Service", "v1", Service, "service", "services", ("svc",)),
    KindInfo(
        "ServiceAccount",
        "v1",
        ServiceAccount,
        "serviceaccount",
        "serviceaccounts",
        ("sa",),
        default=workloads.default_namespace,
        validate=lambda obj, **_: validate_object_meta(obj.metadata, namespaced=True),
    ),
    KindInfo(
        "Deployment",
        "apps/v1",
        Deployment,
        "deployment",
        "deployments",
        ("deploy",),
        default=workloads.default_deployment,
        validate=workloads.validate_deployment,
        validate_update=workloads.validate_deployment_update,
        controlled=True,
        template_path="spec.template",
        nullable=("spec.selector",),
    ),
    KindInfo(
        "ReplicaSet",
        "apps/v1",
        ReplicaSet,
        "replicaset",
        "replicasets",
        ("rs",),
        default=workloads.default_replicaset,
        validate=workloads.validate_replicaset,
        validate_update=workloads.validate_replicaset_update,
        controlled=True,
        template_path="spec.template",
        nullable=("spec.selector",),
    ),
    KindInfo(
        "StatefulSet",
        "apps/v1",
        StatefulSet,
        "statefulset",
        "statefulsets",
        ("sts",),
        default=workloads.default_statefulset,
        validate=workloads.validate_statefulset,
        validate_update=workloads.validate_statefulset_update,
        controlled=True,
        template_path="spec.template",
        nullable=("spec.selector",),
    ),
    KindInfo(
        "Job",
        "batch/v1",
        Job,
        "job",
        "jobs",
        default=jobs.default_job,
        validate=jobs.validate_job,
        validate_update=jobs.validate_job_update,
        prepare=jobs.prepare_job,
        controlled=True,
        template_path="spec.template",
    ),
    KindInfo(
        "DaemonSet",
        "apps/v1",
        DaemonSet,
        "daemonset",
        "daemonsets",
        ("ds",),
        default=daemons.default_daemonset,
        validate=daemons.validate_daemonset,
        validate_update=daemons.validate_daemonset_update,
        controlled=True,
        template_path="spec.template",
        nullable=("spec.selector",),
    ),
    KindInfo(
        "CronJob",
        "batch/v1",
        CronJob,
        "cronjob",
        "cronjobs",
        ("cj",),
        default=daemons.default_cronjob,
        validate=daemons.validate_cronjob,
        validate_update=daemons.validate_cronjob_update,
        controlled=True,
        template_path="spec.jobTemplate.spec.template",
    ),
    KindInfo(
        "ControllerRevision",
        "apps/v1",
        ControllerRevision,
        "controllerrevision",
        "controllerrevisions",
        default=revisions.default_controllerrevision,
        validate=revisions.validate_controllerrevision,
        validate_update=revisions.validate_controllerrevision_update,
    ),
)

KINDS: dict[str, KindInfo] = {k.kind: k for k in _TABLE}
"""Every kind by name, in the order a restore applies them (Namespaces first)."""


def info(kind: str) -> KindInfo | None:
    return KINDS.get(kind)


def api_versions(kind: str) -> tuple[str, ...]:
    found = KINDS.get(kind)
    return (found.api_version,) if found is not None else ()


def kind_of_resource(name: str) -> str | None:
    """The kind a kubectl resource name means: plural, singular, short name or kind,
    optionally ``.group``-qualified (``deployments``, ``deploy``, ``deployment.apps``)."""
    base, _, group = name.lower().partition(".")
    for k in _TABLE:
        if group and group != k.group:
            continue
        if base in (k.plural, k.resource, k.kind.lower(), *k.short_names):
            return k.kind
    return None


def pod_template(obj: Any) -> PodTemplateSpec | None:
    """The pod template of a typed workload object (None for kinds without one)."""
    spec = getattr(obj, "spec", None)
    job_template = getattr(spec, "jobTemplate", None)
    if job_template is not None:
        spec = getattr(job_template, "spec", None)
    template = getattr(spec, "template", None)
    return template if isinstance(template, PodTemplateSpec) else None
