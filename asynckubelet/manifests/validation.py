"""``ValidatePod``: the API server's checks on a defaulted Pod, every error collected.

A user fixes a manifest in one pass only if they see every problem at once, worded as a
cluster would word it (``pkg/apis/core/validation``). The order of checks follows upstream
(volumes, containers, init containers, ephemeral containers, then pod-level fields), so
error lists read like ``kubectl``'s. ConfigMaps, Secrets and Namespaces get the object-meta
and key checks the API server applies to them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lightkube.models.core_v1 import (
    AppArmorProfile,
    Container,
    ContainerPort,
    DownwardAPIVolumeFile,
    EnvFromSource,
    EnvVar,
    EnvVarSource,
    EphemeralContainer,
    HostAlias,
    HTTPGetAction,
    KeyToPath,
    Lifecycle,
    LifecycleHandler,
    ObjectFieldSelector,
    Pod,
    PodDNSConfig,
    PodSpec,
    Probe,
    ResourceFieldSelector,
    ResourceRequirements,
    SeccompProfile,
    SecurityContext,
    ServiceAccountTokenProjection,
    Volume,
    VolumeMount,
    VolumeProjection,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    duplicate,
    forbidden,
    invalid,
    is_config_map_key,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_dns1123_subdomain_with_underscore,
    is_env_var_name,
    is_qualified_name,
    is_uuid,
    is_valid_ip,
    is_valid_label_value,
    is_valid_port_name,
    is_valid_port_num,
    not_found,
    not_supported,
    range_error,
    required,
    too_long,
)
from asynckubelet.manifests.quantity import (
    Quantity,
    QuantityError,
    parse_quantity,
)

__all__ = [
    "VOLUME_TYPES",
    "validate_configmap_data",
    "validate_object_meta",
    "validate_pod",
    "validate_secret_data",
]

AnyContainer = Container | EphemeralContainer

# validateVolumeSource's order, which decides which source "may not specify more than 1".
VOLUME_TYPES = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
)
_INT32_MAX = 2**31 - 1
_NEGATIVE = "must be greater than or equal to 0"
_INIT_ONLY_ALWAYS = "may not be set for init containers without restartPolicy=Always"
_EPHEMERAL_FORBIDDEN = "cannot be set for an Ephemeral Container"
_STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
_RESOURCE_FIELD_PATHS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_HOST_PATH_TYPES = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)
_FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
RESTART_ALL_CONTAINERS = True
"""The ``RestartAllContainersOnContainerExits`` gate (alpha in 1.35, off by default in a
cluster). On here, since this node carries the action out (a restart in place keeping the
sandbox); while off, a ``RestartAllContainers`` rule is refused as such an API server
refuses it."""
_CONTAINER_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_MAX_RESTART_RULES = 20
_MAX_RESTART_RULE_EXIT_CODES = 255
_BACKSTEPS = "must not contain '..'"
_NOT_A_WORD = "must not contain whitespace or control characters"
_CONTROL = "must not contain control characters"
_PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_MAX_APPARMOR_PROFILE = 4095
_MAX_DNS_NAMESERVERS = 3
_MAX_DNS_SEARCH_PATHS = 32
_MAX_DNS_SEARCH_CHARS = 2048
_MAX_DATA_BYTES = 1024 * 1024
_MAX_ANNOTATION_BYTES = 256 * 1024


def _names(errs: list[FieldError], path: str, value: str, msgs: Iterable[str]) -> None:
    errs.extend(invalid(path, value, m) for m in msgs)


def validate_object_meta(
    meta: ObjectMeta | None, *, namespaced: bool, label_name: bool = False
) -> list[FieldError]:
    """``ValidateObjectMeta``: name, namespace, labels and annotations."""
    errs: list[FieldError] = []
    meta = meta or ObjectMeta()
    if not meta.name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        check = is_dns1123_label if label_name else is_dns1123_subdomain
        _names(errs, "metadata.name", meta.name, check(meta.name))
    if namespaced and meta.namespace:
        _names(errs, "metadata.namespace", meta.namespace, is_dns1123_label(meta.namespace))
    for key, value in (meta.labels or {}).items():
        _names(errs, "metadata.labels", key, is_qualified_name(key))
        if not isinstance(value, str):
            errs.append(invalid(f"metadata.labels[{key}]", value, "must be a string"))
        else:
            _names(errs, "metadata.labels", value, is_valid_label_value(value))
    annotations = meta.annotations or {}
    size = 0
    for key, value in annotations.items():
        _names(errs, "metadata.annotations", key, is_qualified_name(key.lower()))
        size += len(key) + len(str(value))
    if size > _MAX_ANNOTATION_BYTES:
        errs.append(too_long("metadata.annotations", _MAX_ANNOTATION_BYTES))
    return errs


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


def _enum(errs: list[FieldError], path: str, value: str | None, allowed: Sequence[str]) -> None:
    if not value:
        errs.append(required(path))
    elif value not in allowed:
        errs.append(not_supported(path, value, allowed))


def _validate_volumes(volumes: Sequence[Volume], errs: list[FieldError]) -> dict[str, Volume]:
    valid: dict[str, Volume] = {}
    seen: set[str] = set()
    for i, vol in enumerate(volumes):
        path = f"spec.volumes[{i}]"
        vol_errs = _validate_volume_source(vol, path)
        if not vol.name:
            vol_errs.append(required(f"{path}.name"))
        else:
            _names(vol_errs, f"{path}.name", vol.name, is_dns1123_label(vol.name))
        if vol.name in seen:
            vol_errs.append(duplicate(f"{path}.name", vol.name))
        if vol_errs:
            errs.extend(vol_errs)
        else:
            seen.add(vol.name)
            valid[vol.name] = vol
    return valid


def _validate_volume_source(vol: Volume, path: str) -> list[FieldError]:  # noqa: C901  (mirrors upstream validateVolumeSource)
    errs: list[FieldError] = []
    count = 0
    for kind in VOLUME_TYPES:
        source = getattr(vol, kind, None)
        if source is None:
            continue
        if count:
            errs.append(forbidden(f"{path}.{kind}", "may not specify more than 1 volume type"))
            continue
        count += 1
    if count == 0:
        errs.append(required(path, "must specify a volume type"))
    if vol.hostPath is not None:
        if not vol.hostPath.path:
            errs.append(required(f"{path}.hostPath.path"))
        elif ".." in vol.hostPath.path.split("/"):
            errs.append(invalid(f"{path}.hostPath.path", vol.hostPath.path, _BACKSTEPS))
        if vol.hostPath.type not in _HOST_PATH_TYPES:
            errs.append(not_supported(f"{path}.hostPath.type", vol.hostPath.type, _HOST_PATH_TYPES))
    if vol.emptyDir is not None and vol.emptyDir.sizeLimit is not None:
        _quantity(errs, f"{path}.emptyDir.sizeLimit", vol.emptyDir.sizeLimit)
    for kind in ("secret", "configMap", "downwardAPI", "projected"):
        source = getattr(vol, kind)
        mode = getattr(source, "defaultMode", None) if source is not None else None
        if mode is not None and not 0 <= mode <= 0o777:
            errs.append(invalid(f"{path}.{kind}.defaultMode", mode, _FILE_MODE))
    if vol.secret is not None:
        if not vol.secret.secretName:
            errs.append(required(f"{path}.secret.secretName"))
        for i, item in enumerate(vol.secret.items or []):
            _validate_key_to_path(item, f"{path}.secret.items[{i}]", errs)
    if vol.configMap is not None:
        if not vol.configMap.name:
            errs.append(required(f"{path}.configMap.name"))
        for i, item in enumerate(vol.configMap.items or []):
            _validate_key_to_path(item, f"{path}.configMap.items[{i}]", errs)
    if vol.downwardAPI is not None:
        for file in vol.downwardAPI.items or []:
            _validate_downward_file(file, f"{path}.downwardAPI", errs)
    if vol.projected is not None:
        _validate_projection_sources(vol.projected.sources or [], f"{path}.projected", errs)
    return errs


def validate_local_descending_path(value: str, path: str) -> list[FieldError]:
    """``validateLocalDescendingPath``: relative, and no ``..`` element."""
    errs: list[FieldError] = []
    if value.startswith("/"):
        errs.append(invalid(path, value, "must be a relative path"))
    if ".." in value.split("/"):
        errs.append(invalid(path, value, _BACKSTEPS))
    return errs


def validate_local_non_reserved_path(value: str, path: str) -> list[FieldError]:
    """``ValidateLocalNonReservedPath``: a descending path that does not start with ``..``
    (the atomic writer keeps its ``..data`` and ``..<timestamp>`` entries there)."""
    errs = validate_local_descending_path(value, path)
    if value.startswith("..") and not value.startswith("../"):
        errs.append(invalid(path, value, "must not start with '..'"))
    return errs


def _file_mode(mode: int | None, path: str, errs: list[FieldError]) -> None:
    if mode is not None and not 0 <= mode <= 0o777:
        errs.append(invalid(path, mode, _FILE_MODE))


def _validate_key_to_path(item: KeyToPath, path: str, errs: list[FieldError]) -> None:
    """``validateKeyToPath``."""
    if not item.key:
        errs.append(required(f"{path}.key"))
    if not item.path:
        errs.append(required(f"{path}.path"))
    errs.extend(validate_local_non_reserved_path(item.path or "", f"{path}.path"))
    _file_mode(item.mode, f"{path}.mode", errs)


def _validate_downward_file(file: DownwardAPIVolumeFile, path: str, errs: list[FieldError]) -> None:
    """``validateDownwardAPIVolumeFile``; as upstream, the errors name the volume source,
    not the item."""
    if not file.path:
        errs.append(required(f"{path}.path"))
    errs.extend(validate_local_non_reserved_path(file.path or "", f"{path}.path"))
    _file_mode(file.mode, f"{path}.mode", errs)


def _validate_projection_sources(  # noqa: C901  (mirrors upstream validateProjectionSources)
    sources: Sequence[VolumeProjection], projected: str, errs: list[FieldError]
) -> None:
    """``validateProjectionSources``: each source's paths, no path written twice."""
    paths: set[str] = set()

    def claim(item_path: str | None, shown: str) -> None:
        if item_path:
            if item_path in paths:
                errs.append(invalid(projected, shown, "conflicting duplicate paths"))
            paths.add(item_path)

    for j, source in enumerate(sources):
        src = f"{projected}.sources[{j}]"
        count = 0
        for kind in ("secret", "configMap"):
            ref = getattr(source, kind)
            if ref is None:
                continue
            count += 1
            if not ref.name:
                errs.append(required(f"{src}.{kind}.name"))
            for i, item in enumerate(ref.items or []):
                _validate_key_to_path(item, f"{src}.{kind}.items[{i}]", errs)
                claim(item.path, ref.name or "")
        if source.downwardAPI is not None:
            count += 1
            for file in source.downwardAPI.items or []:
                _validate_downward_file(file, f"{src}.downwardAPI", errs)
                claim(file.path, file.path or "")
        if source.serviceAccountToken is not None:
            count += 1
            _validate_token_projection(source.serviceAccountToken, projected, j, errs)
        if source.clusterTrustBundle is not None:
            count += 1
            bundle_path = source.clusterTrustBundle.path
            if not bundle_path:
                errs.append(required(f"{src}.clusterTrustBundle.path"))
            errs.extend(
                validate_local_non_reserved_path(
                    bundle_path or "", f"{src}.clusterTrustBundle.path"
                )
            )
            claim(bundle_path, bundle_path or "")
        if count > 1:
            errs.append(forbidden(src, "may not specify more than 1 volume type per source"))


