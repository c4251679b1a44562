"""When a pod worker looks at its pod again without being told: the back-offs, waits,
deadlines and periodic checks that fall due with no change for Docker, a probe or the
pod's source to report (:func:`next_wake`), and the facts a worker reads off a pod's
runtime status to report it (its first failed container's exit code, the IPs a finished
pod keeps)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from lightkube.models.core_v1 import Container, Pod, PodStatus

from asynckubelet.runtime import actions
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

TERMINAL_PHASES = ("Succeeded", "Failed")
WAITING_RETRY = 1.0
"""Seconds after which a pod with a container still waiting (not in a back-off whose end
is known) is looked at again: a start that failed, a mount that is not there yet."""
VOLUME_RESYNC = 60.0
"""Seconds between syncs of a pod with a service-account token volume, so the token is
refreshed before it expires (the kubelet's sync frequency)."""
PODINITIALIZING = "PodInitializing"
MEMORY = "Memory"
EVICTION_INTERVAL = 10.0
"""Seconds between emptyDir usage checks (the kubelet's eviction monitoring period)."""


def keep_pod_ips(status: PodStatus, before: PodStatus | None) -> None:
    """A finished pod keeps the IPs it had once its sandbox is stopped (they show in
    ``kubectl get pods -o wide``, as a cluster's kubelet reports them)."""
    if status.podIP or before is None or not before.podIP:
        return
    status.podIP = before.podIP
    status.podIPs = list(before.podIPs or [])


def first_failure_exit_code(runtime: PodRuntimeStatus) -> int:
    failed = [
        c
        for c in runtime.containers
        if c.state is ContainerState.EXITED and c.exit_code != 0 and c.finished_at is not None
    ]
    if not failed:
        return 0
    return min(failed, key=lambda c: c.finished_at or c.created_at).exit_code


def next_wake(
    pod: Pod,
    status: PodStatus,
    runtime: PodRuntimeStatus,
    *,
    waiting: Mapping[str, str] | None = None,
    backoff: backoff_mod.Backoff,
    image_backoff: backoff_mod.Backoff,
    now: datetime,
    eviction_check: bool = False,
) -> float | None:
    """Seconds until a pod worker must look at its pod again though nothing reported a
    change; None when nothing is due (Docker's events, probe results and the pod's source
    will wake it). ``waiting`` maps a container name to the reason the latest sync left it
    waiting for (``CrashLoopBackOff``...), newer than ``status``, which was made before it.

    Due are: the end of a crash-loop or image-pull back-off (an image-pull back-off the
    status does not show yet: a look after ``WAITING_RETRY``, which shows it); a look
    after ``WAITING_RETRY``
    while another container waits (a failed start, a mount not there yet), unless it waits
    for an init container that runs; the pod's ``activeDeadlineSeconds``; the
    emptyDir size check every ``EVICTION_INTERVAL`` when ``eviction_check`` says the pod
    has a limited disk emptyDir; a sync every ``VOLUME_RESYNC`` for a pod with a
    service-account token volume. A pod in a terminal phase has nothing due.
    """
    if status.phase in TERMINAL_PHASES or pod.spec is None:
        return None
    spec = pod.spec
    uid = ctr.pod_identity(pod)[2]
    due: list[float] = []
    ephemeral = actions.ephemeral_containers(pod)
    specs = {c.name: c for c in [*(spec.initContainers or []), *spec.containers, *ephemeral]}
    reasons: dict[str, str] = {}
    for cs in [
        *(status.initContainerStatuses or []),
        *(status.containerStatuses or []),
        *(status.ephemeralContainerStatuses or []),
    ]:
        if cs.state is not None and cs.state.waiting is not None:
            reasons[cs.name] = cs.state.waiting.reason or ""
    shown = dict(reasons)
    reasons.update(waiting or {})
    for name, reason in reasons.items():
        container = specs.get(name)
        if container is None:
            continue
        seconds = _waiting_due(
            reason,
            container,
            shown=shown.get(name),
            uid=uid,
            runtime=runtime,
            backoff=backoff,
            image_backoff=image_backoff,
            now=now,
        )
        if seconds is not None:
            due.append(seconds)
    if spec.activeDeadlineSeconds is not None and status.startTime is not None:
        deadline = status.startTime + timedelta(seconds=spec.activeDeadlineSeconds)
        due.append((deadline - now).total_seconds())
    if eviction_check and any(
        v.emptyDir is not None and v.emptyDir.sizeLimit is not None and v.emptyDir.medium != MEMORY
        for v in spec.volumes or []
    ):
        due.append(EVICTION_INTERVAL)
    if any(
        s.serviceAccountToken is not None
        for v in spec.volumes or []
        if v.projected is not None
        for s in v.projected.sources or []
    ):
        due.append(VOLUME_RESYNC)
    if not due:
        return None
    return max(min(due), 0.0)


def _waiting_due(
    reason: str,
    container: Container,
    *,
    shown: str | None,
    uid: str,
    runtime: PodRuntimeStatus,
    backoff: backoff_mod.Backoff,
    image_backoff: backoff_mod.Backoff,
    now: datetime,
) -> float | None:
    """Seconds until a container waiting for ``reason`` (the status shows ``shown``) is
    due to be looked at again; None: nothing is due for it."""
    if reason == backoff_mod.IMAGE_PULL_BACK_OFF and shown != reason:
        # The status still shows the pull that failed (ErrImagePull): the back-off is
        # shown at the next look, as the kubelet's next sync shows it, and stays shown
        # until it ends.
        return WAITING_RETRY
    until = _back_off_end(
        reason,
        container,
        uid=uid,
        runtime=runtime,
        backoff=backoff,
        image_backoff=image_backoff,
    )
    if until is not None:
        return (until - now).total_seconds()
    if reason == PODINITIALIZING and _init_runs(runtime):
        return None
    return WAITING_RETRY


def _init_runs(runtime: PodRuntimeStatus) -> bool:
    """A container of the pod runs: an init container that others wait for, whose exit
    Docker reports."""
    return any(c.state is ContainerState.RUNNING for c in runtime.containers)


def _back_off_end(
    reason: str,
    container: Container,
    *,
    uid: str,
    runtime: PodRuntimeStatus,
    backoff: backoff_mod.Backoff,
    image_backoff: backoff_mod.Backoff,
) -> datetime | None:
    """When the back-off a container waits in ends, as the runtime will judge it."""
    if reason == backoff_mod.CRASH_LOOP_BACK_OFF:
        dead = _newest_exited(runtime, container.name)
        delay = backoff.get(backoff_mod.crash_loop_key(pod_uid=uid, container=container))
        if dead is None or not delay:
            return None
        began = dead.finished_at or dead.started_at or dead.created_at
        return began + timedelta(seconds=delay)
    if reason == backoff_mod.IMAGE_PULL_BACK_OFF and container.image:
        return image_backoff.until(backoff_mod.image_pull_key(pod_uid=uid, image=container.image))
    return None


def _newest_exited(runtime: PodRuntimeStatus, name: str) -> ContainerStatus | None:
    return next(
        (c for c in runtime.containers if c.name == name and c.state is ContainerState.EXITED),
        None,
    )


__all__ = [
    "EVICTION_INTERVAL",
    "MEMORY",
    "PODINITIALIZING",
    "TERMINAL_PHASES",
    "VOLUME_RESYNC",
    "WAITING_RETRY",
    "first_failure_exit_code",
    "keep_pod_ips",
    "next_wake",
]
