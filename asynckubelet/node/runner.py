"""The pod worker: one serialized loop per pod, for the node agent and for ``run`` alike.

Each pod gets the kubelet's loop in miniature: read the pod's state from Docker, turn it
into a Kubernetes ``PodStatus``, and while the worker is ``Syncing`` ``sync_pod`` toward
the spec and sleep until Docker (its own event stream, or the node's PLEG) reports a
change for the pod; once the phase is terminal, or its owner stops it, the worker is
``Terminating`` then ``Terminated`` (:mod:`~asynckubelet.node.worker_state`). The syncer
is injected (:class:`~asynckubelet.node.podsyncer.PodSyncer`), and what differs between
a foreground run's workers (``run``'s node, or :func:`~asynckubelet.node.foreground.
run_pods` on a bare runtime) and the node agent's is a :class:`~asynckubelet.node.
worker_state.WorkerPolicy`. A worker sets itself a timer only
when something is due without a change to report it (:func:`next_wake`: a back-off that
expires, a container still waiting, the active deadline, an emptyDir size check, a token
refresh); a pod that runs as it should costs nothing until Docker, a probe or its source
says something changed. Each container instance gets a log follower as soon as it is
seen, so no output is lost, not even a crashed attempt's
(:mod:`~asynckubelet.node.logfollowers`). A pod that ends by itself has
all of its output shown; a pod stopped from outside (a signal, a failure) has its output
shown while its containers stop, and what they left unread for at most :data:`LOG_DRAIN`
seconds after; output nobody reads any more (a closed stdout) is not followed at all. A
pod with ``schedulingGates`` of which nothing runs yet is not started: it stays Pending
with the API server's ``SchedulingGated`` condition until an update of the pod removes
the gates (no scheduler would bind it before).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet import _trace, errors
from asynckubelet._logging import logger
from asynckubelet.docker import LogLine
from asynckubelet.node import resizes
from asynckubelet.node.grace import GracePeriod
from asynckubelet.node.inplace import InPlaceRestarts
from asynckubelet.node.logfollowers import LogFollowers
from asynckubelet.node.pleg import OUTDATING_ACTIONS
from asynckubelet.node.podsyncer import PodSyncer
from asynckubelet.node.prober import Prober, has_probes
from asynckubelet.node.runoptions import (
    PodOutcome,
    RunOptions,
    options_from_manifests,
    pod_context,
    pull_secrets,
)
from asynckubelet.node.status import (
    DEADLINE_EXCEEDED,
    DEADLINE_EXCEEDED_MESSAGE,
    gated_status,
    generate,
    is_scheduling_gated,
)
from asynckubelet.node.volumes import VolumeManager
from asynckubelet.node.wake import (
    EVICTION_INTERVAL,
    TERMINAL_PHASES,
    VOLUME_RESYNC,
    WAITING_RETRY,
    first_failure_exit_code,
    keep_pod_ips,
    next_wake,
)
from asynckubelet.node.worker_state import (
    Termination,
    WorkerEvent,
    WorkerPolicy,
    WorkerState,
    transition,
)
from asynckubelet.runtime import actions, naming
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus, SandboxState

LogSink = Callable[[Pod, str, LogLine], None]
StatusSink = Callable[[Pod, PodStatus], None]
StopHook = Callable[[Pod], Awaitable[None]]
"""Awaited before a running pod is stopped for good (what sends traffic to it lets go)."""
STOP_HOOK_TIMEOUT = 5.0
"""At most this long is spent in the stop hook before the pod is stopped anyway."""
FAILURE_PAUSE = (0.1, 1.0)
"""Seconds a worker waits after a sync whose Docker operations failed: first, longest."""
SYNC_ERROR_PAUSE = (1.0, 10.0)
"""Seconds a worker waits after a sync that raised an unexpected error: first, longest
(the kubelet's pod workers retry such a pod after 10 s)."""
FAILED_SYNC = "FailedSync"
MAX_ERROR_TEXT = 300
LOG_DRAIN = 2.0
"""Seconds a stopped pod's log followers may still read what its containers printed once
they are stopped and removed (a container that printed fast may leave millions of lines
unread); then they are cancelled."""


class PodWorker(LogFollowers):
    """Drives one pod through ``Syncing``, ``Terminating`` and ``Terminated``
    (:mod:`~asynckubelet.node.worker_state`) until it ends or ``stop`` is set; ``rm`` is
    its syncer, ``policy`` the node's way of running its workers, :attr:`termination`
    what stopping it does."""

    def __init__(
        self,
        rm: PodSyncer,
        pod: Pod,
        *,
        policy: WorkerPolicy | None = None,
        on_log: LogSink | None = None,
        on_status: StatusSink | None = None,
        options: RunOptions | None = None,
        host_ips: Sequence[str] = (),
        output_closed: anyio.Event | None = None,
        nothing_on_docker: bool = False,
    ) -> None:
        self.rm = rm
        self.policy = policy or WorkerPolicy()
        self.state = WorkerState.SYNCING
        self.termination = Termination()
        """What stopping the worker does to its pod; its owner replaces it up to the stop."""
        self.output_closed = output_closed
        """Set when nobody reads the pod's output any more (a closed stdout): its logs stop
        being followed at once and ``on_log`` is not called again (:meth:`stop_following`)."""
        self.host_ips = tuple(host_ips)
        """The node's addresses, for ``status.hostIP(s)`` (a host-network pod's IPs too)."""
        self.pod = pod
        self.next_wake: float | None = None
        """Seconds the worker last set itself to wait before looking again (None: until
        woken)."""
        self.nothing_on_docker = nothing_on_docker
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
        self.resize_pending: resizes.Pending | None = None
        """Why the node has not taken the pod's last resize on (set by the node)."""
        self.desired: Pod | None = None
        """The pod as its source wants it while a resize is pending (``pod`` then keeps the
        allocated resources); the status is reported for it."""
        self.log_drain = LOG_DRAIN
        """Seconds the log followers may still read once a stopped pod is stopped and
        removed (:data:`LOG_DRAIN`); a pod that ended by itself has all of its output read."""
        self._logs: anyio.abc.TaskGroup | None = None
        self._followers_deadline = math.inf
        self._no_new_followers = anyio.Event()
        self._silenced = False
        self._grace = GracePeriod()
        self._ended: PodRuntimeStatus | None = None
        """What Docker held of the pod when its worker saw it end by itself, nothing of it
        running."""
        self.restarts = InPlaceRestarts()
        """Containers to restart before the next look (:mod:`~asynckubelet.node.inplace`)."""

    def _to(self, event: WorkerEvent) -> WorkerState:
        self.state = transition(self.state, event)
        return self.state

    async def kill_now(self) -> None:
        """SIGKILL every running container of the pod, its sandbox included: a graceful
        stop waiting for them ends at once, and the worker goes on to remove the pod."""
        try:
            runtime = await self.rm.get_pod_status(
                uid=self.uid, name=self.name, namespace=self.namespace
            )
        except errors.DockerError as e:
            logger.warning("cannot kill pod {}/{}: {}", self.namespace, self.name, e)
            return
        running = [c.id for c in runtime.containers if c.state is ContainerState.RUNNING]
        running += [s.id for s in runtime.sandboxes if s.state is SandboxState.READY]
        for container_id in running:
            try:
                await self.rm.docker.kill_container(container_id)
            except (errors.NotFound, errors.Conflict):
                pass
            except errors.DockerError as e:
                logger.warning("cannot kill container {}: {}", container_id, e)

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
        _trace.bind(self.uid)
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
                    if self.policy.own_events:
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
                self.restarts.close(f'pod "{self.name}" is being stopped')
                with anyio.CancelScope(shield=True):
                    await self._finish(stop)
            self.stop_following(within=self.log_drain)
            await followers_done.wait()
            tg.cancel_scope.cancel()
        return self.outcome

    async def _stop_following_on(self, event: anyio.Event) -> None:
        await event.wait()
        self.stop_following()

    async def _on_terminal(self, status: PodStatus, runtime: PodRuntimeStatus) -> bool:
        """The pod's phase is terminal: the worker is ``Terminating``. A pod past its
        deadline has its containers killed; then the worker ends (``run``'s policy) or the
        pod releases its sandbox and the worker, ``Terminated``, waits to be stopped.
        True: the worker ends."""
        self._to(WorkerEvent.TERMINAL)
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
        if self.policy.exit_when_terminal:
            return True
        await self._release_sandbox(runtime)
        self._to(WorkerEvent.STOPPED)
        return False

    async def _loop(self, stop: anyio.Event, logs: anyio.abc.TaskGroup) -> None:
        result = PodSyncResult()
        previous: PodStatus | None = None
        while not stop.is_set():
            self.wake = anyio.Event()
            try:
                for restarted in await self.restarts.carry_out(self.rm, self.pod):
                    self._follow_again(restarted, logs)
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
                resizes.apply(
                    status,
                    self.pod,
                    runtime,
                    pending=self.resize_pending,
                    error=result.resize_error,
                    previous=previous,
                    now=datetime.now(UTC),
                )
                if status.phase not in TERMINAL_PHASES:
                    await self._evict_if_over_limit(status, runtime)
                if status.phase in TERMINAL_PHASES:
                    keep_pod_ips(status, previous or self.pod.status)
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
                before = result
                result = await self._sync(runtime, status)
                if (
                    result.containers_reset
                    or (result.resized and not before.resized)
                    or (result.resize_error and not before.resize_error)
                ):
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
            self.on_status(self.desired or self.pod, status)

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
        interval = self.policy.resync_interval
        if interval is not None:
            due = interval if due is None else min(due, interval)
        self.next_wake = due
        if self.wake.is_set():
            return
        with anyio.move_on_after(due):
            await self.wake.wait()

    async def _wake_on_stop(self, stop: anyio.Event) -> None:
        await stop.wait()
        self.poke()

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

    async def _finish(self, stop: anyio.Event) -> None:
        """``Terminating``: stop the pod if it is still running (with
        :attr:`Termination.report_stopped`, its stopped status reported), ``Terminated``:
        remove it unless asked to keep it. A pod left running
        (:attr:`Termination.leave_running`) is handed over as it is, its state unchanged."""
        if self.termination.leave_running:
            return
        self._to(WorkerEvent.STOP)
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
                await self._grace.kill(self.rm, self.pod, runtime, self.options)
                if self.termination.report_stopped:
                    runtime = await self.rm.get_pod_status(
                        uid=self.uid, name=self.name, namespace=self.namespace
                    )
            self._to(WorkerEvent.STOPPED)
            if self.termination.report_stopped:
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

    def shorten_grace_period(self, grace_period: float) -> None:
        """A later delete's grace period: when shorter than the one in force, it is the
        pod's from now on, and a stop under way is cut short with it."""
        self._grace.shorten(self.pod, self.options, grace_period)

    def _report_stopped(self, runtime: PodRuntimeStatus) -> None:
        """The status of the stopped pod, ``runtime`` read after its containers stopped."""
        previous = self.outcome.status
        status = generate(
            self.pod,
            runtime,
            previous=previous,
            now=datetime.now(UTC),
            host_ips=self.host_ips,
            pod_is_terminal=not self.termination.static,
        )
        keep_pod_ips(status, previous or self.pod.status)
        self._report(status)


async def _first_set(*events: anyio.Event) -> None:
    """Wait until any of ``events`` is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


__all__ = [
    "EVICTION_INTERVAL",
    "FAILED_SYNC",
    "LOG_DRAIN",
    "TERMINAL_PHASES",
    "VOLUME_RESYNC",
    "WAITING_RETRY",
    "LogSink",
    "PodOutcome",
    "PodWorker",
    "RunOptions",
    "StatusSink",
    "StopHook",
    "Termination",
    "WorkerPolicy",
    "WorkerState",
    "first_failure_exit_code",
    "next_wake",
    "options_from_manifests",
    "pod_context",
    "pull_secrets",
]
