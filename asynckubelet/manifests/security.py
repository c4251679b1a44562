"""Pod Security Standards, enforced before anything is created.

A node that runs whatever it is given hands root on the host to anyone who can write YAML.
The upstream levels (``privileged``, ``baseline``, ``restricted``; policy version ``latest``)
are the vocabulary cluster users already know, so this module evaluates the same checks, in
the same order, with the same wording as the PodSecurity admission plugin
(``k8s.io/pod-security-admission/policy``), and rejects with
``violates PodSecurity "baseline:latest": privileged (container "x" must not set ...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from lightkube.models.core_v1 import (
    AppArmorProfile,
    Container,
    EphemeralContainer,
    LifecycleHandler,
    Pod,
    PodSpec,
    Probe,
    SELinuxOptions,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.manifests.messages import go_quote

__all__ = [
    "ENFORCE_LABEL",
    "LEVELS",
    "CheckResult",
    "Level",
    "check_pod",
    "enforced_level",
    "violation_message",
]

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: tuple[Level, ...] = ("privileged", "baseline", "restricted")
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"


def enforced_level(
    node_level: Level, labels: Mapping[str, str] | None, *, allow_namespace_policy: bool
) -> Level:
    """The level in force for a namespace with these labels: the node's, unless the
    namespace's ``pod-security.kubernetes.io/enforce`` names a stricter one (or any one,
    with ``allow_namespace_policy``)."""
    chosen = (labels or {}).get(ENFORCE_LABEL)
    if chosen not in LEVELS:
        return node_level
    if allow_namespace_policy or LEVELS.index(chosen) >= LEVELS.index(node_level):
        return chosen
    return node_level


@dataclass(frozen=True)
class CheckResult:
    """One failed check: the reason is always shown, the detail in parentheses."""

    reason: str
    detail: str = ""


def _plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def _quote(items: Sequence[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _containers(spec: PodSpec) -> Iterator[Container | EphemeralContainer]:
    yield from spec.initContainers or []
    yield from spec.containers or []
    yield from spec.ephemeralContainers or []


def _named(kind: str, names: Sequence[str]) -> str:
    return f"{_plural(kind, kind + 's', len(names))} {_quote(names)}"


_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_UNCONFINED = "unconfined"


def _app_armor_value(profile: AppArmorProfile | None) -> str | None:
    """The forbidden value a profile sets, if any. A ``Localhost`` profile named
    ``unconfined`` is Docker's word for no profile at all, so it counts as ``Unconfined``
    (upstream's check, written for runtimes without that name, lets it through)."""
    if profile is None:
        return None
    if profile.type == "Localhost" and profile.localhostProfile == _UNCONFINED:
        return f"Localhost/{_UNCONFINED}"
    if profile.type in ("RuntimeDefault", "Localhost"):
        return None
    return profile.type or ""


def _app_armor(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    setters: list[str] = []
    values: set[str] = set()
    psc = spec.securityContext
    value = _app_armor_value(psc.appArmorProfile if psc is not None else None)
    if value is not None:
        setters.append("pod")
        values.add(value)
    names = []
    for c in _containers(spec):
        sc = c.securityContext
        value = _app_armor_value(sc.appArmorProfile if sc is not None else None)
        if value is not None:
            names.append(c.name)
            values.add(value)
    if names:
        setters.append(_named("container", names))
    value_list = sorted(values)
    annotations = sorted(
        f"{k}={go_quote(str(v))}"
        for k, v in (meta.annotations or {}).items()
        if k.startswith(_APPARMOR_PREFIX)
        and v
        and v != "runtime/default"
        and (not str(v).startswith("localhost/") or v == f"localhost/{_UNCONFINED}")
    )
    if annotations:
        value_list += annotations
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return CheckResult(
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(value_list)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(value_list)}",
    )


def _host_namespaces(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    used = [
        f"{name}=true"
        for name, on in (
            ("hostNetwork", spec.hostNetwork),
            ("hostPID", spec.hostPID),
            ("hostIPC", spec.hostIPC),
        )
        if on
    ]
    return CheckResult("host namespaces", ", ".join(used)) if used else None


def _host_ports(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        bad = [str(p.hostPort) for p in c.ports or [] if p.hostPort]
        if bad:
            names.append(c.name)
            ports.update(bad)
    if not names:
        return None
    return CheckResult(
        "hostPort",
        f"{_named('container', names)} {_plural('uses', 'use', len(names))} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _probe_hosts(handler: Probe | LifecycleHandler | None) -> list[str]:
    if handler is None:
        return []
    hosts = []
    if handler.httpGet is not None and handler.httpGet.host:
        hosts.append(handler.httpGet.host)
    if handler.tcpSocket is not None and handler.tcpSocket.host:
        hosts.append(handler.tcpSocket.host)
    return hosts


def _host_probes(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names: set[str] = set()
    hosts: set[str] = set()
    for c in _containers(spec):
        found = _probe_hosts(c.livenessProbe) + _probe_hosts(c.readinessProbe)
        found += _probe_hosts(c.startupProbe)
        if c.lifecycle is not None:
            found += _probe_hosts(c.lifecycle.postStart) + _probe_hosts(c.lifecycle.preStop)
        if found:
            names.add(c.name)
            hosts.update(found)
    if not names:
        return None
    return CheckResult(
        "probe or lifecycle host",
        f"{_named('container', sorted(names))} {_plural('uses', 'use', len(names))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{_quote(sorted(hosts))}",
    )


def _privileged(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names = [
        c.name for c in _containers(spec) if c.securityContext and c.securityContext.privileged
    ]
    if not names:
        return None
    return CheckResult(
        "privileged", f"{_named('container', names)} must not set securityContext.privileged=true"
    )


def _proc_mount(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names: list[str] = []
    values: set[str] = set()
    for c in _containers(spec):
        sc = c.securityContext
        if sc is not None and sc.procMount is not None and sc.procMount != "Default":
            names.append(c.name)
            values.add(sc.procMount)
    if not names:
        return None
    return CheckResult(
        "procMount",
        f"{_named('container', names)} must not set securityContext.procMount to "
        f"{_quote(sorted(values))}",
    )


_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SELINUX_TYPES_LATEST = _SELINUX_TYPES | {"container_engine_t"}


def _selinux(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    setters: list[str] = []
    bad_types: set[str] = set()
    flags = {"user": False, "role": False}

    def valid(opts: SELinuxOptions) -> bool:
        ok = True
        if (opts.type or "") not in _SELINUX_TYPES_LATEST:
            ok = False
            bad_types.add(opts.type or "")
        for field in ("user", "role"):
            if getattr(opts, field):
                ok = False
                flags[field] = True
        return ok

    psc = spec.securityContext
    if psc is not None and psc.seLinuxOptions is not None and not valid(psc.seLinuxOptions):
        setters.append("pod")
    names = [
        c.name
        for c in _containers(spec)
        if c.securityContext is not None
        and c.securityContext.seLinuxOptions is not None
        and not valid(c.securityContext.seLinuxOptions)
    ]
    if names:
        setters.append(_named("container", names))
    if not setters:
        return None
    data = []
    if bad_types:
        data.append(f"{_plural('type', 'types', len(bad_types))} {_quote(sorted(bad_types))}")
    data += [f"{field} may not be set" for field, on in flags.items() if on]
    return CheckResult(
        "seLinuxOptions",
        f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
    )


_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)


def _sysctls(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    psc = spec.securityContext
    bad = [s.name for s in (psc.sysctls or [] if psc else []) if s.name not in _SYSCTLS]
    return CheckResult("forbidden sysctls", ", ".join(bad)) if bad else None


def _windows_host_process(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    setters = []
    psc = spec.securityContext
    if psc is not None and psc.windowsOptions is not None and psc.windowsOptions.hostProcess:
        setters.append("pod")
    names = [
        c.name
        for c in _containers(spec)
        if c.securityContext is not None
        and c.securityContext.windowsOptions is not None
        and c.securityContext.windowsOptions.hostProcess
    ]
    if names:
        setters.append(_named("container", names))
    if not setters:
        return None
    return CheckResult(
        "hostProcess",
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
    )


_DEFAULT_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _capabilities_baseline(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names: list[str] = []
    caps: set[str] = set()
    for c in _containers(spec):
        sc = c.securityContext
        if sc is None or sc.capabilities is None:
            continue
        extra = [a for a in sc.capabilities.add or [] if a not in _DEFAULT_CAPABILITIES]
        if extra:
            names.append(c.name)
            caps.update(extra)
    if not names:
        return None
    return CheckResult(
        "non-default capabilities",
        f"{_named('container', names)} must not include {_quote(sorted(caps))} in "
        "securityContext.capabilities.add",
    )


def _host_path_volumes(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names = [v.name for v in spec.volumes or [] if v.hostPath is not None]
    if not names:
        return None
    return CheckResult("hostPath volumes", _named("volume", names))


def _seccomp_ok(profile_type: str | None) -> bool:
    return profile_type in ("RuntimeDefault", "Localhost")


def _seccomp(spec: PodSpec, *, restricted: bool) -> CheckResult | None:
    setters: list[str] = []
    values: set[str] = set()
    pod_set = False
    psc = spec.securityContext
    if psc is not None and psc.seccompProfile is not None:
        if _seccomp_ok(psc.seccompProfile.type):
            pod_set = True
        else:
            setters.append("pod")
            values.add(psc.seccompProfile.type or "")
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        sc = c.securityContext
        if sc is not None and sc.seccompProfile is not None:
            if not _seccomp_ok(sc.seccompProfile.type):
                explicit.append(c.name)
                values.add(sc.seccompProfile.type or "")
        elif not pod_set:
            implicit.append(c.name)
    if explicit:
        setters.append(_named("container", explicit))
    if setters:
        return CheckResult(
            "seccompProfile",
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}",
        )
    if restricted and implicit:
        return CheckResult(
            "seccompProfile",
            f"pod or {_named('container', implicit)} must set securityContext.seccompProfile.type "
            'to "RuntimeDefault" or "Localhost"',
        )
    return None


def _seccomp_baseline(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    return _seccomp(spec, restricted=False)


def _seccomp_restricted(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    return _seccomp(spec, restricted=True)


def _allow_privilege_escalation(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names = [
        c.name
        for c in _containers(spec)
        if c.securityContext is None or c.securityContext.allowPrivilegeEscalation is not False
    ]
    if not names:
        return None
    return CheckResult(
        "allowPrivilegeEscalation != false",
        f"{_named('container', names)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    missing_drop: list[str] = []
    adding: list[str] = []
    caps: set[str] = set()
    for c in _containers(spec):
        sc = c.securityContext
        if sc is None or sc.capabilities is None:
            missing_drop.append(c.name)
            continue
        if "ALL" not in (sc.capabilities.drop or []):
            missing_drop.append(c.name)
        extra = [a for a in sc.capabilities.add or [] if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.name)
            caps.update(extra)
    details = []
    if missing_drop:
        details.append(
            f"{_named('container', missing_drop)} must set "
            'securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_named('container', adding)} must not include {_quote(sorted(caps))} in "
            "securityContext.capabilities.add"
        )
    return CheckResult("unrestricted capabilities", "; ".join(details)) if details else None


_ALLOWED_RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_RESTRICTED_VOLUME_TYPES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def _restricted_volumes(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    names: list[str] = []
    kinds: set[str] = set()
    for v in spec.volumes or []:
        if any(getattr(v, k, None) is not None for k in _ALLOWED_RESTRICTED_VOLUMES):
            continue
        names.append(v.name)
        kinds.add(next((k for k in _RESTRICTED_VOLUME_TYPES if getattr(v, k, None)), "unknown"))
    if not names:
        return None
    return CheckResult(
        "restricted volume types",
        f"{_named('volume', names)} {_plural('uses', 'use', len(names))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} "
        f"{_quote(sorted(kinds))}",
    )


def _run_as_non_root(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    setters: list[str] = []
    pod_non_root = False
    psc = spec.securityContext
    if psc is not None and psc.runAsNonRoot is not None:
        if psc.runAsNonRoot:
            pod_non_root = True
        else:
            setters.append("pod")
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        sc = c.securityContext
        if sc is not None and sc.runAsNonRoot is not None:
            if not sc.runAsNonRoot:
                explicit.append(c.name)
        elif not pod_non_root:
            implicit.append(c.name)
    if explicit:
        setters.append(_named("container", explicit))
    if setters:
        return CheckResult(
            "runAsNonRoot != true",
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return CheckResult(
            "runAsNonRoot != true",
            f"pod or {_named('container', implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(meta: ObjectMeta, spec: PodSpec) -> CheckResult | None:
    setters = []
    psc = spec.securityContext
    if psc is not None and psc.runAsUser == 0:
        setters.append("pod")
    names = [
        c.name
        for c in _containers(spec)
        if c.securityContext is not None and c.securityContext.runAsUser == 0
    ]
    if names:
        setters.append(_named("container", names))
    if not setters:
        return None
    return CheckResult("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")


Check = Callable[[ObjectMeta, PodSpec], CheckResult | None]

# Registration order upstream is file-name order; overlapping baseline checks run only at
# the baseline level because a stricter restricted check replaces each of them.
_BASELINE: tuple[Check, ...] = (
    _app_armor,
    _host_namespaces,
    _host_ports,
    _host_probes,
    _privileged,
    _proc_mount,
    _selinux,
    _sysctls,
    _windows_host_process,
)
_BASELINE_ONLY: tuple[Check, ...] = (_capabilities_baseline, _host_path_volumes, _seccomp_baseline)
_RESTRICTED: tuple[Check, ...] = (
    _allow_privilege_escalation,
    _capabilities_restricted,
    _restricted_volumes,
    _run_as_non_root,
    _run_as_user,
    _seccomp_restricted,
)


def check_pod(pod: Pod, *, level: Level) -> list[CheckResult]:
    """The checks ``pod`` fails at ``level`` (policy version ``latest``), in upstream order."""
    if level == "privileged" or pod.spec is None:
        return []
    checks = _BASELINE + (_BASELINE_ONLY if level == "baseline" else _RESTRICTED)
    meta = pod.metadata or ObjectMeta()
    return [r for r in (check(meta, pod.spec) for check in checks) if r is not None]


def violation_message(level: Level, results: Sequence[CheckResult]) -> str:
    """``violates PodSecurity "<level>:latest": reason (detail), reason (detail)``."""
    parts = [f"{r.reason} ({r.detail})" if r.detail else r.reason for r in results]
    return f'violates PodSecurity "{level}:latest": {", ".join(parts)}'