def _validate_token_projection(
    token: ServiceAccountTokenProjection, projected: str, index: int, errs: list[FieldError]
) -> None:
    """``validateProjectionSources``' rules for a ``serviceAccountToken`` (its path is
    reported on the projected volume, as the API server does)."""
    path = f"{projected}.sources[{index}].serviceAccountToken"
    seconds = token.expirationSeconds
    if seconds is not None and seconds < 600:
        errs.append(
            invalid(
                f"{path}.expirationSeconds",
                seconds,
                "may not specify a duration less than 10 minutes",
            )
        )
    if seconds is not None and seconds > 1 << 32:
        errs.append(
            invalid(
                f"{path}.expirationSeconds",
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )
        )
    if not token.path:
        errs.append(required(f"{projected}.path"))
    else:
        errs.extend(validate_local_non_reserved_path(token.path, f"{projected}.path"))


def _quantity(errs: list[FieldError], path: str, text: str) -> Quantity | None:
    try:
        return parse_quantity(text)
    except QuantityError as e:
        errs.append(invalid(path, text, str(e)))
        return None


def _validate_containers(
    spec: PodSpec,
    volumes: Mapping[str, Volume],
    grace: int | None,
    errs: list[FieldError],
    *,
    restart_all: bool,
) -> None:
    containers = spec.containers or []
    if not containers:
        errs.append(required("spec.containers"))
        return
    names: set[str] = set()
    for i, ctr in enumerate(containers):
        path = f"spec.containers[{i}]"
        _validate_container_common(ctr, volumes, path, errs)
        if ctr.name in names:
            errs.append(duplicate(f"{path}.name", ctr.name))
        else:
            names.add(ctr.name)
        if ctr.lifecycle is not None:
            _validate_lifecycle(ctr.lifecycle, grace, f"{path}.lifecycle", errs)
        _validate_probe(ctr.livenessProbe, f"{path}.livenessProbe", errs, single_success=True)
        _validate_probe(ctr.readinessProbe, f"{path}.readinessProbe", errs, readiness=True)
        _validate_probe(ctr.startupProbe, f"{path}.startupProbe", errs, single_success=True)
        if ctr.restartPolicy is not None and ctr.restartPolicy not in _CONTAINER_RESTART_POLICIES:
            errs.append(
                not_supported(
                    f"{path}.restartPolicy", ctr.restartPolicy, _CONTAINER_RESTART_POLICIES
                )
            )
        _validate_restart_rules(ctr, path, errs, restart_all=restart_all)
    _host_port_conflicts(containers, "spec.containers", 0, errs)


