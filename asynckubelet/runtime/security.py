"""The pod's and container's ``securityContext`` as Docker settings, and runAsNonRoot.

The container's fields override the pod's (the kubelet's
``DetermineEffectiveSecurityContext``). The result is cri-dockerd's translation:
capabilities to ``CapAdd``/``CapDrop``, ``allowPrivilegeEscalation: false`` to
``no-new-privileges``, seccomp profiles to ``seccomp=`` options, AppArmor profiles to
``apparmor=`` options (``RuntimeDefault`` is the engine's own), supplemental groups and
``fsGroup`` to ``GroupAdd``, ``seLinuxOptions`` to ``label=user:``/``role:``/``type:``/
``level:`` options (the sandbox gets the pod's), and ``procMount: Unmasked`` to empty
``MaskedPaths`` and ``ReadonlyPaths`` (``Default`` leaves the engine's lists, as the kubelet
sends none). The pod's Pod Security level was checked when the manifest was admitted;
this module only carries out what was admitted.

A container whose pod and container set no seccomp profile gets ``RuntimeDefault``, the
engine's own profile (no ``seccomp=`` option at all, as cri-dockerd sends for it), as on a
kubelet with ``--seccomp-default``; the node turns that on by default, since a plain
``docker run`` is filtered too. With the default off (``seccomp_default=False``) such a
container is ``Unconfined``, the kubelet's behaviour without the flag. The setting is not
part of the container's spec hash (:func:`~asynckubelet.runtime.naming.hash_container`
hashes the manifest's container only), so changing it restarts nothing: a container
keeps the profile it was created with until it is created again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube.models.core_v1 import Container, Pod, SELinuxOptions

from asynckubelet import errors
from asynckubelet.docker.types import HostConfig
from asynckubelet.manifests.messages import go_quote, shown

DEFAULT_SECCOMP_ROOT = Path("/var/lib/asynckubelet/seccomp")
"""Where ``Localhost`` seccomp profiles are looked up (the kubelet's ``<root>/seccomp``)."""


@dataclass(frozen=True)
class Effective:
    """The fields of the effective security context this module uses."""

    run_as_user: int | None
    run_as_group: int | None
    run_as_non_root: bool | None
    privileged: bool
    read_only_root: bool
    allow_privilege_escalation: bool | None
    cap_add: tuple[str, ...]
    cap_drop: tuple[str, ...]
    seccomp_type: str | None
    seccomp_localhost: str | None
    apparmor_type: str | None = None
    apparmor_localhost: str | None = None
    proc_mount: str | None = None
    selinux: SELinuxOptions | None = None


def effective(pod: Pod, container: Container) -> Effective:
    """The kubelet's ``DetermineEffectiveSecurityContext``: container over pod."""
    psc: Any = pod.spec.securityContext if pod.spec is not None else None
    csc: Any = container.securityContext

    def pick(name: str) -> Any:
        value = getattr(csc, name, None) if csc is not None else None
        if value is None and psc is not None:
            value = getattr(psc, name, None)
        return value

    caps = csc.capabilities if csc is not None else None
    seccomp = pick("seccompProfile")
    apparmor = pick("appArmorProfile")
    return Effective(
        run_as_user=pick("runAsUser"),
        run_as_group=pick("runAsGroup"),
        run_as_non_root=pick("runAsNonRoot"),
        privileged=bool(csc is not None and csc.privileged),
        read_only_root=bool(csc is not None and csc.readOnlyRootFilesystem),
        allow_privilege_escalation=csc.allowPrivilegeEscalation if csc is not None else None,
        cap_add=tuple(caps.add or []) if caps is not None else (),
        cap_drop=tuple(caps.drop or []) if caps is not None else (),
        seccomp_type=seccomp.type if seccomp is not None else None,
        seccomp_localhost=seccomp.localhostProfile if seccomp is not None else None,
        apparmor_type=apparmor.type if apparmor is not None else None,
        apparmor_localhost=apparmor.localhostProfile if apparmor is not None else None,
        proc_mount=csc.procMount if csc is not None else None,
        selinux=pick("seLinuxOptions"),
    )


def _pod_ref(pod: Pod) -> str:
    meta = pod.metadata
    assert meta is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
    return f"{meta.name}_{meta.namespace or 'default'}({meta.uid or ''})"


def image_user(config_user: str) -> tuple[int | None, str]:
    """(uid, username) of an image's ``User``: ``""`` is root, a name has no uid."""
    user = config_user.split(":", 1)[0]
    if user == "":
        return 0, ""
    if user.isdigit():
        return int(user), ""
    return None, user


def verify_run_as_non_root(pod: Pod, container: Container, *, image_user_field: str) -> None:
    """The kubelet's ``verifyRunAsNonRoot``; raises ``ContainerConfigError`` with its text."""
    eff = effective(pod, container)
    if not eff.run_as_non_root:
        return
    ref = f'(pod: "{_pod_ref(pod)}", container: {container.name})'
    if eff.run_as_user is not None:
        if eff.run_as_user == 0:
            raise errors.ContainerConfigError(f"container's runAsUser breaks non-root policy {ref}")
        return
    uid, name = image_user(image_user_field)
    if uid == 0:
        raise errors.ContainerConfigError(
            f"container has runAsNonRoot and image will run as root {ref}"
        )
    if uid is None and name:
        raise errors.ContainerConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({name}), "
            f"cannot verify user is non-root {ref}"
        )


