"""A container's environment and command line, as the kubelet builds them.

``envFrom`` sources come first, then ``env`` entries in order; each ``value`` is expanded
against the variables defined before it and the Service variables; then come the Service
variables the container does not define itself (``enableServiceLinks``, read when the
container is made); ``command`` and ``args`` are expanded against the final environment.
A missing ConfigMap, Secret or key that is not optional is a
``CreateContainerConfigError`` with the kubelet's message.
"""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asynckubelet import errors
from asynckubelet.runtime.expansion import expand
from asynckubelet.runtime.resources import resource_field_value

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


@dataclass(frozen=True)
class PodContext:
    """What the environment may refer to beyond the pod spec itself."""

    node_name: str = ""
    host_ip: str = ""
    pod_ips: tuple[str, ...] = ()
    configmaps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """ConfigMaps of the pod's namespace: name -> data."""
    binary_configmaps: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)
    """The same ConfigMaps' ``binaryData``, decoded: volumes only, as in the kubelet."""
    secrets: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict, repr=False)
    """Secrets of the pod's namespace: name -> decoded data (never in a ``repr``)."""
    service_env: Callable[[], Mapping[str, str]] | None = None
    """The pod's Service variables (:func:`service_environment`) as they are when a
    container is made; None: the node knows no Services."""


MASTER_NAMESPACE = "default"
MASTER_SERVICES = frozenset({"kubernetes"})
"""The API server's own Service, whose variables every pod gets (the kubelet's
``masterServices`` of ``masterServiceNamespace``), ``enableServiceLinks`` or not."""


def service_environment(
    services: Iterable[Mapping[str, Any]], *, namespace: str, enable_links: bool
) -> dict[str, str]:
    """The kubelet's Service variables for a pod of ``namespace`` (its
    ``getServiceEnvVarMap``): the API server's own Service, and with ``enable_links`` every
    Service of the pod's namespace that has a cluster IP, as ``NAME_SERVICE_HOST``,
    ``NAME_SERVICE_PORT`` (the first port), ``NAME_SERVICE_PORT_<PORT NAME>`` and Docker's
    link variables (``NAME_PORT``, ``NAME_PORT_<port>_<PROTO>`` and its ``_PROTO``,
    ``_PORT``, ``_ADDR``). ``services`` are Service bodies of every namespace."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for body in services:
        meta, spec = body.get("metadata") or {}, body.get("spec") or {}
        name, ns = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
        if not _has_cluster_ip(spec) or not spec.get("ports"):
            continue
        if ns == MASTER_NAMESPACE and name in MASTER_SERVICES:
            chosen.setdefault(name, spec)
        elif ns == namespace and enable_links:
            chosen[name] = spec
    env: dict[str, str] = {}
    for name, spec in sorted(chosen.items()):
        env.update(_service_variables(name, spec))
    return env


def _has_cluster_ip(spec: Mapping[str, Any]) -> bool:
    ip = spec.get("clusterIP")
    return bool(ip) and ip != "None"


def _variable_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _service_variables(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    prefix, ip = _variable_name(name), str(spec["clusterIP"])
    ports = list(spec["ports"])
    env = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0].get("port"))}
    for port in ports:
        if port.get("name"):
            env[f"{prefix}_SERVICE_PORT_{_variable_name(str(port['name']))}"] = str(port["port"])
    host = f"[{ip}]" if ":" in ip else ip
    for i, port in enumerate(ports):
        proto = str(port.get("protocol") or "TCP")
        url = f"{proto.lower()}://{host}:{port.get('port')}"
        if i == 0:
            env[f"{prefix}_PORT"] = url
        each = f"{prefix}_PORT_{port.get('port')}_{proto.upper()}"
        env[each] = url
        env[f"{each}_PROTO"] = proto.lower()
        env[f"{each}_PORT"] = str(port.get("port"))
        env[f"{each}_ADDR"] = ip
    return env


@dataclass(frozen=True)
class Environment:
    env: tuple[tuple[str, str], ...] = field(repr=False)
    """The container's variables, Secret values among them (never in a ``repr``)."""
    command: list[str] | None
    args: list[str] | None
    skipped: tuple[str, ...] = ()
    """envFrom keys dropped because they are not valid variable names (kubelet: an event)."""