def _validate_restart_rules(
    ctr: Container, path: str, errs: list[FieldError], *, restart_all: bool
) -> None:
    """``validateContainerRestartPolicy``'s checks of ``restartPolicyRules``."""
    rules = ctr.restartPolicyRules or []
    if not rules:
        return
    if ctr.restartPolicy is None:
        errs.append(
            required(
                f"{path}.restartPolicy", "must specify restartPolicy when restart rules are used"
            )
        )
    if len(rules) > _MAX_RESTART_RULES:
        errs.append(_too_many(f"{path}.restartPolicyRules", len(rules), _MAX_RESTART_RULES))
    actions = ("Restart", "RestartAllContainers") if restart_all else ("Restart",)
    for i, rule in enumerate(rules):
        rule_path = f"{path}.restartPolicyRules[{i}]"
        if rule.action not in actions:
            errs.append(not_supported(f"{rule_path}.action", rule.action, actions))
        codes = rule.exitCodes
        if codes is None:
            errs.append(required(f"{rule_path}.exitCodes", "must be specified"))
            continue
        if codes.operator not in ("In", "NotIn"):
            errs.append(
                not_supported(f"{rule_path}.exitCodes.operator", codes.operator, ("In", "NotIn"))
            )
        values = codes.values or []
        if len(values) > _MAX_RESTART_RULE_EXIT_CODES:
            errs.append(
                _too_many(
                    f"{rule_path}.exitCodes.values", len(values), _MAX_RESTART_RULE_EXIT_CODES
                )
            )


