"""``ValidatePod``: the API server's checks on a defaulted Pod, every error collected.

A user fixes a manifest in one pass only if they see every problem at once, worded as a
cluster would word it (``pkg/apis/core/validation``). The order of checks follows upstream
(volumes, containers, init containers, ephemeral containers, then pod-level fields), so
error lists read like ``kubectl``'s. ConfigMaps, Secrets and Namespaces get the object-meta
and key checks the API server applies to them.

This module mirrors the object-level entries of ``pkg/apis/core/validation/validation.go``
(``ValidatePod``, ``ValidatePodSpec``, ``ValidatePodTemplateSpec``, ``ValidateConfigMap``,
``ValidateSecret``) and its pod-level fields (DNS config, host aliases). The parts of that
file they call live beside it: :mod:`~asynckubelet.manifests.volumes`,
:mod:`~asynckubelet.manifests.containers`, :mod:`~asynckubelet.manifests.probes` and
:mod:`~asynckubelet.manifests.securitycontext`; every object's metadata is
:mod:`~asynckubelet.manifests.objectmeta`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube.models.core_v1 import HostAlias, Pod, PodDNSConfig, PodSpec, PodTemplateSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests.containers import (
    _enum,
    _validate_containers,
    _validate_ephemeral_containers,
    _validate_init_containers,
)
from asynckubelet.manifests.messages import (
    DROPPED,
    duplicate,
    invalid,
    is_config_map_key,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_dns1123_subdomain_with_underscore,
    is_qualified_name,
    is_uuid,
    is_valid_ip,
    is_valid_label_value,
    range_error,
    required,
    too_long,
)
from asynckubelet.manifests.objectmeta import (
    _names,
    _validate_annotations,
    validate_labels,
    validate_object_meta,
)
from asynckubelet.manifests.podresources import validate_pod_resources
from asynckubelet.manifests.securitycontext import (
    _INT32_MAX,
    _validate_pod_security_context,
    _validate_unmasked_proc_mount,
)
from asynckubelet.manifests.volumes import _validate_volumes

__all__ = [
    "validate_configmap_data",
    "validate_pod",
    "validate_pod_template",
    "validate_secret_data",
]

RESTART_ALL_CONTAINERS = True
"""The ``RestartAllContainersOnContainerExits`` gate (alpha in 1.35, off by default in a
cluster). On here, since this node carries the action out (a restart in place keeping the
sandbox); while off, a ``RestartAllContainers`` rule is refused as such an API server
refuses it."""
_NOT_A_WORD = "must not contain whitespace or control characters"
_MAX_DNS_NAMESERVERS = 3
_MAX_DNS_SEARCH_PATHS = 32
_MAX_DNS_SEARCH_CHARS = 2048
_MAX_DATA_BYTES = 1024 * 1024


def validate_pod_template(
    template: PodTemplateSpec | None,
    path: str,
    *,
    restart_all_containers: bool = RESTART_ALL_CONTAINERS,
) -> list[FieldError]:
    """``ValidatePodTemplateSpec`` at ``path`` (``spec.template``): the template's labels
    and annotations, and its pod spec as ``ValidatePod`` checks a pod's."""
    if template is None:
        return [required(path)]
    meta = template.metadata or ObjectMeta()
    errs = validate_labels(meta.labels, f"{path}.metadata.labels")
    errs += _validate_annotations(meta.annotations, f"{path}.metadata.annotations")
    if template.spec is None:
        errs.append(required(f"{path}.spec.containers"))
        return errs
    for error in _validate_pod_spec(template.spec, restart_all=restart_all_containers):
        errs.append(_under(error, path))
    return errs


def _under(error: FieldError, path: str) -> FieldError:
    """A pod-spec error (``spec.…``) placed under a template at ``path``."""
    if error is DROPPED:
        return error
    return FieldError(f"{path}.{error.field}", error.reason, error.detail, source=error.source)


def validate_configmap_data(
    data: Mapping[str, Any] | None, binary_data: Mapping[str, Any] | None
) -> list[FieldError]:
    errs: list[FieldError] = []
    size = 0
    for key, value in (data or {}).items():
        _names(errs, f"data[{key}]", key, is_config_map_key(key))
        if binary_data and key in binary_data:
            errs.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        size += len(str(value))
    for key, value in (binary_data or {}).items():
        _names(errs, f"binaryData[{key}]", key, is_config_map_key(key))
        size += _decoded_size(str(value))
    if size > _MAX_DATA_BYTES:
        errs.append(too_long("", _MAX_DATA_BYTES))
    return errs


