"""Discovery, as kubectl asks for it: what the node's Kubernetes API serves.

A client learns the API's resources before its first request: kubectl 1.30+ asks ``/api``
and ``/apis`` for the aggregated form (``apidiscovery.k8s.io/v2``
``APIGroupDiscoveryList``, two requests for everything) and falls back to the legacy form
(``APIVersions``, ``APIGroupList``, then one ``APIResourceList`` per group version) when a
server answers plain JSON. Both are answered here, from one table, :data:`SERVED`: the
kinds the node keeps, with the verbs it serves for them today, so ``kubectl
api-resources`` and ``kubectl get <short name>`` work and a client never tries a verb the
node would refuse.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from asynckubelet._version import __version__
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.node.locate import API_GROUP

KUBERNETES_VERSION = (1, 33, 0)
"""The Kubernetes release whose API the node speaks (its probes' ``kube-probe/1.33``)."""
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
"""The content type of aggregated discovery, as the API server sends it."""
READ = ("get", "list")
WATCH = ("get", "list", "watch")
METRICS = "metrics.k8s.io"


@dataclass(frozen=True)
class Served:
    """A resource as discovery lists it."""

    name: str
    singular: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    verbs: tuple[str, ...] = WATCH
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """``(name, kind, verbs)`` of each subresource."""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


SERVED: tuple[Served, ...] = (
    Served("configmaps", "configmap", "ConfigMap", short_names=("cm",)),
    Served("endpoints", "endpoints", "Endpoints", short_names=("ep",)),
    Served("events", "event", "Event", short_names=("ev",)),
    Served("namespaces", "namespace", "Namespace", namespaced=False, short_names=("ns",)),
    Served(
        "nodes",
        "node",
        "Node",
        namespaced=False,
        short_names=("no",),
        subresources=(("status", "Node", ("get",)),),
    ),
    Served(
        "pods",
        "pod",
        "Pod",
        verbs=WATCH,
        short_names=("po",),
        categories=("all",),
        subresources=(
            ("ephemeralcontainers", "Pod", ("get", "patch", "update")),
            ("log", "Pod", ("get",)),
            ("resize", "Pod", ("get", "patch", "update")),
            ("status", "Pod", ("get", "patch", "update")),
        ),
    ),
    Served("secrets", "secret", "Secret"),
    Served(
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        short_names=("sa",),
        subresources=(("token", "TokenRequest", ("create",)),),
    ),
    Served("services", "service", "Service", short_names=("svc",), categories=("all",)),
    Served(
        "deployments",
        "deployment",
        "Deployment",
        "apps",
        short_names=("deploy",),
        categories=("all",),
    ),
    Served(
        "replicasets", "replicaset", "ReplicaSet", "apps", short_names=("rs",), categories=("all",)
    ),
    Served(
        "statefulsets",
        "statefulset",
        "StatefulSet",
        "apps",
        short_names=("sts",),
        categories=("all",),
    ),
    Served("events", "event", "Event", "events.k8s.io", short_names=("ev",)),
    Served("jobs", "job", "Job", "batch", categories=("all",)),
    Served("endpointslices", "endpointslice", "EndpointSlice", "discovery.k8s.io"),
    Served(
        "daemonsets", "daemonset", "DaemonSet", "apps", short_names=("ds",), categories=("all",)
    ),
    Served("cronjobs", "cronjob", "CronJob", "batch", short_names=("cj",), categories=("all",)),
    Served("controllerrevisions", "controllerrevision", "ControllerRevision", "apps"),
    Served("nodes", "", "NodeMetrics", METRICS, "v1beta1", namespaced=False, verbs=READ),
    Served("pods", "", "PodMetrics", METRICS, "v1beta1", verbs=READ),
)
"""Every resource served, the core group's first, then the groups' in :data:`GROUPS`."""
SUBRESOURCE_GROUPS = {"TokenRequest": ("authentication.k8s.io", "v1")}
"""The group and version of a subresource's kind that is not its resource's."""
WRITE = ("create", "delete", "deletecollection", "patch", "update")
WRITTEN = frozenset(kind_table.KINDS)
"""The kinds written through the node's admission (:mod:`~asynckubelet.api.kube.writes`)."""
SCALED = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})
CONTROLLED = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"})
"""The kinds whose ``status`` the node's controllers write: a client reads it (``get``)."""
SERVED = tuple(
    replace(
        s,
        verbs=(*s.verbs, *WRITE),
        subresources=(
            *s.subresources,
            *((("scale", "Scale", ("get", "patch", "update")),) if s.kind in SCALED else ()),
            *((("status", s.kind, ("get",)),) if s.kind in CONTROLLED else ()),
        ),
    )
    if s.kind in WRITTEN
    else s
    for s in SERVED
)
OWN: tuple[Served, ...] = (
    Served("applies", "apply", "Apply", API_GROUP, namespaced=False, verbs=("create",)),
    Served("restarts", "restart", "Restart", API_GROUP, namespaced=False, verbs=("create",)),
)
"""The node's own group: ``applies`` and ``restarts``, created as the API server's reviews
are (``TokenReview``, ``SelfSubjectAccessReview``): an ``Apply`` holds manifest files in
its ``spec`` and comes back with each object's verdict in its ``status``, all of them
applied or none (:func:`asynckubelet.api.apply.apply`); a ``Restart`` names a pod's
containers to restart in place (:func:`asynckubelet.api.restarts.restart`). Nothing is
kept: there is nothing to get, list or watch."""
GROUPS = ("apps", "events.k8s.io", "batch", "discovery.k8s.io", METRICS, API_GROUP)
"""The named groups, in the API server's order, the node's own last."""


