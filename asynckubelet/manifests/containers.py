"""A pod's containers, init containers and ephemeral containers as ``ValidatePod`` checks them.

Each kind of container has its own rules (what an init container may set without
``restartPolicy: Always``, what an ephemeral one may never set), and every container gets
the common ones: name, image, ports, environment, volume mounts, resources, security
context. Mirrors the container part of ``pkg/apis/core/validation/validation.go``
(``validateContainers``, ``validateInitContainers``, ``validateEphemeralContainers``,
``validateContainerCommon``, ``ValidateEnv``, ``validateEnvFrom``, ``ValidateVolumeMounts``,
``ValidateContainerResourceRequirements``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lightkube.models.core_v1 import (
    Container,
    ContainerPort,
    EnvFromSource,
    EnvVar,
    EnvVarSource,
    EphemeralContainer,
    ObjectFieldSelector,
    PodSpec,
    ResourceFieldSelector,
    ResourceRequirements,
    Volume,
    VolumeMount,
)

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    duplicate,
    forbidden,
    invalid,
    is_config_map_key,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_var_name,
    is_qualified_name,
    is_valid_ip,
    is_valid_port_name,
    is_valid_port_num,
    not_found,
    not_supported,
    required,
)
from asynckubelet.manifests.objectmeta import _names
from asynckubelet.manifests.probes import _NEGATIVE, _validate_lifecycle, _validate_probe
from asynckubelet.manifests.quantity import Quantity
from asynckubelet.manifests.resizepolicy import (
    validate_init_resize_policy,
    validate_resize_policy,
)
from asynckubelet.manifests.securitycontext import _validate_security_context
from asynckubelet.manifests.volumes import _quantity, validate_local_descending_path

AnyContainer = Container | EphemeralContainer
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
_CONTAINER_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_MAX_RESTART_RULES = 20
_MAX_RESTART_RULE_EXIT_CODES = 255


def _enum(errs: list[FieldError], path: str, value: str | None, allowed: Sequence[str]) -> None:
    if not value:
        errs.append(required(path))
    elif value not in allowed:
        errs.append(not_supported(path, value, allowed))


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
            _validate_lifecycle(ctr.lifecycle, grace, f"{path}.lifecycle", errs, pod_os=spec.os)
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
        validate_resize_policy(ctr.resizePolicy, f"{path}.resizePolicy", spec.restartPolicy, errs)
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
        validate_init_resize_policy(
            ctr.resizePolicy,
            f"{path}.resizePolicy",
            spec.restartPolicy,
            errs,
            restartable=restartable,
        )
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
                _validate_lifecycle(ctr.lifecycle, grace, f"{path}.lifecycle", errs, pod_os=spec.os)
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
            value = getattr(ec, field)
            # An empty object (kubectl debug sends ``resources: {}``) is Go's zero value.
            if value and (not hasattr(value, "to_dict") or value.to_dict()):
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
