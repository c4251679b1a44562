"""Running pods in the foreground: one pod worker per pod, woken by Docker's events.

``asynckubelet run`` and library users who want "run these pods, show their output, tell
me how they ended" use :func:`run_pods`. Each pod gets the kubelet's loop in miniature:
read the pod's state from Docker, turn it into a Kubernetes ``PodStatus``, stop when the
phase is terminal, otherwise ``sync_pod`` and sleep until Docker reports a change for the
pod. A worker sets itself a timer only when something is due without a change to report
it (:func:`next_wake`: a back-off that expires, a container still waiting, the active
deadline, an emptyDir size check, a token refresh); a pod that runs as it should costs
nothing until Docker, a probe or its source says something changed. Each container instance
gets a log follower as soon as it is seen, so no output is lost, not even a crashed
attempt's. A pod that ends by itself has all of its output shown; a pod stopped from
outside (a signal, a failure) has its output shown while its containers stop, and what
they left unread for at most :data:`LOG_DRAIN` seconds after; output nobody reads any more
(a closed stdout) is not followed at all. A pod with ``schedulingGates`` of which nothing
runs yet is not started: it stays Pending with the API server's ``SchedulingGated``
condition until an update of the pod removes the gates (no scheduler would bind it
before).
"""

from __future__ import annotations

import base64
import copy
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Container, Pod, PodStatus

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import LogLine
from asynckubelet.manifests import Manifests
from asynckubelet.node.pleg import OUTDATING_ACTIONS
from asynckubelet.node.prober import Prober, has_probes
from asynckubelet.node.status import (
    DEADLINE_EXCEEDED,
    DEADLINE_EXCEEDED_MESSAGE,
    gated_status,
    generate,
    is_scheduling_gated,
)
from asynckubelet.node.volumes import VolumeManager
from asynckubelet.runtime import actions, naming
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.manager import RuntimeManager
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
)

LogSink = Callable[[Pod, str, LogLine], None]
StatusSink = Callable[[Pod, PodStatus], None]
StopHook = Callable[[Pod], Awaitable[None]]
"""Awaited before a running pod is stopped for good (what sends traffic to it lets go)."""
STOP_HOOK_TIMEOUT = 5.0
"""At most this long is spent in the stop hook before the pod is stopped anyway."""
TERMINAL_PHASES = ("Succeeded", "Failed")
WAITING_RETRY = 1.0
"""Seconds after which a pod with a container still waiting (not in a back-off whose end
is known) is looked at again: a start that failed, a mount that is not there yet."""
VOLUME_RESYNC = 60.0
"""Seconds between syncs of a pod with a service-account token volume, so the token is
refreshed before it expires (the kubelet's sync frequency)."""
PODINITIALIZING = "PodInitializing"
MEMORY = "Memory"
FAILURE_PAUSE = (0.1, 1.0)
"""Seconds a worker waits after a sync whose Docker operations failed: first, longest."""
SYNC_ERROR_PAUSE = (1.0, 10.0)
"""Seconds a worker waits after a sync that raised an unexpected error: first, longest
(the kubelet's pod workers retry such a pod after 10 s)."""
FAILED_SYNC = "FailedSync"
MAX_ERROR_TEXT = 300
EVICTION_INTERVAL = 10.0
"""Seconds between emptyDir usage checks (the kubelet's eviction monitoring period)."""
LOG_DRAIN = 2.0
"""Seconds a stopped pod's log followers may still read what its containers printed once
they are stopped and removed (a container that printed fast may leave millions of lines
unread); then they are cancelled."""


@dataclass
class PodOutcome:
    """How a pod's run ended."""

    pod: Pod
    status: PodStatus | None = None
    exit_code: int = 0
    """The first non-zero exit code among the pod's containers (by finish time), else 0."""
    stopped: bool = False
    """True when the run was stopped (signal, cancel) before the pod reached a terminal phase."""
    error: str = ""

    @property
    def phase(self) -> str:
        return (self.status.phase if self.status else None) or "Unknown"


