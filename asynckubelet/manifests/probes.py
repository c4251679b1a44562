"""A container's probes and lifecycle hooks as ``ValidatePod`` checks them.

The prober and the hook runner act on exactly one handler with a valid port and sane
timings, so a probe or hook that names none, several, or a port no socket can have is
refused up front. Mirrors the probe and lifecycle part of
``pkg/apis/core/validation/validation.go`` (``validateProbe``, ``validateLifecycle``,
``validateHandler``, ``validateSleepAction``, ``validateHTTPGetAction``,
``ValidatePortNumOrName``, ``validateStopSignal``).

A container's ``stopSignal`` is checked against the pod's ``spec.os.name``, as the API
server does: it needs that name set, so a signal is only ever given for the system it
means something on, and it must be one of the signals that system knows.
"""

from __future__ import annotations

from lightkube.models.core_v1 import HTTPGetAction, Lifecycle, LifecycleHandler, PodOS, Probe

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

STOP_SIGNALS_LINUX = frozenset(
    {
        *(
            f"SIG{name}"
            for name in [
                "ABRT",
                "ALRM",
                "BUS",
                "CHLD",
                "CLD",
                "CONT",
                "FPE",
                "HUP",
                "ILL",
                "INT",
                "IO",
                "IOT",
                "KILL",
                "PIPE",
                "POLL",
                "PROF",
                "PWR",
                "QUIT",
                "SEGV",
                "STKFLT",
                "STOP",
                "SYS",
                "TERM",
                "TRAP",
                "TSTP",
                "TTIN",
                "TTOU",
                "URG",
                "USR1",
                "USR2",
                "VTALRM",
                "WINCH",
                "XCPU",
                "XFSZ",
                "RTMIN",
                "RTMAX",
            ]
        ),
        *(f"SIGRTMIN+{n}" for n in range(1, 16)),
        *(f"SIGRTMAX-{n}" for n in range(1, 15)),
    }
)
"""The stop signals a Linux pod may name (upstream's ``supportedStopSignalsLinux``)."""
STOP_SIGNALS_WINDOWS = frozenset({"SIGKILL", "SIGTERM"})


def _validate_lifecycle(
    lifecycle: Lifecycle,
    grace: int | None,
    path: str,
    errs: list[FieldError],
    *,
    pod_os: PodOS | None,
) -> None:
    for hook in ("postStart", "preStop"):
        handler: LifecycleHandler | None = getattr(lifecycle, hook)
        if handler is not None:
            _validate_handler(handler, grace, f"{path}.{hook}", errs)
    if lifecycle.stopSignal is not None:
        _validate_stop_signal(lifecycle.stopSignal, f"{path}.stopSignal", errs, pod_os=pod_os)


def _validate_stop_signal(
    signal: str, path: str, errs: list[FieldError], *, pod_os: PodOS | None
) -> None:
    if pod_os is None:
        errs.append(forbidden(path, "may not be set for containers with empty `spec.os.name`"))
        return
    supported = {"linux": STOP_SIGNALS_LINUX, "windows": STOP_SIGNALS_WINDOWS}.get(pod_os.name)
    if supported is not None and signal not in supported:
        errs.append(not_supported(path, signal, sorted(supported)))


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