def _cap(name: str) -> str:
    return name if name.upper() == "ALL" or name.upper().startswith("CAP_") else f"CAP_{name}"


def _seccomp_option(eff: Effective, seccomp_root: Path, *, default: bool) -> str:
    kind = eff.seccomp_type or ("RuntimeDefault" if default else "Unconfined")
    if kind == "RuntimeDefault":
        return ""
    if kind == "Localhost":
        path = localhost_seccomp_path(seccomp_root, eff.seccomp_localhost)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror or str(e) if isinstance(e, OSError) else "not UTF-8 text"
            raise errors.ContainerConfigError(
                f'cannot load seccomp profile "{path}": {why.lower()}'
            ) from e
        try:
            profile = json.loads(text)
        except ValueError:
            profile = None
        if not isinstance(profile, dict):
            # Docker reads "seccomp=unconfined" as no filter at all: only a JSON profile
            # may pass.
            raise errors.ContainerConfigError(
                f'cannot load seccomp profile "{path}": not a JSON seccomp profile'
            )
        return f"seccomp={text}"
    return "seccomp=unconfined"


def localhost_seccomp_path(root: Path, profile: str | None) -> Path:
    """The file a ``Localhost`` seccomp profile names: a relative path of printable
    characters that stays under ``root`` once resolved (validation refused the rest; this
    is the same rule where the file is opened)."""
    name = profile or ""
    bad = not name or not name.isprintable() or name.startswith("/") or ".." in name.split("/")
    path = root / name
    if not bad:
        resolved_root = root.resolve()
        bad = not path.resolve().is_relative_to(resolved_root) or path.resolve() == resolved_root
    if bad:
        raise errors.ContainerConfigError(
            f"seccomp localhostProfile {go_quote(shown(name, 64))} is not a profile under {root}"
        )
    return path


def apparmor_option(eff: Effective) -> str | None:
    """``apparmor=<profile>`` for the engine, or None for the engine's default. The name of
    a ``Localhost`` profile is one printable word, and never ``unconfined``, Docker's name for
    no profile (the type ``Unconfined`` says that, and Pod Security sees it)."""
    if eff.apparmor_type == "Unconfined":
        return "apparmor=unconfined"
    if eff.apparmor_type != "Localhost" or not eff.apparmor_localhost:
        return None
    name = eff.apparmor_localhost
    if not name.isprintable() or any(ch.isspace() for ch in name) or name == "unconfined":
        raise errors.ContainerConfigError(
            f"AppArmor localhostProfile {go_quote(shown(name, 64))} is not a profile name"
        )
    return f"apparmor={name}"


def selinux_options(options: SELinuxOptions | None) -> list[str]:
    """cri-dockerd's ``addSELinuxOptions``: one ``label=<field>:<value>`` per field set."""
    if options is None:
        return []
    fields = (
        ("user", options.user),
        ("role", options.role),
        ("type", options.type),
        ("level", options.level),
    )
    return [f"label={name}:{value}" for name, value in fields if value]


def sandbox_security_options(pod: Pod) -> list[str]:
    """The pod-level ``seLinuxOptions`` of the sandbox (cri-dockerd's sandbox context)."""
    psc = pod.spec.securityContext if pod.spec is not None else None
    return selinux_options(psc.seLinuxOptions if psc is not None else None)


def host_config_security(  # noqa: C901  (mirrors cri-dockerd's security context to HostConfig)
    pod: Pod,
    container: Container,
    *,
    seccomp_root: Path = DEFAULT_SECCOMP_ROOT,
    seccomp_default: bool = True,
) -> HostConfig:
    """Docker ``HostConfig`` entries for the effective security context. ``seccomp_default``
    gives a container without a seccomp profile ``RuntimeDefault`` (else ``Unconfined``)."""
    eff = effective(pod, container)
    host: HostConfig = {}
    if eff.privileged:
        host["Privileged"] = True
    if eff.cap_add:
        host["CapAdd"] = [_cap(c) for c in eff.cap_add]
    if eff.cap_drop:
        host["CapDrop"] = [_cap(c) for c in eff.cap_drop]
    if eff.read_only_root:
        host["ReadonlyRootfs"] = True
    options: list[str] = []
    if eff.allow_privilege_escalation is False:
        options.append("no-new-privileges")
    if not eff.privileged:
        seccomp = _seccomp_option(eff, seccomp_root, default=seccomp_default)
        if seccomp:
            options.append(seccomp)
        apparmor = apparmor_option(eff)
        if apparmor is not None:
            options.append(apparmor)
    options.extend(selinux_options(eff.selinux))
    if options:
        host["SecurityOpt"] = options
    if eff.proc_mount == "Unmasked" and not eff.privileged:
        host["MaskedPaths"] = []
        host["ReadonlyPaths"] = []
    psc = pod.spec.securityContext if pod.spec is not None else None
    groups: list[str] = []
    if psc is not None:
        if psc.fsGroup is not None:
            groups.append(str(psc.fsGroup))
        groups.extend(str(g) for g in psc.supplementalGroups or [])
    if groups:
        host["GroupAdd"] = list(dict.fromkeys(groups))
    return host


__all__ = [
    "apparmor_option",
    "effective",
    "host_config_security",
    "image_user",
    "localhost_seccomp_path",
    "sandbox_security_options",
    "selinux_options",
    "verify_run_as_non_root",
]