def _field_value(pod: Any, path: str, ctx: PodContext) -> str:
    meta = pod.metadata
    simple = {
        "metadata.name": meta.name or "",
        "metadata.namespace": meta.namespace or "",
        "metadata.uid": meta.uid or "",
        "spec.nodeName": pod.spec.nodeName or ctx.node_name,
        "spec.serviceAccountName": pod.spec.serviceAccountName or "",
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
        "status.podIP": ctx.pod_ips[0] if ctx.pod_ips else "",
        "status.podIPs": ",".join(ctx.pod_ips),
    }
    if path in simple:
        return simple[path]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        source = (meta.labels if match.group(1) == "labels" else meta.annotations) or {}
        return str(source.get(match.group(2), ""))
    raise errors.ContainerConfigError(f"unsupported fieldRef fieldPath: {path!r}")


def _lookup_ref(kind: str, ref: Any, ns: str, ctx: PodContext) -> str | None:
    store: Mapping[str, Mapping[str, str | bytes]]
    store = ctx.configmaps if kind == "ConfigMap" else ctx.secrets
    optional = bool(ref.optional)
    obj = store.get(ref.name)
    if obj is None:
        if optional:
            return None
        raise errors.ContainerConfigError(f'{kind.lower()} "{ref.name}" not found')
    if ref.key not in obj:
        if optional:
            return None
        raise errors.ContainerConfigError(f"couldn't find key {ref.key} in {kind} {ns}/{ref.name}")
    value = obj[ref.key]
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def make_environment(pod: Any, container: Any, ctx: PodContext) -> Environment:  # noqa: C901  (mirrors upstream makeEnvironmentVariables)
    """Resolve ``envFrom``, ``env``, ``command`` and ``args`` of ``container``."""
    ns = pod.metadata.namespace or "default"
    env: dict[str, str] = {}
    skipped: list[str] = []
    services = dict(ctx.service_env()) if ctx.service_env is not None else {}
    known = ChainMap(env, services)
    for source in container.envFrom or []:
        prefix = source.prefix or ""
        store: Mapping[str, Mapping[str, str | bytes]]
        if source.configMapRef is not None:
            kind, ref, store = "ConfigMap", source.configMapRef, ctx.configmaps
        elif source.secretRef is not None:
            kind, ref, store = "Secret", source.secretRef, ctx.secrets
        else:
            continue
        data = store.get(ref.name)
        if data is None:
            if ref.optional:
                continue
            raise errors.ContainerConfigError(f'{kind.lower()} "{ref.name}" not found')
        for key, raw in data.items():
            name = prefix + key
            if not _ENV_NAME.match(name):
                skipped.append(name)
                continue
            env[name] = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    for var in container.env or []:
        if var.valueFrom is None:
            env[var.name] = expand(var.value or "", known)
            continue
        source = var.valueFrom
        value: str | None
        if source.fieldRef is not None:
            value = _field_value(pod, source.fieldRef.fieldPath, ctx)
        elif source.configMapKeyRef is not None:
            value = _lookup_ref("ConfigMap", source.configMapKeyRef, ns, ctx)
        elif source.secretKeyRef is not None:
            value = _lookup_ref("Secret", source.secretKeyRef, ns, ctx)
        elif source.resourceFieldRef is not None:
            value = _resource_value(container, source.resourceFieldRef)
        else:
            value = None
        if value is not None:
            env[var.name] = value
    for name, value in services.items():
        env.setdefault(name, value)
    command = [expand(c, env) for c in container.command] if container.command else None
    args = [expand(a, env) for a in container.args] if container.args else None
    return Environment(env=tuple(env.items()), command=command, args=args, skipped=tuple(skipped))


def _resource_value(container: Any, ref: Any) -> str:
    return resource_field_value(container, ref.resource, ref.divisor)
