"""Running pods in the foreground: one pod worker per pod, woken by Docker's events.

``asynckubelet run`` and library users who want "run these pods, show their output, tell
me how they ended" use :func:`run_pods`. Each pod gets the kubelet's loop in miniature:
read the pod's state from Docker, turn it into a Kubernetes ``PodStatus``, stop when the
phase is terminal, otherwise ``sync_pod`` and sleep until Docker reports a change for the
pod (or a second passes, for back-off expiry and missed events). Each container instance
gets a log follower as soon as it is seen, so no output is lost, not even a crashed
attempt's. A pod with ``schedulingGates`` of which nothing runs yet is not started: it
stays Pending with the API server's ``SchedulingGated`` condition until an update of the
pod removes the gates (no scheduler would bind it before).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, PodStatus
from loguru import logger

from asynckubelet import errors
from asynckubelet.docker import LogLine
from asynckubelet.manifests import Manifests
from asynckubelet.node.prober import Prober
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
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus, SandboxState

LogSink = Callable[[Pod, str, LogLine], None]
StatusSink = Callable[[Pod, PodStatus], None]
TERMINAL_PHASES = ("Succeeded", "Failed")
RESYNC_INTERVAL = 1.0
FAILURE_PAUSE = (0.1, 1.0)
"""Seconds a worker waits after a sync whose Docker operations failed: first, longest."""
SYNC_ERROR_PAUSE = (1.0, 10.0)
"""Seconds a worker waits after a sync that raised an unexpected error: first, longest
(the kubelet's pod workers retry such a pod after 10 s)."""
FAILED_SYNC = "FailedSync"
MAX_ERROR_TEXT = 300
EVICTION_INTERVAL = 10.0
"""Seconds between emptyDir usage checks (the kubelet's eviction monitoring period)."""


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
        resync_interval: float = RESYNC_INTERVAL,
        host_ips: Sequence[str] = (),
    ) -> None:
        self.rm = rm
        self.host_ips = tuple(host_ips)
        """The node's addresses, for ``status.hostIP(s)`` (a host-network pod's IPs too)."""
        self.pod = pod
        self.own_events = own_events
        """Watch Docker's events for this pod itself (False: a PLEG calls :meth:`poke`)."""
        self.exit_on_terminal = exit_on_terminal
        """Return once the phase is terminal (False: stay, idle, until stopped)."""
        self.resync_interval = resync_interval
        self.leave_running = False
        """When stopped, leave the pod's containers as they are (for a later adoption)."""
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

    def poke(self) -> None:
        """Something about the pod changed: look again now."""
        self.wake.set()

    def update(self, pod: Pod) -> None:
        """A new desired state for the same pod (UID); the next iteration syncs to it."""
        self.pod = pod
        self.outcome.pod = pod
        self.wake.set()

    async def run(self, stop: anyio.Event) -> PodOutcome:
        async with anyio.create_task_group() as logs:
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(self.prober.run, name=f"prober {self.namespace}/{self.name}")
                    if self.own_events:
                        tg.start_soon(self._watch_events, name=f"pleg {self.namespace}/{self.name}")
                    try:
                        await self._loop(stop, logs)
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._finish(stop)
        return self.outcome

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
                context = self.options.contexts.get(self.uid) or PodContext(node_name=self.rm.node)
                pull_secrets = self.options.pull_secrets.get(self.uid, [])
                runtime = await self.rm.get_pod_status(
                    uid=self.uid, name=self.name, namespace=self.namespace
                )
                if (
                    is_scheduling_gated(self.pod)
                    and not runtime.sandboxes
                    and not runtime.containers
                ):
                    previous = gated_status(self.pod, now=datetime.now(UTC), previous=previous)
                    self.outcome.status = previous
                    if self.on_status is not None:
                        self.on_status(self.pod, previous)
                    await self._idle(stop)
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
                self.outcome.status = status
                self.outcome.exit_code = first_failure_exit_code(runtime)
                if self.on_status is not None:
                    self.on_status(self.pod, status)
                if status.phase in TERMINAL_PHASES:
                    if await self._on_terminal(status, runtime):
                        return
                    await self._idle(stop)
                    continue
                result = await self.rm.sync_pod(
                    self.pod,
                    runtime,
                    context=context,
                    pull_secrets=pull_secrets,
                    backoff=self.backoff,
                    image_backoff=self.image_backoff,
                    liveness=self.prober.liveness,
                    startup=self.prober.startup,
                    restart_all_containers=actions.should_all_containers_restart(
                        self.pod, runtime, status
                    ),
                )
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
            await self._idle(stop)
        self.outcome.stopped = True

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

    async def _idle(self, stop: anyio.Event) -> None:
        """Wait for a change of the pod, a stop or the next resync, whichever comes first."""
        with anyio.move_on_after(self.resync_interval):
            async with anyio.create_task_group() as waiters:

                async def until(event: anyio.Event) -> None:
                    await event.wait()
                    waiters.cancel_scope.cancel()

                waiters.start_soon(until, self.wake)
                waiters.start_soon(until, stop)

    def _follow_new(self, runtime: PodRuntimeStatus, tg: anyio.abc.TaskGroup) -> None:
        if self.on_log is None:
            return
        for c in runtime.containers:
            if c.id in self.followed or c.state is ContainerState.CREATED:
                continue
            self.followed.add(c.id)
            tg.start_soon(self._follow, c.id, c.name, name=f"logs {self.name}/{c.name}")

    async def _follow(self, container_id: str, container: str) -> None:
        assert self.on_log is not None  # noqa: S101  (type narrowing: followed only when a log sink is set)
        try:
            async for line in self.rm.docker.logs(container_id, follow=True):
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
                    self.rm.forget(str((event.get("Actor") or {}).get("ID") or ""))
                    if event.get("Action", "").split(":")[0] in (
                        "start",
                        "die",
                        "oom",
                        "destroy",
                        "create",
                    ):
                        self.wake.set()
            except errors.DockerError as e:
                logger.debug("event stream for {} lost ({}); reconnecting", self.name, e)
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _finish(self, stop: anyio.Event) -> None:
        """Stop the pod if it is still running, then remove it unless asked to keep it."""
        if self.leave_running:
            return
        try:
            runtime = await self.rm.get_pod_status(
                uid=self.uid, name=self.name, namespace=self.namespace
            )
            if any(c.state is ContainerState.RUNNING for c in runtime.containers) or any(
                s.state.value == "ready" for s in runtime.sandboxes
            ):
                await self.rm.kill_pod(self.pod, runtime, grace_period=self.options.grace_period)
            if not self.options.keep:
                await self.rm.remove_pod(uid=self.uid)
        except errors.AsyncKubeletError as e:
            self.outcome.error = str(e)
            logger.error("cleaning up pod {}/{} failed: {}", self.namespace, self.name, e)
        except Exception as e:
            self.outcome.error = f"{type(e).__name__}: {e}"
            logger.opt(exception=e).error(
                "cleaning up pod {}/{} failed: {}", self.namespace, self.name, self.outcome.error
            )


async def run_pods(
    rm: RuntimeManager,
    pods: Sequence[Pod],
    *,
    stop: anyio.Event | None = None,
    on_log: LogSink | None = None,
    on_status: StatusSink | None = None,
    options: RunOptions | None = None,
) -> list[PodOutcome]:
    """Run ``pods`` concurrently until each ends (or ``stop`` is set); clean up after them.

    A pod ends when its phase is terminal: with ``restartPolicy: Always`` that is never,
    so such a run lasts until ``stop``.
    """
    stop = stop or anyio.Event()
    workers = [
        PodWorker(rm, pod, on_log=on_log, on_status=on_status, options=options) for pod in pods
    ]
    async with anyio.create_task_group() as tg:
        for w in workers:
            tg.start_soon(w.run, stop, name=f"pod {w.namespace}/{w.name}")
    return [w.outcome for w in workers]