def _too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError(path, "Too many", f"{count}: must have at most {limit} items")


def _host_port_conflicts(
    containers: Sequence[Container], path: str, offset: int, errs: list[FieldError]
) -> None:
    seen: set[str] = set()
    for ci, ctr in enumerate(containers, start=offset):
        for pi, port in enumerate(ctr.ports or []):
            if not port.hostPort:
                continue
            key = f"{port.protocol or ''}/{port.hostIP or ''}/{port.hostPort}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)


def _validate_init_containers(
    spec: PodSpec,
    volumes: Mapping[str, Volume],
    grace: int | None,
    errs: list[FieldError],
    *,
    restart_all: bool,
) -> None:
    names = {c.name for c in spec.containers or []}
    for i, ctr in enumerate(spec.initContainers or []):
        path = f"spec.initContainers[{i}]"
        _validate_container_common(ctr, volumes, path, errs)
        restartable = False
        if ctr.restartPolicy is not None:
            if ctr.restartPolicy not in _CONTAINER_RESTART_POLICIES:
                errs.append(
                    not_supported(
                        f"{path}.restartPolicy", ctr.restartPolicy, _CONTAINER_RESTART_POLICIES
                    )
                )
            restartable = ctr.restartPolicy == "Always"
        if restartable and ctr.restartPolicyRules and not restart_all:
            errs.append(
                forbidden(
                    f"{path}.restartPolicyRules",
                    "may not be set for init containers with restartPolicy=Always",
                )
            )
        else:
            _validate_restart_rules(ctr, path, errs, restart_all=restart_all)
        if ctr.name in names:
            errs.append(duplicate(f"{path}.name", ctr.name))
        elif ctr.name:
            names.add(ctr.name)
        _host_port_conflicts([ctr], "spec.initContainers", i, errs)
        if restartable:
            if ctr.lifecycle is not None:
                _validate_lifecycle(ctr.lifecycle, grace, f"{path}.lifecycle", errs)
            _validate_probe(ctr.livenessProbe, f"{path}.livenessProbe", errs, single_success=True)
            _validate_probe(ctr.readinessProbe, f"{path}.readinessProbe", errs, readiness=True)
            _validate_probe(ctr.startupProbe, f"{path}.startupProbe", errs, single_success=True)
        else:
            for field in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if getattr(ctr, field) is not None:
                    errs.append(forbidden(f"{path}.{field}", _INIT_ONLY_ALWAYS))


def _validate_ephemeral_containers(
    spec: PodSpec, volumes: Mapping[str, Volume], errs: list[FieldError]
) -> None:
    ephemeral = spec.ephemeralContainers or []
    if not ephemeral:
        return
    others = {c.name for c in (spec.containers or []) + (spec.initContainers or [])}
    names = set(others)
    for i, ec in enumerate(ephemeral):
        path = f"spec.ephemeralContainers[{i}]"
        _validate_container_common(ec, volumes, path, errs)
        if ec.name in names:
            errs.append(duplicate(f"{path}.name", ec.name))
        else:
            names.add(ec.name)
        if ec.targetContainerName and ec.targetContainerName not in others:
            errs.append(not_found(f"{path}.targetContainerName", ec.targetContainerName))
        for field in (
            "ports",
            "resources",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "resizePolicy",
            "restartPolicy",
            "restartPolicyRules",
        ):
            if getattr(ec, field):
                errs.append(forbidden(f"{path}.{field}", _EPHEMERAL_FORBIDDEN))
        for mi, mount in enumerate(ec.volumeMounts or []):
            for field in ("subPath", "subPathExpr"):
                if getattr(mount, field):
                    errs.append(
                        forbidden(f"{path}.volumeMounts[{mi}].{field}", _EPHEMERAL_FORBIDDEN)
                    )