@dataclass
class RunOptions:
    keep: bool = False
    """Leave the pod's containers on Docker after the run."""
    grace_period: float | None = None
    contexts: dict[str, PodContext] = field(default_factory=dict)
    """Per pod uid: ConfigMaps, Secrets and addresses the pod's env may refer to."""
    pull_secrets: dict[str, list[tuple[str, dict[str, bytes]]]] = field(default_factory=dict)


def pod_context(manifests: Manifests, pod: Pod, *, node_name: str) -> PodContext:
    """The ConfigMaps and Secrets of the pod's namespace, for its environment and volumes."""
    ns = (pod.metadata.namespace if pod.metadata else None) or "default"
    configmaps: dict[str, dict[str, str]] = {}
    binary: dict[str, dict[str, bytes]] = {}
    for cm in manifests.configmaps:
        if cm.metadata is not None and (cm.metadata.namespace or "default") == ns:
            configmaps[cm.metadata.name or ""] = dict(cm.data or {})
            binary[cm.metadata.name or ""] = {
                k: base64.b64decode(v) for k, v in (cm.binaryData or {}).items()
            }
    secrets = {name: dict(data) for (sns, name), data in manifests.secret_data.items() if sns == ns}
    return PodContext(
        node_name=node_name, configmaps=configmaps, binary_configmaps=binary, secrets=secrets
    )


def pull_secrets(manifests: Manifests, pod: Pod) -> list[tuple[str, dict[str, bytes]]]:
    """``(type, data)`` of the pod's ``imagePullSecrets`` found among the manifests."""
    ns = (pod.metadata.namespace if pod.metadata else None) or "default"
    types = {
        ((s.metadata.namespace or "default"), s.metadata.name or ""): s.type or "Opaque"
        for s in manifests.secrets
        if s.metadata is not None
    }
    found = []
    for ref in (pod.spec.imagePullSecrets if pod.spec else None) or []:
        key = (ns, ref.name or "")
        if key in manifests.secret_data:
            found.append((types.get(key, "Opaque"), dict(manifests.secret_data[key])))
    return found


def options_from_manifests(
    manifests: Manifests,
    *,
    node_name: str,
    keep: bool = False,
    grace_period: float | None = None,
) -> RunOptions:
    """Run options carrying each pod's ConfigMaps, Secrets and pull secrets."""
    options = RunOptions(keep=keep, grace_period=grace_period)
    for pod in manifests.pods:
        uid = (pod.metadata.uid if pod.metadata else None) or ""
        options.contexts[uid] = pod_context(manifests, pod, node_name=node_name)
        options.pull_secrets[uid] = pull_secrets(manifests, pod)
    return options


def _keep_pod_ips(status: PodStatus, before: PodStatus | None) -> None:
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
    specs = {c.name: c for c in [*(spec.initContainers or []), *spec.containers]}
    reasons: dict[str, str] = {}
    for cs in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
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


