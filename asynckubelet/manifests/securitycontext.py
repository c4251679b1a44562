"""Pod and container security contexts as ``ValidatePod`` checks them.

Seccomp and AppArmor profiles name files and options handed to the engine, and user and
group IDs become the processes' identities, so each is checked for shape and range before
the node uses it (which Pod Security level allows it is :mod:`~asynckubelet.manifests.
security`'s question). Mirrors the security-context part of
``pkg/apis/core/validation/validation.go`` (``ValidateSecurityContext``,
``validatePodSecurityContext``, ``validateSeccompProfileField``,
``ValidateAppArmorProfileField``).
"""

from __future__ import annotations

from lightkube.models.core_v1 import AppArmorProfile, PodSpec, SeccompProfile, SecurityContext

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import invalid, not_supported, range_error, required, too_long
from asynckubelet.manifests.volumes import validate_local_descending_path

_INT32_MAX = 2**31 - 1
_CONTROL = "must not contain control characters"
_PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_MAX_APPARMOR_PROFILE = 4095


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