def _validate_container_common(
    ctr: AnyContainer, volumes: Mapping[str, Volume], path: str, errs: list[FieldError]
) -> None:
    if not ctr.name:
        errs.append(required(f"{path}.name"))
    else:
        _names(errs, f"{path}.name", ctr.name, is_dns1123_label(ctr.name))
    if not ctr.image:
        errs.append(required(f"{path}.image"))
    _enum(
        errs,
        f"{path}.terminationMessagePolicy",
        ctr.terminationMessagePolicy,
        ("File", "FallbackToLogsOnError"),
    )
    _validate_ports(ctr.ports or [], f"{path}.ports", errs)
    _validate_env(ctr.env or [], f"{path}.env", errs)
    _validate_env_from(ctr.envFrom or [], f"{path}.envFrom", errs)
    _validate_volume_mounts(ctr.volumeMounts or [], volumes, f"{path}.volumeMounts", errs)
    _enum(errs, f"{path}.imagePullPolicy", ctr.imagePullPolicy, ("Always", "IfNotPresent", "Never"))
    if ctr.resources is not None:
        _validate_resources(ctr.resources, f"{path}.resources", errs)
    if ctr.securityContext is not None:
        _validate_security_context(ctr.securityContext, f"{path}.securityContext", errs)


def _validate_ports(ports: Sequence[ContainerPort], path: str, errs: list[FieldError]) -> None:
    names: set[str] = set()
    for i, port in enumerate(ports):
        idx = f"{path}[{i}]"
        if port.name:
            msgs = is_valid_port_name(port.name)
            if msgs:
                _names(errs, f"{idx}.name", port.name, msgs)
            elif port.name in names:
                errs.append(duplicate(f"{idx}.name", port.name))
            else:
                names.add(port.name)
        if port.containerPort == 0:
            errs.append(required(f"{idx}.containerPort"))
        else:
            errs.extend(
                invalid(f"{idx}.containerPort", port.containerPort, m)
                for m in is_valid_port_num(port.containerPort)
            )
        if port.hostPort:
            errs.extend(
                invalid(f"{idx}.hostPort", port.hostPort, m)
                for m in is_valid_port_num(port.hostPort)
            )
        if port.hostIP:
            _names(errs, f"{idx}.hostIP", port.hostIP, is_valid_ip(port.hostIP))
        if not port.protocol:
            errs.append(required(f"{idx}.protocol"))
        elif port.protocol not in ("SCTP", "TCP", "UDP"):
            errs.append(not_supported(f"{idx}.protocol", port.protocol, ("SCTP", "TCP", "UDP")))


def _validate_env(env: Sequence[EnvVar], path: str, errs: list[FieldError]) -> None:
    for i, var in enumerate(env):
        idx = f"{path}[{i}]"
        if not var.name:
            errs.append(required(f"{idx}.name"))
        else:
            _names(errs, f"{idx}.name", var.name, is_env_var_name(var.name))
        if var.valueFrom is not None:
            _validate_env_var_value_from(var.valueFrom, var.value, f"{idx}.valueFrom", errs)


