"""A container's probes and lifecycle hooks as ``ValidatePod`` checks them.

The prober and the hook runner act on exactly one handler with a valid port and sane
timings, so a probe or hook that names none, several, or a port no socket can have is
refused up front. Mirrors the probe and lifecycle part of
``pkg/apis/core/validation/validation.go`` (``validateProbe``, ``validateLifecycle``,
``validateHandler``, ``validateHTTPGetAction``, ``ValidatePortNumOrName``).
"""

from __future__ import annotations

from lightkube.models.core_v1 import HTTPGetAction, Lifecycle, LifecycleHandler, Probe

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    forbidden,
    invalid,
    is_valid_port_name,
    is_valid_port_num,
    not_supported,
    required,
)

_NEGATIVE = "must be greater than or equal to 0"


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