def _decoded_size(text: str) -> int:
    """Bytes a base64 ``binaryData`` value stands for (the API server counts those)."""
    text = text.strip()
    return len(text) * 3 // 4 - text[-2:].count("=")


_DOCKER_CONFIG_KEYS = {
    "kubernetes.io/dockercfg": ".dockercfg",
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
}
REDACTED = "<secret contents redacted>"


def validate_secret_type(secret_type: str | None, data: Mapping[str, bytes]) -> list[FieldError]:
    """``ValidateSecret``'s rules for the image pull types: the type's key is present and
    holds well-formed JSON (an object). The value is never shown."""
    key = _DOCKER_CONFIG_KEYS.get(secret_type or "")
    if key is None:
        return []
    if key not in data:
        return [required(f"data[{key}]")]
    try:
        parsed = json.loads(data[key].decode("utf-8"))
    except UnicodeDecodeError:
        return [invalid(f"data[{key}]", REDACTED, "invalid UTF-8 in JSON input")]
    except json.JSONDecodeError as e:
        return [invalid(f"data[{key}]", REDACTED, f"{e.msg} at line {e.lineno} column {e.colno}")]
    if not isinstance(parsed, dict):
        kind = "array" if isinstance(parsed, list) else type(parsed).__name__
        detail = f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
        return [invalid(f"data[{key}]", REDACTED, detail)]
    return []


def validate_secret_data(data: Mapping[str, bytes]) -> list[FieldError]:
    errs: list[FieldError] = []
    size = 0
    for key, value in data.items():
        _names(errs, f"data[{key}]", key, is_config_map_key(key))
        size += len(value)
    if size > _MAX_DATA_BYTES:
        errs.append(too_long("data", _MAX_DATA_BYTES))
    return errs


def validate_pod(
    pod: Pod, *, restart_all_containers: bool = RESTART_ALL_CONTAINERS
) -> list[FieldError]:
    """Every problem ``ValidatePod`` would report for this defaulted pod.

    ``restart_all_containers`` is the ``RestartAllContainersOnContainerExits`` gate.
    """
    errs = validate_object_meta(pod.metadata, namespaced=True)
    uid = pod.metadata.uid if pod.metadata is not None else None
    if uid is not None:
        _names(errs, "metadata.uid", uid, is_uuid(uid))
    spec = pod.spec
    if spec is None:
        errs.append(required("spec.containers"))
        return errs
    errs.extend(_validate_pod_spec(spec, restart_all=restart_all_containers))
    return errs


def _validate_pod_spec(spec: PodSpec, *, restart_all: bool) -> list[FieldError]:  # noqa: C901  (mirrors upstream ValidatePodSpec)
    errs: list[FieldError] = []
    grace = spec.terminationGracePeriodSeconds
    volumes = _validate_volumes(spec.volumes or [], errs)
    _validate_containers(spec, volumes, grace, errs, restart_all=restart_all)
    _validate_init_containers(spec, volumes, grace, errs, restart_all=restart_all)
    _validate_ephemeral_containers(spec, volumes, errs)
    _validate_unmasked_proc_mount(spec, errs)
    validate_pod_resources(spec, errs)
    if spec.hostNetwork:
        for ci, ctr in enumerate(spec.containers or []):
            for pi, port in enumerate(ctr.ports or []):
                if (port.hostPort or 0) != port.containerPort:
                    errs.append(
                        invalid(
                            f"spec.containers[{ci}].ports[{pi}].hostPort",
                            port.hostPort or 0,
                            "must match `containerPort` when `hostNetwork` is true",
                        )
                    )
    _enum(errs, "spec.restartPolicy", spec.restartPolicy, ("Always", "OnFailure", "Never"))
    _enum(
        errs,
        "spec.dnsPolicy",
        spec.dnsPolicy,
        ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
    )
    for key, value in (spec.nodeSelector or {}).items():
        _names(errs, "spec.nodeSelector", key, is_qualified_name(key))
        _names(errs, "spec.nodeSelector", str(value), is_valid_label_value(str(value)))
    _validate_pod_security_context(spec, errs)
    _validate_pod_dns_config(spec.dnsConfig, spec.dnsPolicy, errs)
    if spec.hostAliases:
        _validate_host_aliases(spec.hostAliases, errs)
    seen_gates: set[str] = set()
    for i, gate in enumerate(spec.schedulingGates or []):
        _names(errs, f"spec.schedulingGates[{i}]", gate.name, is_qualified_name(gate.name))
        if gate.name in seen_gates:
            errs.append(duplicate(f"spec.schedulingGates[{i}]", gate.name))
        seen_gates.add(gate.name)
    for field in ("serviceAccountName", "nodeName", "priorityClassName"):
        value = getattr(spec, field)
        if value:
            _names(errs, f"spec.{field}", value, is_dns1123_subdomain(value))
    deadline = spec.activeDeadlineSeconds
    if deadline is not None and not 1 <= deadline <= _INT32_MAX:
        errs.append(invalid("spec.activeDeadlineSeconds", deadline, range_error(1, _INT32_MAX)))
    for field in ("hostname", "subdomain"):
        value = getattr(spec, field)
        if value:
            _names(errs, f"spec.{field}", value, is_dns1123_label(value))
    return errs