def by_path(group_version: str, name: str) -> Served | None:
    """The resource ``name`` of ``group_version`` (``v1``, ``apps/v1``), if served."""
    for served in SERVED:
        if served.group_version == group_version and served.name == name:
            return served
    return None


def version_info() -> dict[str, str]:
    """``/version``: the release served, marked as this node's build."""
    major, minor, patch = KUBERNETES_VERSION
    machine = platform.machine()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.{patch}+asynckubelet.{__version__}",
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "",
        "platform": f"linux/{arch}",
    }


# -- legacy discovery -----------------------------------------------------------------------


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(group: str) -> dict[str, Any]:
    """``/apis/<group>``: one named group."""
    served = _version(group)
    version = {"groupVersion": f"{group}/{served}", "version": served}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [version],
        "preferredVersion": version,
    }


def api_group_list() -> dict[str, Any]:
    """``/apis``: the named groups."""
    groups = []
    for group in GROUPS:
        body = api_group(group)
        del body["kind"], body["apiVersion"]
        groups.append(body)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(group_version: str) -> dict[str, Any] | None:
    """``/api/v1``, ``/apis/<group>/v1``: the resources of one group version (None: not
    served)."""
    served = [s for s in (*SERVED, *OWN) if s.group_version == group_version]
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for s in served:
        resources.append(
            _drop_empty(
                {
                    "name": s.name,
                    "singularName": s.singular,
                    "namespaced": s.namespaced,
                    "kind": s.kind,
                    "verbs": list(s.verbs),
                    "shortNames": list(s.short_names),
                    "categories": list(s.categories),
                },
                keep=("verbs",),
            )
        )
        for sub, kind, verbs in s.subresources:
            entry: dict[str, Any] = {
                "name": f"{s.name}/{sub}",
                "singularName": "",
                "namespaced": s.namespaced,
            }
            if kind in SUBRESOURCE_GROUPS:
                entry["group"], entry["version"] = SUBRESOURCE_GROUPS[kind]
            resources.append({**entry, "kind": kind, "verbs": list(verbs)})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# -- aggregated discovery -------------------------------------------------------------------


def wants_aggregated(accept: str) -> bool:
    """Whether the ``Accept`` header takes aggregated discovery v2 (kubectl's first
    choice); the ``v2beta1`` form is not served, so a client asking only for it gets the
    legacy form, as from an older API server."""
    for offer in accept.split(","):
        params = {p.strip() for p in offer.split(";")[1:]}
        if {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"} <= params:
            return True
    return False


def aggregated(core: bool) -> dict[str, Any]:
    """``/api`` (``core``) or ``/apis`` as an ``APIGroupDiscoveryList``."""
    groups: Iterable[str] = ("",) if core else GROUPS
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [_group_discovery(group) for group in groups],
    }


def _group_discovery(group: str) -> dict[str, Any]:
    resources = []
    for s in (*SERVED, *OWN):
        if s.group != group:
            continue
        kind = {"group": group, "version": s.version, "kind": s.kind}
        resource: dict[str, Any] = {
            "resource": s.name,
            "responseKind": kind,
            "scope": "Namespaced" if s.namespaced else "Cluster",
            "singularResource": s.singular,
            "verbs": list(s.verbs),
            "shortNames": list(s.short_names),
            "categories": list(s.categories),
            "subresources": [
                {
                    "subresource": sub,
                    "responseKind": _sub_kind(group, s.version, sub_kind),
                    "verbs": list(verbs),
                }
                for sub, sub_kind, verbs in s.subresources
            ],
        }
        resources.append(_drop_empty(resource, keep=("verbs",)))
    metadata = {"name": group} if group else {}
    version = {"version": _version(group), "resources": resources, "freshness": "Current"}
    return {"metadata": {**metadata, "creationTimestamp": None}, "versions": [version]}


def _sub_kind(group: str, version: str, kind: str) -> dict[str, str]:
    group, version = SUBRESOURCE_GROUPS.get(kind, (group, version))
    return {"group": group, "version": version, "kind": kind}


def _version(group: str) -> str:
    """The one version served of ``group``."""
    return next((s.version for s in SERVED if s.group == group), "v1")


def _drop_empty(body: Mapping[str, Any], *, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """``body`` without its empty lists (the API server omits them), ``keep`` aside."""
    return {k: v for k, v in body.items() if k in keep or v != []}


__all__ = [
    "AGGREGATED",
    "CONTROLLED",
    "GROUPS",
    "KUBERNETES_VERSION",
    "METRICS",
    "OWN",
    "SERVED",
    "Served",
    "aggregated",
    "api_group",
    "api_group_list",
    "api_versions",
    "by_path",
    "resource_list",
    "version_info",
    "wants_aggregated",
]
