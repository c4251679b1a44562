"""The API server's defaulting of a Pod (``SetDefaults_Pod`` and the defaulters it calls).

A manifest means what it would mean on a cluster only once these defaults are filled in:
``kubectl get pod -o yaml`` shows them, the kubelet's decisions depend on them (restart
policy, pull policy, probe periods, grace period) and the container spec hash covers them.
Defaulting runs on the decoded document, after the strict check, before the typed Pod is
built; values a user wrote are never replaced, except a negative grace period, which the
API server turns into 1 second.
"""

from __future__ import annotations

from typing import Any

from asynckubelet.manifests.podresources import default_pod_requests
from asynckubelet.manifests.resizepolicy import default_resize_policy

__all__ = [
    "default_configmap",
    "default_pod",
    "default_pod_spec",
    "default_pod_template",
    "default_secret",
    "image_pull_policy",
]

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HOOKS = ("postStart", "preStop")
_MODE_VOLUMES = ("secret", "configMap", "downwardAPI", "projected")
_DEFAULT_MODE = 0o644


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or an untagged, undigested image, else ``IfNotPresent``."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    if not image:
        return "IfNotPresent"
    if tag == "latest" or (not tag and not digest):
        return "Always"
    return "IfNotPresent"


def default_pod(doc: dict[str, Any]) -> None:
    """Fill the API server's defaults into a strict-checked Pod document, in place."""
    _default_namespace(doc)
    default_pod_spec(doc.setdefault("spec", {}))


def default_pod_template(template: dict[str, Any]) -> None:
    """``SetDefaults_PodTemplateSpec``: a workload's pod template gets the defaults of the
    pods it makes (``spec.template`` of a Deployment, Job or StatefulSet), in place."""
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    if isinstance(spec, dict):
        default_pod_spec(spec)


def default_pod_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_PodSpec`` and the container, probe and volume defaults under it."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    grace = spec.setdefault("terminationGracePeriodSeconds", 30)
    if grace < 0:
        spec["terminationGracePeriodSeconds"] = 1
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    host_network = spec.get("hostNetwork") is True
    for key in ("initContainers", "containers"):
        for ctr in spec.get(key) or ():
            _default_container(ctr, host_network=host_network)
            _default_requests_from_limits(ctr)
            if key == "containers":
                default_resize_policy(ctr)
    default_pod_requests(spec)
    for ctr in spec.get("ephemeralContainers") or ():
        _default_container(ctr, host_network=False)
    for volume in spec.get("volumes") or ():
        _default_volume(volume)


def _default_container(ctr: dict[str, Any], *, host_network: bool) -> None:  # noqa: C901  (mirrors upstream SetDefaults_Container)
    if not ctr.get("imagePullPolicy"):
        ctr["imagePullPolicy"] = image_pull_policy(ctr.get("image") or "")
    if not ctr.get("terminationMessagePath"):
        ctr["terminationMessagePath"] = "/dev/termination-log"
    if not ctr.get("terminationMessagePolicy"):
        ctr["terminationMessagePolicy"] = "File"
    for port in ctr.get("ports") or ():
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if host_network and not port.get("hostPort"):
            port["hostPort"] = port.get("containerPort", 0)
    for key in _PROBES:
        probe = ctr.get(key)
        if probe is not None:
            _default_probe(probe)
    lifecycle = ctr.get("lifecycle")
    if lifecycle:
        for key in _HOOKS:
            hook = lifecycle.get(key)
            if hook and hook.get("httpGet") is not None:
                _default_http_get(hook["httpGet"])
    for env in ctr.get("env") or ():
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"


def _default_requests_from_limits(ctr: dict[str, Any]) -> None:
    resources = ctr.get("resources")
    if not resources or not resources.get("limits"):
        return
    requests = resources.setdefault("requests", {})
    for name, limit in resources["limits"].items():
        requests.setdefault(name, limit)


def _default_probe(probe: dict[str, Any]) -> None:
    if not probe.get("timeoutSeconds"):
        probe["timeoutSeconds"] = 1
    if not probe.get("periodSeconds"):
        probe["periodSeconds"] = 10
    if not probe.get("successThreshold"):
        probe["successThreshold"] = 1
    if not probe.get("failureThreshold"):
        probe["failureThreshold"] = 3
    if probe.get("httpGet") is not None:
        _default_http_get(probe["httpGet"])


def _default_http_get(action: dict[str, Any]) -> None:
    if not action.get("path"):
        action["path"] = "/"
    if not action.get("scheme"):
        action["scheme"] = "HTTP"


def _default_volume(volume: dict[str, Any]) -> None:
    if all(key == "name" for key in volume):
        volume["emptyDir"] = {}
        return
    for key in _MODE_VOLUMES:
        source = volume.get(key)
        if source is not None and source.get("defaultMode") is None:
            source["defaultMode"] = _DEFAULT_MODE
    host_path = volume.get("hostPath")
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    projected = volume.get("projected")
    for item in (projected or {}).get("sources") or ():
        token = item.get("serviceAccountToken")
        if token is not None and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
        for item_ref in (item.get("downwardAPI") or {}).get("items") or ():
            _default_field_ref(item_ref)
    for item_ref in (volume.get("downwardAPI") or {}).get("items") or ():
        _default_field_ref(item_ref)


def _default_field_ref(item: dict[str, Any]) -> None:
    field_ref = item.get("fieldRef")
    if field_ref is not None and not field_ref.get("apiVersion"):
        field_ref["apiVersion"] = "v1"


def _default_namespace(doc: dict[str, Any]) -> None:
    meta = doc.setdefault("metadata", {})
    if not meta.get("namespace"):
        meta["namespace"] = "default"


def default_configmap(doc: dict[str, Any]) -> None:
    _default_namespace(doc)


def default_secret(doc: dict[str, Any]) -> None:
    _default_namespace(doc)
    if not doc.get("type"):
        doc["type"] = "Opaque"