def _validate_pod_dns_config(  # noqa: C901  (mirrors upstream validatePodDNSConfig)
    config: PodDNSConfig | None, policy: str | None, errs: list[FieldError]
) -> None:
    """``validatePodDNSConfig`` (with ``RelaxedDNSSearchValidation``); options must also be
    single words, since each becomes one word of the resolv.conf ``options`` line."""
    path = "spec.dnsConfig"
    if policy == "None":
        if config is None:
            errs.append(required(path, "must provide `dnsConfig` when `dnsPolicy` is None"))
            return
        if not config.nameservers:
            errs.append(
                required(
                    f"{path}.nameservers",
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            )
            return
    if config is None:
        return
    servers = config.nameservers or []
    if len(servers) > _MAX_DNS_NAMESERVERS:
        errs.append(
            invalid(
                f"{path}.nameservers",
                servers,
                f"must not have more than {_MAX_DNS_NAMESERVERS} nameservers",
            )
        )
    for i, server in enumerate(servers):
        _names(errs, f"{path}.nameservers[{i}]", server, is_valid_ip(server))
    searches = config.searches or []
    if len(searches) > _MAX_DNS_SEARCH_PATHS:
        errs.append(
            invalid(
                f"{path}.searches",
                searches,
                f"must not have more than {_MAX_DNS_SEARCH_PATHS} search paths",
            )
        )
    if len(" ".join(searches)) > _MAX_DNS_SEARCH_CHARS:
        errs.append(
            invalid(
                f"{path}.searches",
                searches,
                f"must not have more than {_MAX_DNS_SEARCH_CHARS} characters (including "
                "spaces) in the search list",
            )
        )
    for i, search in enumerate(searches):
        if search != ".":
            search = search.removesuffix(".")
            _names(
                errs,
                f"{path}.searches[{i}]",
                search,
                is_dns1123_subdomain_with_underscore(search),
            )
    for i, option in enumerate(config.options or []):
        opath = f"{path}.options[{i}]"
        if not option.name:
            errs.append(required(opath, "must not be empty"))
        for field in ("name", "value"):
            word = getattr(option, field)
            if word and not _is_word(word):
                errs.append(invalid(f"{opath}.{field}", word, _NOT_A_WORD))


def _is_word(text: str) -> bool:
    return text.isprintable() and not any(ch.isspace() for ch in text)


def _validate_host_aliases(aliases: Sequence[HostAlias], errs: list[FieldError]) -> None:
    """``ValidateHostAliases``: each line of the pod's /etc/hosts is an IP and DNS names."""
    for i, alias in enumerate(aliases):
        path = f"spec.hostAliases[{i}]"
        ip = alias.ip or ""
        _names(errs, f"{path}.ip", ip, is_valid_ip(ip))
        for j, hostname in enumerate(alias.hostnames or []):
            _names(errs, f"{path}.hostnames[{j}]", hostname, is_dns1123_subdomain(hostname))
