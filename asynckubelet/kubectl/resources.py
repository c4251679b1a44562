"""kubectl's names for the kinds the node keeps, without loading any model.

``asynckubelet get`` through the daemon is served before the command-line framework or
the Kubernetes models load (:mod:`asynckubelet.cli.commands.get_args`), and the daemon's
client builds its paths from these names, so the names live here in plain Python. They are
the same as :mod:`asynckubelet.manifests.kinds` (a unit test keeps the two equal).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    class _Resource(NamedTuple):
        kind: str
        plural: str
        singular: str
        group: str = ""
        short_names: tuple[str, ...] = ()
        namespaced: bool = True
else:
    # A named tuple without ``typing`` (as :class:`asynckubelet.errors.FieldError`).
    import collections

    _Resource = collections.namedtuple(
        "_Resource",
        ["kind", "plural", "singular", "group", "short_names", "namespaced"],
        defaults=["", (), True],
    )

__all__ = ["RESOURCES", "Resource", "by_plural", "lookup"]


class Resource(_Resource):
    """A kind as kubectl names it: ``kind``, ``plural``, ``singular``, ``group`` (''
    for the core group), ``short_names``, ``namespaced`` (a named tuple: no
    ``dataclasses`` for ``get``)."""

    __slots__ = ()

    @property
    def api_prefix(self) -> str:
        """``/api/v1`` for the core group, ``/apis/<group>/v1`` for the others."""
        return f"/apis/{self.group}/v1" if self.group else "/api/v1"

    @property
    def qualified(self) -> str:
        """``deployment.apps`` (``pod`` for the core group), as ``-o name`` prints it."""
        return f"{self.singular}.{self.group}" if self.group else self.singular

    @property
    def qualified_plural(self) -> str:
        """``deployments.apps``, as kubectl's ``NotFound`` names it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES = (
    Resource("Pod", "pods", "pod", short_names=("po",)),
    Resource("Service", "services", "service", short_names=("svc",)),
    Resource("ConfigMap", "configmaps", "configmap", short_names=("cm",)),
    Resource("Secret", "secrets", "secret"),
    Resource("Namespace", "namespaces", "namespace", short_names=("ns",), namespaced=False),
    Resource("ServiceAccount", "serviceaccounts", "serviceaccount", short_names=("sa",)),
    Resource("Deployment", "deployments", "deployment", "apps", ("deploy",)),
    Resource("ReplicaSet", "replicasets", "replicaset", "apps", ("rs",)),
    Resource("StatefulSet", "statefulsets", "statefulset", "apps", ("sts",)),
    Resource("Job", "jobs", "job", "batch"),
    Resource("DaemonSet", "daemonsets", "daemonset", "apps", ("ds",)),
    Resource("CronJob", "cronjobs", "cronjob", "batch", ("cj",)),
    Resource("ControllerRevision", "controllerrevisions", "controllerrevision", "apps"),
)
_BY_PLURAL = {r.plural: r for r in RESOURCES}


def by_plural(plural: str) -> Resource | None:
    return _BY_PLURAL.get(plural)


def lookup(name: str) -> Resource | None:
    """The resource a kubectl name means: plural, singular, short name or kind,
    optionally ``.group``-qualified (``deploy``, ``deployments.apps``)."""
    base, _, group = name.lower().partition(".")
    for r in RESOURCES:
        if group and group != r.group:
            continue
        if base in (r.plural, r.singular, r.kind.lower(), *r.short_names):
            return r
    return None