class PodWorker:
    """Drives one pod until it ends or ``stop`` is set."""

    def __init__(
        self,
        rm: RuntimeManager,
        pod: Pod,
        *,
        on_log: LogSink | None = None,
        on_status: StatusSink | None = None,
        options: RunOptions | None = None,
        own_events: bool = True,
        exit_on_terminal: bool = True,
        resync_interval: float | None = None,
        host_ips: Sequence[str] = (),
        output_closed: anyio.Event | None = None,
    ) -> None:
        self.rm = rm
        self.output_closed = output_closed
        """Set when nobody reads the pod's output any more (a closed stdout): its logs stop
        being followed at once and ``on_log`` is not called again (:meth:`stop_following`)."""
        self.host_ips = tuple(host_ips)
        """The node's addresses, for ``status.hostIP(s)`` (a host-network pod's IPs too)."""
        self.pod = pod
        self.own_events = own_events
        """Watch Docker's events for this pod itself (False: a PLEG calls :meth:`poke`)."""
        self.exit_on_terminal = exit_on_terminal
        """Return once the phase is terminal (False: stay, idle, until stopped)."""
        self.resync_interval = resync_interval
        """Seconds after which the worker looks again in any case; None: only when due."""
        self.next_wake: float | None = None
        """Seconds the worker last set itself to wait before looking again (None: until
        woken)."""
        self.leave_running = False
        """When stopped, leave the pod's containers as they are (for a later adoption)."""
        self.report_stopped = False
        """When stopped, report the pod's status once its containers are stopped and before
        they are removed, as the kubelet's ``SyncTerminatingPod`` does: their end states
        and exit codes, and a terminal phase (a node's deleted pod shows its end before it
        goes)."""
        self.static = False
        """A static pod (from the manifest directory): its stopped status keeps a phase
        that is not terminal, as the kubelet's ``getPhase`` leaves static pods'."""
        self.nothing_on_docker = False
        """Docker holds no container of this pod, as its owner knows: its first look at the
        pod then asks Docker nothing (a list of the pod's containers costs the engine a walk
        over all of its containers). Cleared by that first look."""
        self.removed = False
        """The worker removed the pod's containers when it ended."""
        self.before_stop: StopHook | None = None
        """Awaited (at most :data:`STOP_HOOK_TIMEOUT`) before the pod's containers are
        stopped when the worker ends: a Service sends no new connection to a pod from the
        moment its preStop hook or SIGTERM may end its serving."""
        self.name, self.namespace, self.uid = ctr.pod_identity(pod)
        self.on_log = on_log
        self.on_status = on_status
        self.options = options or RunOptions()
        self.backoff = backoff_mod.Backoff()
        self.image_backoff = backoff_mod.Backoff()
        self.wake = anyio.Event()
        self.followed: set[str] = set()
        self.outcome = PodOutcome(pod=pod)
        self.prober = Prober(
            docker=rm.docker, events=rm.events, on_change=self.poke, locate=rm.hook_target
        )
        self._next_eviction = 0.0
        self._failure_pause = 0.0
        self.log_drain = LOG_DRAIN
        """Seconds the log followers may still read once a stopped pod is stopped and
        removed (:data:`LOG_DRAIN`); a pod that ended by itself has all of its output read."""
        self._logs: anyio.abc.TaskGroup | None = None
        self._followers_deadline = math.inf
        self._no_new_followers = anyio.Event()
        self._silenced = False
        self._ended: PodRuntimeStatus | None = None
        """What Docker held of the pod when its worker saw it end by itself, nothing of it
        running."""

    def poke(self) -> None:
        """Something about the pod changed: look again now."""
        self.wake.set()

    def update(self, pod: Pod) -> None:
        """A new desired state for the same pod (UID); the next iteration syncs to it."""
        self.pod = pod
        self.outcome.pod = pod
        self.wake.set()

    async def run(self, stop: anyio.Event) -> PodOutcome:
        """Drive the pod until it ends or ``stop`` is set, then stop and remove it.

        Its containers' output reaches ``on_log`` as it is printed, while they stop too.
        Once a stopped pod is stopped and removed, the followers may read what is left for
        :attr:`log_drain` seconds at most; a pod that ended by itself has all of its output
        read before its containers are removed, unless ``stop`` is set meanwhile (then
        :attr:`log_drain` seconds more).
        :meth:`stop_following` ends the following sooner.
        """
        async with anyio.create_task_group() as tg:
            followers_done = anyio.Event()
            logs: anyio.abc.TaskGroup = tg
            if self.on_log is None:
                # Nobody reads the output (a node's pods): no follower is ever started.
                followers_done.set()
            else:
                logs = await tg.start(
                    self._host_followers, followers_done, name=f"logs {self.namespace}/{self.name}"
                )
                self._logs = logs
            if self.output_closed is not None:
                tg.start_soon(
                    self._stop_following_on,
                    self.output_closed,
                    name=f"output closed {self.namespace}/{self.name}",
                )
            try:
                async with anyio.create_task_group() as inner:
                    if has_probes(self.pod):
                        await inner.start(
                            self.prober.run, name=f"prober {self.namespace}/{self.name}"
                        )
                    inner.start_soon(
                        self._wake_on_stop, stop, name=f"stop {self.namespace}/{self.name}"
                    )
                    if self.own_events:
                        inner.start_soon(
                            self._watch_events, name=f"pleg {self.namespace}/{self.name}"
                        )
                    try:
                        await self._loop(stop, logs)
                    finally:
                        inner.cancel_scope.cancel()
                if not self.outcome.stopped:
                    # A pod that ended by itself has its output read whole before its
                    # containers are removed: a follower started by the last status read
                    # may not have opened its stream yet, and a removed container's
                    # output is gone.
                    self.stop_following(within=None)
                    await _first_set(followers_done, stop)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._finish(stop)
            self.stop_following(within=self.log_drain)
            await followers_done.wait()
            tg.cancel_scope.cancel()
        return self.outcome

    async def _stop_following_on(self, event: anyio.Event) -> None:
        await event.wait()
        self.stop_following()

    def stop_following(self, *, within: float | None = 0.0) -> None:
        """No new log follower starts, and those following end when their containers'
        output ends or ``within`` seconds from now, whichever comes first (None: no bound;
        0: at once, and ``on_log`` is not called again: nobody reads the output any more).
        A later call never extends an earlier bound."""
        self._no_new_followers.set()
        if within is None:
            return
        if within <= 0:
            self._silenced = True
        self._followers_deadline = min(
            self._followers_deadline, anyio.current_time() + max(within, 0.0)
        )
        if self._logs is not None:
            self._bound_followers(self._logs)

    def _unread(self) -> bool:
        """Nobody reads the pod's output any more."""
        return self._silenced or (self.output_closed is not None and self.output_closed.is_set())

    def _bound_followers(self, logs: anyio.abc.TaskGroup) -> None:
        if self._silenced:
            logs.cancel_scope.cancel()
        else:
            logs.cancel_scope.deadline = min(logs.cancel_scope.deadline, self._followers_deadline)

    async def _host_followers(
        self,
        done: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The log followers' task group, handed to :meth:`run`; open for new followers
        until :meth:`stop_following`, then ``done`` once each has ended (or was cut)."""
        try:
            async with anyio.create_task_group() as logs:
                self._bound_followers(logs)
                task_status.started(logs)
                await self._no_new_followers.wait()
        finally:
            done.set()

    async def _on_terminal(self, status: PodStatus, runtime: PodRuntimeStatus) -> bool:
        """A pod past its deadline has its containers killed; then the worker ends (``run``)
        or the pod releases its sandbox and waits. True: the worker ends."""
        if status.reason == DEADLINE_EXCEEDED and any(
            c.state is ContainerState.RUNNING for c in runtime.containers
        ):
            self.rm.events(
                self.pod,
                type="Normal",
                reason=DEADLINE_EXCEEDED,
                message=DEADLINE_EXCEEDED_MESSAGE,
            )
            await self.rm.kill_pod(self.pod, runtime)
        if self.exit_on_terminal:
            return True
        await self._release_sandbox(runtime)
        return False

    async def _loop(self, stop: anyio.Event, logs: anyio.abc.TaskGroup) -> None:
        result = PodSyncResult()
        previous: PodStatus | None = None
        while not stop.is_set():
            self.wake = anyio.Event()
            try:
                runtime = await self._look()
                if (
                    is_scheduling_gated(self.pod)
                    and not runtime.sandboxes
                    and not runtime.containers
                ):
                    previous = gated_status(self.pod, now=datetime.now(UTC), previous=previous)
                    self._report(previous)
                    await self._idle(None)
                    continue
                self._follow_new(runtime, logs)
                self.prober.update(self.pod, runtime)
                status = generate(
                    self.pod,
                    runtime,
                    readiness=self.prober.readiness(),
                    started=self.prober.started(),
                    waiting_reasons=result.waiting_reasons(),
                    previous=previous,
                    now=datetime.now(UTC),
                    host_ips=self.host_ips,
                )
                if status.phase not in TERMINAL_PHASES:
                    await self._evict_if_over_limit(status, runtime)
                if status.phase in TERMINAL_PHASES:
                    _keep_pod_ips(status, previous or self.pod.status)
                previous = status
                self.outcome.exit_code = first_failure_exit_code(runtime)
                self._report(status)
                if status.phase in TERMINAL_PHASES:
                    if await self._on_terminal(status, runtime):
                        if not any(c.state is ContainerState.RUNNING for c in runtime.containers):
                            self._ended = runtime
                        return
                    await self._idle(None)
                    continue
                result = await self._sync(runtime, status)
                if result.containers_reset:
                    self.wake.set()
                    continue
                await self.rm.garbage_collect(runtime)
            except errors.RuntimeUnavailable as e:
                # The engine is restarting or gone a while: the pod stays wanted, and the
                # worker looks again once Docker answers (the PLEG wakes it on reconnect).
                logger.bind(pod=f"{self.namespace}/{self.name}").warning(
                    "cannot reach the Docker engine; retrying: {}", e
                )
                await self._pause_after_failure(stop, failed=True)
                continue
            except Exception as e:
                self._sync_failed(e, previous)
                await self._pause_after_failure(stop, failed=True, pause=SYNC_ERROR_PAUSE)
                continue
            await self._pause_after_failure(stop, failed=result.failed_in_runtime())
            await self._idle(self._next_wake(status, runtime, result))
        self.outcome.stopped = True

    async def _look(self) -> PodRuntimeStatus:
        """What Docker holds of the pod (nothing, on the first look at a pod its owner
        knows Docker holds nothing of: :attr:`nothing_on_docker`)."""
        if self.nothing_on_docker:
            self.nothing_on_docker = False
            return PodRuntimeStatus(uid=self.uid, name=self.name, namespace=self.namespace)
        return await self.rm.get_pod_status(uid=self.uid, name=self.name, namespace=self.namespace)

    def _report(self, status: PodStatus) -> None:
        self.outcome.status = status
        if self.on_status is not None:
            self.on_status(self.pod, status)

    async def _sync(self, runtime: PodRuntimeStatus, status: PodStatus) -> PodSyncResult:
        """One ``sync_pod`` toward the spec, with the pod's context, pull secrets, back-offs
        and probe results."""
        return await self.rm.sync_pod(
            self.pod,
            runtime,
            context=self.options.contexts.get(self.uid) or PodContext(node_name=self.rm.node),
            pull_secrets=self.options.pull_secrets.get(self.uid, []),
            backoff=self.backoff,
            image_backoff=self.image_backoff,
            liveness=self.prober.liveness,
            startup=self.prober.startup,
            restart_all_containers=actions.should_all_containers_restart(self.pod, runtime, status),
        )

    def _next_wake(
        self, status: PodStatus, runtime: PodRuntimeStatus, result: PodSyncResult
    ) -> float | None:
        """When the worker must look again without being woken (None: only when woken)."""
        return next_wake(
            self.pod,
            status,
            runtime,
            waiting={name: reason for name, (reason, _) in result.waiting_reasons().items()},
            backoff=self.backoff,
            image_backoff=self.image_backoff,
            now=datetime.now(UTC),
            eviction_check=isinstance(self.rm.volumes, VolumeManager),
        )

    async def _release_sandbox(self, runtime: PodRuntimeStatus) -> None:
        """A finished pod's sandbox is stopped and its network (its IP) released, as the
        kubelet does once a pod reaches a terminal phase; its containers stay, for their
        logs, until the pod is removed."""
        if any(s.state is SandboxState.READY for s in runtime.sandboxes) or any(
            c.state is ContainerState.RUNNING for c in runtime.containers
        ):
            await self.rm.kill_pod(self.pod, runtime)

    async def _evict_if_over_limit(self, status: PodStatus, runtime: PodRuntimeStatus) -> None:
        """The eviction manager's emptyDir check, every ``EVICTION_INTERVAL`` seconds: a pod
        over a ``sizeLimit`` is killed at once and failed with reason ``Evicted``."""
        volumes = self.rm.volumes
        if not isinstance(volumes, VolumeManager) or anyio.current_time() < self._next_eviction:
            return
        self._next_eviction = anyio.current_time() + EVICTION_INTERVAL
        message = await volumes.empty_dir_over_limit(self.pod)
        if message is None:
            return
        self.rm.events(self.pod, type="Warning", reason="Evicted", message=message)
        status.phase, status.reason, status.message = "Failed", "Evicted", message
        await self.rm.kill_pod(self.pod, runtime, grace_period=0)

    def _sync_failed(self, error: Exception, previous: PodStatus | None) -> None:
        """An unexpected error in a sync: logged with its traceback, a ``FailedSync``
        Warning event, and the status reported with reason ``FailedSync`` and the error
        (until a sync succeeds again). The worker goes on, after a pause."""
        cause: BaseException = error
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        text = f"{type(cause).__name__}: {cause}"
        if len(text) > MAX_ERROR_TEXT:
            text = text[: MAX_ERROR_TEXT - 3] + "..."
        message = f"error syncing pod, will retry: {text}"
        logger.opt(exception=error).bind(pod=f"{self.namespace}/{self.name}").error("{}", message)
        try:
            self.rm.events(self.pod, type="Warning", reason=FAILED_SYNC, message=message)
            shown = copy.deepcopy(previous) if previous is not None else PodStatus()
            shown.phase = shown.phase or "Pending"
            shown.reason, shown.message = FAILED_SYNC, message
            self.outcome.status = shown
            if self.on_status is not None:
                self.on_status(self.pod, shown)
        except Exception:
            logger.opt(exception=True).error("reporting a failed sync of {} failed", self.name)

    async def _pause_after_failure(
        self, stop: anyio.Event, *, failed: bool, pause: tuple[float, float] = FAILURE_PAUSE
    ) -> None:
        """After a sync whose Docker operations failed, wait a little before the next, each
        time longer (``FAILURE_PAUSE``): a failing sandbox or container creation makes
        Docker events that would otherwise wake the worker into a tight retry loop."""
        if not failed:
            self._failure_pause = 0.0
            return
        first, longest = pause
        self._failure_pause = min(max(self._failure_pause * 2, first), longest)
        with anyio.move_on_after(self._failure_pause):
            await stop.wait()

    async def _idle(self, due: float | None) -> None:
        """Wait for a change of the pod or a stop (both set :attr:`wake`), or until ``due``
        seconds (or the resync interval) have passed, whichever comes first."""
        if self.resync_interval is not None:
            due = self.resync_interval if due is None else min(due, self.resync_interval)
        self.next_wake = due
        if self.wake.is_set():
            return
        with anyio.move_on_after(due):
            await self.wake.wait()

    async def _wake_on_stop(self, stop: anyio.Event) -> None:
        await stop.wait()
        self.poke()

    def _follow_new(self, runtime: PodRuntimeStatus, tg: anyio.abc.TaskGroup) -> None:
        for c in runtime.containers:
            if c.state is not ContainerState.CREATED:
                self._follow_from(c.id, c.name, tg)

    def _follow_from(self, container_id: str, container: str, tg: anyio.abc.TaskGroup) -> None:
        if self.on_log is None or container_id in self.followed or self._no_new_followers.is_set():
            return
        self.followed.add(container_id)
        tg.start_soon(self._follow, container_id, container, name=f"logs {self.name}/{container}")

    async def _follow(self, container_id: str, container: str) -> None:
        assert self.on_log is not None  # noqa: S101  (type narrowing: followed only when a log sink is set)
        try:
            async for line in self.rm.docker.logs(container_id, follow=True):
                if self._unread():
                    return
                self.on_log(self.pod, container, line)
        except errors.NotFound:
            pass
        except errors.DockerError as e:
            logger.warning("logs of {}/{} ended: {}", self.name, container, e)

    async def _watch_events(self) -> None:
        filters = {
            "type": ["container"],
            "label": [f"{naming.LABEL_POD_UID}={self.uid}", f"{naming.LABEL_NODE}={self.rm.node}"],
        }
        delay = 0.1
        while True:
            try:
                async for event in self.rm.docker.events(filters=filters):
                    delay = 0.1
                    actor = event.get("Actor") or {}
                    action = event.get("Action", "").split(":")[0]
                    if action in OUTDATING_ACTIONS:
                        self.rm.forget(str(actor.get("ID") or ""))
                    if action == "start":
                        self._follow_started(actor)
                    if action in ("start", "die", "oom", "destroy", "create"):
                        self.wake.set()
            except errors.DockerError as e:
                logger.debug("event stream for {} lost ({}); reconnecting", self.name, e)
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _follow_started(self, actor: dict[str, Any]) -> None:
        """Follow a container's output from its start event, without waiting for the next
        status read, so that its first line is shown as soon as it is printed."""
        labels = actor.get("Attributes") or {}
        container_id = str(actor.get("ID") or "")
        name = labels.get(naming.LABEL_CONTAINER_NAME)
        if labels.get(naming.LABEL_TYPE) != naming.TYPE_CONTAINER or not (container_id and name):
            return
        if self._logs is not None:
            self._follow_from(container_id, name, self._logs)

    async def _finish(self, stop: anyio.Event) -> None:
        """Stop the pod if it is still running, then remove it unless asked to keep it
        (with :attr:`report_stopped`, its stopped status reported in between)."""
        if self.leave_running:
            return
        try:
            # A pod seen ended by itself has nothing running and nothing starting again.
            runtime = self._ended or await self.rm.get_pod_status(
                uid=self.uid, name=self.name, namespace=self.namespace
            )
            running = any(c.state is ContainerState.RUNNING for c in runtime.containers)
            sandbox_up = any(s.state.value == "ready" for s in runtime.sandboxes)
            # A pod about to be removed whose containers have all ended needs no graceful
            # stop: removal tears its network down and removes the sandbox with the rest.
            if running and self.before_stop is not None:
                with anyio.move_on_after(STOP_HOOK_TIMEOUT):
                    await self.before_stop(self.pod)
            if running or (sandbox_up and self.options.keep):
                await self.rm.kill_pod(self.pod, runtime, grace_period=self.options.grace_period)
                if self.report_stopped:
                    runtime = await self.rm.get_pod_status(
                        uid=self.uid, name=self.name, namespace=self.namespace
                    )
            if self.report_stopped:
                self._report_stopped(runtime)
            if not self.options.keep:
                await self.rm.remove_pod(uid=self.uid)
                self.removed = True
        except errors.AsyncKubeletError as e:
            self.outcome.error = str(e)
            logger.error("cleaning up pod {}/{} failed: {}", self.namespace, self.name, e)
        except Exception as e:
            self.outcome.error = f"{type(e).__name__}: {e}"
            logger.opt(exception=e).error(
                "cleaning up pod {}/{} failed: {}", self.namespace, self.name, self.outcome.error
            )

    def _report_stopped(self, runtime: PodRuntimeStatus) -> None:
        """The status of the stopped pod, ``runtime`` read after its containers stopped."""
        previous = self.outcome.status
        status = generate(
            self.pod,
            runtime,
            previous=previous,
            now=datetime.now(UTC),
            host_ips=self.host_ips,
            pod_is_terminal=not self.static,
        )
        _keep_pod_ips(status, previous or self.pod.status)
        self._report(status)


async def _first_set(*events: anyio.Event) -> None:
    """Wait until any of ``events`` is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


async def run_pods(
    rm: RuntimeManager,
    pods: Sequence[Pod],
    *,
    stop: anyio.Event | None = None,
    on_log: LogSink | None = None,
    on_status: StatusSink | None = None,
    options: RunOptions | None = None,
    output_closed: anyio.Event | None = None,
    new_uids: bool = False,
) -> list[PodOutcome]:
    """Run ``pods`` concurrently until each ends (or ``stop`` is set); clean up after them.

    A pod ends when its phase is terminal: with ``restartPolicy: Always`` that is never,
    so such a run lasts until ``stop``. Setting ``output_closed`` says nobody reads the
    pods' output any more (a closed stdout): their logs stop being followed at once and
    ``on_log`` is not called again; the pods themselves stop only on ``stop``. With
    ``new_uids`` the caller says the pods' UIDs were made for this run (no container on
    Docker can carry them): each pod's first look at Docker then asks it nothing.
    """
    stop = stop or anyio.Event()
    workers = [
        PodWorker(
            rm,
            pod,
            on_log=on_log,
            on_status=on_status,
            options=options,
            output_closed=output_closed,
        )
        for pod in pods
    ]
    for w in workers:
        w.nothing_on_docker = new_uids
    async with anyio.create_task_group() as tg:
        for w in workers:
            tg.start_soon(w.run, stop, name=f"pod {w.namespace}/{w.name}")
    return [w.outcome for w in workers]