def _validate_env_var_value_from(
    source: EnvVarSource, value: str | None, vpath: str, errs: list[FieldError]
) -> None:
    """``validateEnvVarValueFrom``: exactly one source, and no ``value`` beside it."""
    count = 0
    if source.fieldRef is not None:
        count += 1
        _validate_object_field_selector(source.fieldRef, f"{vpath}.fieldRef", errs)
    if source.resourceFieldRef is not None:
        count += 1
        _validate_container_resource_field_selector(
            source.resourceFieldRef, f"{vpath}.resourceFieldRef", errs
        )
    for kind in ("configMapKeyRef", "secretKeyRef"):
        ref_any = getattr(source, kind)
        if ref_any is None:
            continue
        count += 1
        kpath = f"{vpath}.{kind}"
        name = ref_any.name or ""
        _names(errs, f"{kpath}.name", name, is_dns1123_subdomain(name))
        if not ref_any.key:
            errs.append(required(f"{kpath}.key"))
        else:
            _names(errs, f"{kpath}.key", ref_any.key, is_config_map_key(ref_any.key))
    if getattr(source, "fileKeyRef", None) is not None:
        count += 1
    if count == 0:
        errs.append(
            invalid(
                vpath,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` "
                "or `secretKeyRef`",
            )
        )
    elif value:
        errs.append(invalid(vpath, "", "may not be specified when `value` is not empty"))
    elif count > 1:
        errs.append(invalid(vpath, "", "may not have more than one field specified at a time"))


def _validate_object_field_selector(
    ref: ObjectFieldSelector, fpath: str, errs: list[FieldError]
) -> None:
    """``validateObjectFieldSelector`` for an env var's ``fieldRef``."""
    if not ref.apiVersion:
        errs.append(required(f"{fpath}.apiVersion"))
    elif not ref.fieldPath:
        errs.append(required(f"{fpath}.fieldPath"))
    elif ref.apiVersion != "v1":
        errs.append(
            invalid(
                f"{fpath}.fieldPath",
                ref.fieldPath,
                f'error converting fieldPath: unsupported version "{ref.apiVersion}"',
            )
        )
    else:
        _validate_env_field_path(ref.fieldPath, fpath, errs)


def _validate_container_resource_field_selector(
    res: ResourceFieldSelector, rpath: str, errs: list[FieldError]
) -> None:
    """``validateContainerResourceFieldSelector`` for an env var's ``resourceFieldRef``."""
    if not res.resource:
        errs.append(required(f"{rpath}.resource"))
    elif res.resource not in _RESOURCE_FIELD_PATHS and not res.resource.startswith(
        ("requests.hugepages-", "limits.hugepages-")
    ):
        errs.append(not_supported(f"{rpath}.resource", res.resource, _RESOURCE_FIELD_PATHS))
    if res.divisor is not None:
        _quantity(errs, f"{rpath}.divisor", res.divisor)


def _validate_env_field_path(field_path: str, path: str, errs: list[FieldError]) -> None:
    base, bracket, rest = field_path.partition("[")
    if bracket:
        if base not in ("metadata.labels", "metadata.annotations") or not rest.endswith("]"):
            errs.append(invalid(path, base, "does not support subscript"))
            return
        key = rest[:-1].strip("'\"")
        if base == "metadata.annotations":
            key = key.lower()
        _names(errs, path, key, is_qualified_name(key))
    elif field_path not in _ENV_FIELD_PATHS:
        errs.append(not_supported(f"{path}.fieldPath", field_path, _ENV_FIELD_PATHS))


def _validate_env_from(sources: Sequence[EnvFromSource], path: str, errs: list[FieldError]) -> None:
    for i, source in enumerate(sources):
        idx = f"{path}[{i}]"
        if source.prefix:
            _names(errs, f"{idx}.prefix", source.prefix, is_env_var_name(source.prefix))
        count = 0
        for kind in ("configMapRef", "secretRef"):
            ref = getattr(source, kind)
            if ref is None:
                continue
            count += 1
            if not ref.name:
                errs.append(required(f"{idx}.{kind}.name"))
            else:
                _names(errs, f"{idx}.{kind}.name", ref.name, is_dns1123_subdomain(ref.name))
        if count == 0:
            errs.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif count > 1:
            errs.append(invalid(path, "", "may not have more than one field specified at a time"))


def _validate_volume_mounts(
    mounts: Sequence[VolumeMount],
    volumes: Mapping[str, Volume],
    path: str,
    errs: list[FieldError],
) -> None:
    mount_points: set[str] = set()
    for i, mount in enumerate(mounts):
        idx = f"{path}[{i}]"
        if not mount.name:
            errs.append(required(f"{idx}.name"))
        if mount.name not in volumes:
            errs.append(not_found(f"{idx}.name", mount.name))
        if not mount.mountPath:
            errs.append(required(f"{idx}.mountPath"))
        if mount.mountPath in mount_points:
            errs.append(invalid(f"{idx}.mountPath", mount.mountPath, "must be unique"))
        mount_points.add(mount.mountPath)
        if mount.subPath:
            errs.extend(validate_local_descending_path(mount.subPath, f"{path}.subPath"))
        if mount.subPathExpr:
            if mount.subPath:
                errs.append(
                    invalid(
                        f"{idx}.subPathExpr",
                        mount.subPathExpr,
                        "subPathExpr and subPath are mutually exclusive",
                    )
                )
            errs.extend(validate_local_descending_path(mount.subPathExpr, f"{path}.subPathExpr"))


def _validate_resources(res: ResourceRequirements, path: str, errs: list[FieldError]) -> None:
    limits: dict[str, Quantity] = {}
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    for name, text in (res.limits or {}).items():
        key = f"{lim_path}[{name}]"
        _validate_resource_name(name, key, errs)
        q = _quantity(errs, key, str(text))
        if q is not None:
            _validate_quantity_value(name, q, key, errs)
            limits[name] = q
    for name, text in (res.requests or {}).items():
        key = f"{req_path}[{name}]"
        _validate_resource_name(name, key, errs)
        q = _quantity(errs, key, str(text))
        if q is None:
            continue
        _validate_quantity_value(name, q, key, errs)
        limit = limits.get(name)
        overcommit = _overcommit_allowed(name)
        if limit is not None:
            if q != limit and not overcommit:
                errs.append(invalid(req_path, str(q), f"must be equal to {name} limit of {limit}"))
            elif q > limit:
                errs.append(
                    invalid(
                        req_path, str(q), f"must be less than or equal to {name} limit of {limit}"
                    )
                )
        elif not overcommit and name not in (res.limits or {}):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))


def _is_native(name: str) -> bool:
    return "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


def _validate_resource_name(name: str, path: str, errs: list[FieldError]) -> None:
    msgs = is_qualified_name(name)
    if msgs:
        _names(errs, path, name, msgs)
        return
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif _is_native(name):
        errs.append(invalid(path, name, "must be a standard resource for containers"))


def _validate_quantity_value(name: str, q: Quantity, path: str, errs: list[FieldError]) -> None:
    if q.value < 0:
        errs.append(invalid(path, str(q), _NEGATIVE))
    if not _is_native(name) and not q.is_integer():
        errs.append(invalid(path, str(q), "must be an integer"))


def _validate_unmasked_proc_mount(spec: PodSpec, errs: list[FieldError]) -> None:
    """``ValidateSecurityContext``: an unmasked /proc only inside a user namespace."""
    if spec.hostUsers is False:
        return
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for i, ctr in enumerate(getattr(spec, kind) or []):
            sc = ctr.securityContext
            if sc is not None and sc.procMount == "Unmasked":
                errs.append(
                    invalid(
                        f"spec.{kind}[{i}].securityContext.procMount",
                        "Unmasked",
                        "`hostUsers` must be false to use `Unmasked`",
                    )
                )


def _validate_seccomp_profile(
    profile: SeccompProfile | None, path: str, errs: list[FieldError]
) -> None:
    """``validateSeccompProfileField``: a Localhost profile is a file under the node's
    seccomp directory, named by a relative path that never climbs out of it."""
    if profile is None:
        return
    kind = profile.type
    if not kind:
        errs.append(required(f"{path}.type", "type is required when seccompProfile is set"))
    elif kind not in _PROFILE_TYPES:
        errs.append(not_supported(f"{path}.type", kind, _PROFILE_TYPES))
    local = profile.localhostProfile
    lpath = f"{path}.localhostProfile"
    if kind == "Localhost":
        if local is None:
            errs.append(required(lpath, "must be set when seccomp type is Localhost"))
        else:
            errs.extend(validate_local_descending_path(local, lpath))
            if not local.isprintable():
                errs.append(invalid(lpath, local, _CONTROL))
    elif local is not None:
        errs.append(invalid(lpath, local, "can only be set when seccomp type is Localhost"))


def _validate_app_armor_profile(
    profile: AppArmorProfile | None, path: str, errs: list[FieldError]
) -> None:
    """``ValidateAppArmorProfileField``; a profile name must also be printable, since it
    is handed to the engine as one security option."""
    if profile is None:
        return
    kind = profile.type
    local = profile.localhostProfile
    lpath = f"{path}.localhostProfile"
    if kind == "Localhost":
        if local is None:
            errs.append(required(lpath, "must be set when AppArmor type is Localhost"))
            return
        if local.strip() != local:
            errs.append(invalid(lpath, local, "must not be padded with whitespace"))
        elif not local:
            errs.append(required(lpath, "must be set when AppArmor type is Localhost"))
        elif not local.isprintable():
            errs.append(invalid(lpath, local, _CONTROL))
        if len(local.encode("utf-8", "surrogatepass")) > _MAX_APPARMOR_PROFILE:
            errs.append(too_long(lpath, _MAX_APPARMOR_PROFILE))
    elif kind in ("RuntimeDefault", "Unconfined"):
        if local is not None:
            errs.append(invalid(lpath, local, "can only be set when AppArmor type is Localhost"))
    elif not kind:
        errs.append(required(f"{path}.type", "type is required when appArmorProfile is set"))
    else:
        errs.append(not_supported(f"{path}.type", kind, _PROFILE_TYPES))


def _validate_security_context(sc: SecurityContext, path: str, errs: list[FieldError]) -> None:
    _validate_seccomp_profile(sc.seccompProfile, f"{path}.seccompProfile", errs)
    _validate_app_armor_profile(sc.appArmorProfile, f"{path}.appArmorProfile", errs)
    for field in ("runAsUser", "runAsGroup"):
        value = getattr(sc, field)
        if value is not None and not 0 <= value <= _INT32_MAX:
            errs.append(invalid(f"{path}.{field}", value, range_error(0, _INT32_MAX)))
    if sc.procMount is not None and sc.procMount not in ("Default", "Unmasked"):
        errs.append(not_supported(f"{path}.procMount", sc.procMount, ("Default", "Unmasked")))
    if sc.allowPrivilegeEscalation is False:
        if sc.privileged:
            errs.append(
                invalid(
                    path,
                    "",
                    "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
                )
            )
        added = (sc.capabilities.add or []) if sc.capabilities is not None else []
        if "CAP_SYS_ADMIN" in added or "SYS_ADMIN" in added:
            errs.append(
                invalid(
                    path,
                    "",
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
                    "CAP_SYS_ADMIN",
                )
            )


def _validate_pod_security_context(spec: PodSpec, errs: list[FieldError]) -> None:
    sc = spec.securityContext
    if sc is None:
        return
    path = "spec.securityContext"
    _validate_seccomp_profile(sc.seccompProfile, f"{path}.seccompProfile", errs)
    _validate_app_armor_profile(sc.appArmorProfile, f"{path}.appArmorProfile", errs)
    for field in ("runAsUser", "runAsGroup", "fsGroup"):
        value = getattr(sc, field)
        if value is not None and not 0 <= value <= _INT32_MAX:
            errs.append(invalid(f"{path}.{field}", value, range_error(0, _INT32_MAX)))
    for i, gid in enumerate(sc.supplementalGroups or []):
        if not 0 <= gid <= _INT32_MAX:
            errs.append(invalid(f"{path}.supplementalGroups[{i}]", gid, range_error(0, _INT32_MAX)))
    policy = sc.seLinuxChangePolicy
    if policy is not None and policy not in ("MountOption", "Recursive"):
        errs.append(
            not_supported(f"{path}.seLinuxChangePolicy", policy, ("MountOption", "Recursive"))
        )


def _validate_lifecycle(
    lifecycle: Lifecycle, grace: int | None, path: str, errs: list[FieldError]
) -> None:
    for hook in ("postStart", "preStop"):
        handler: LifecycleHandler | None = getattr(lifecycle, hook)
        if handler is not None:
            _validate_handler(handler, grace, f"{path}.{hook}", errs)


def _validate_probe(
    probe: Probe | None,
    path: str,
    errs: list[FieldError],
    *,
    single_success: bool = False,
    readiness: bool = False,
) -> None:
    if probe is None:
        return
    _validate_handler(probe, None, path, errs)
    for field in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        value = getattr(probe, field)
        if value is not None and value < 0:
            errs.append(invalid(f"{path}.{field}", value, _NEGATIVE))
    tgps = probe.terminationGracePeriodSeconds
    if tgps is not None and tgps <= 0:
        errs.append(
            invalid(f"{path}.terminationGracePeriodSeconds", tgps, "must be greater than 0")
        )
    if readiness and tgps is not None:
        errs.append(
            invalid(
                f"{path}.terminationGracePeriodSeconds",
                tgps,
                "must not be set for readinessProbes",
            )
        )
    if single_success and probe.successThreshold != 1:
        errs.append(invalid(f"{path}.successThreshold", probe.successThreshold, "must be 1"))


_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc", "sleep")


def _validate_handler(
    handler: Probe | LifecycleHandler, grace: int | None, path: str, errs: list[FieldError]
) -> None:
    count = 0
    for kind in _HANDLERS:
        action = getattr(handler, kind, None)
        if action is None:
            continue
        if count:
            errs.append(forbidden(f"{path}.{kind}", "may not specify more than 1 handler type"))
            continue
        count += 1
        apath = f"{path}.{kind}"
        if kind == "exec":
            if not action.command:
                errs.append(required(f"{apath}.command"))
        elif kind == "httpGet":
            _validate_http_get(action, apath, errs)
        elif kind in ("tcpSocket", "grpc"):
            _validate_port_ref(action.port, f"{apath}.port", errs)
        elif grace is not None and not 0 <= action.seconds <= grace:
            errs.append(
                invalid(
                    apath,
                    action.seconds,
                    f"must be non-negative and less than terminationGracePeriodSeconds ({grace})",
                )
            )
    if count == 0:
        errs.append(required(path, "must specify a handler type"))


def _validate_http_get(action: HTTPGetAction, path: str, errs: list[FieldError]) -> None:
    if not action.path:
        errs.append(required(f"{path}.path"))
    _validate_port_ref(action.port, f"{path}.port", errs)
    if action.scheme not in ("HTTP", "HTTPS"):
        errs.append(not_supported(f"{path}.scheme", action.scheme or "", ("HTTP", "HTTPS")))


def _validate_port_ref(port: int | str, path: str, errs: list[FieldError]) -> None:
    if isinstance(port, int):
        errs.extend(invalid(path, port, m) for m in is_valid_port_num(port))
    else:
        errs.extend(invalid(path, port, m) for m in is_valid_port_name(port))
