"""``Kubelet``: the long-running node agent, embeddable in any asyncio program.

Sources (the library's :meth:`Kubelet.apply`/:meth:`Kubelet.delete`, the static-pod
manifest directory) say which pods are wanted; one pod worker per pod UID drives each
toward its spec, woken by the PLEG as soon as Docker reports a change; the status manager
keeps the latest ``PodStatus`` of each; the event recorder keeps what happened; and
housekeeping kills containers of this node that belong to no wanted pod. Nothing runs on
a timer unless it is due: workers wait for the PLEG, housekeeping runs after the PLEG saw
a container of a pod nobody wants (and with each safety-net relist), so a node whose pods
change nothing makes no Docker call and writes nothing. State lives in
Docker, so a new ``Kubelet`` on the same node adopts running pods as they are: same UIDs,
restart counts from the labels, and no container restarted.

The object installs no signal handlers and keeps no global state. Leaving the ``async
with`` block (or cancelling its owner) stops the pods gracefully and removes them, unless
``KubeletConfig.leave_running`` asks to leave them for the next start to adopt.
"""

from __future__ import annotations

import builtins
import copy
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import yaml
from lightkube.models.core_v1 import Pod, PodStatus
from loguru import logger

from asynckubelet import errors, hostfs
from asynckubelet.docker import DockerAPI, ExecResult, LogLine
from asynckubelet.docker.engine import resolve_docker_url
from asynckubelet.manifests import Level, Manifests, load_manifests_text
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.dns import DNSSettings
from asynckubelet.network.factory import is_local_daemon
from asynckubelet.node import access
from asynckubelet.node.events import EventRecorder, PodEvent
from asynckubelet.node.metrics import (
    LOOP_LAG_PERIOD,
    LoopLagMonitor,
    NodeMetrics,
    PodStartupTracker,
)
from asynckubelet.node.pleg import PLEG, RELIST_PERIOD
from asynckubelet.node.runner import PodWorker, RunOptions, pod_context, pull_secrets
from asynckubelet.node.sources import ManifestDirSource
from asynckubelet.node.status import kubectl_status
from asynckubelet.node.status_manager import PodRecord, StatusManager, read_status_files
from asynckubelet.node.tokens import DEFAULT_ISSUER
from asynckubelet.node.volumes import VolumeManager, default_root
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus
from asynckubelet.runtime.volumes import VolumeProvider

API_SOURCE = "api"
CONDITIONS = (
    "Ready",
    "ContainersReady",
    "Initialized",
    "PodScheduled",
    "PodReadyToStartContainers",
)
PHASES = ("Pending", "Running", "Succeeded", "Failed")
STATE_DIR_MODE = 0o750
"""A state dir the node makes: closed to other local users (it holds pod specs, events,
volumes with Secrets and the token signing key)."""


@dataclass(frozen=True)
class KubeletConfig:
    """How a node runs."""

    node_name: str = field(default_factory=socket.gethostname)
    """Ownership label of every object; a node never touches another node's objects."""
    state_dir: Path | None = None
    """Where events and pod statuses are written for other processes; None: nowhere."""
    manifest_dir: Path | None = None
    """Static pods: every manifest in this directory runs, kept in step with the files."""
    pause_image: str | None = None
    docker_url: str | None = None
    pod_security: Level = "baseline"
    dns: DNSSettings = field(default_factory=DNSSettings)
    """Cluster DNS servers and domain for ``ClusterFirst`` pods."""
    leave_running: bool = False
    """On exit, leave the pods running (for a later start to adopt) instead of stopping them."""
    relist_period: float = RELIST_PERIOD
    """Seconds between the PLEG's safety-net relists (the event stream tells the rest)."""
    housekeeping_period: float = 2.0
    """Seconds between housekeeping passes at most; the first one runs this long after
    start, so a library user who means to adopt pods left running applies them before it.
    Later passes run when the PLEG saw a container of a pod nobody wants, and at least
    every ``relist_period``."""
    resync_period: float | None = None
    """Seconds after which a pod worker looks again without being woken; None: only when
    something is due (a back-off that ends, a container still waiting, a deadline)."""
    loop_lag_period: float | None = LOOP_LAG_PERIOD
    """Seconds between measurements of the event loop's lag; None: not measured."""
    service_account_issuer: str = DEFAULT_ISSUER
    """``iss`` of the service-account tokens this node issues for projected volumes."""


@dataclass(eq=False)
class _Entry:
    worker: PodWorker
    source: str
    stop: anyio.Event
    done: anyio.Event
    seen: float
    deleting: bool = False
    replacement: tuple[Pod, str, RunOptions] | None = None


Condition = str | Callable[[Pod | None], bool]


class Kubelet:
    """The node agent. ``async with Kubelet(KubeletConfig(...)) as node: ...``."""

    def __init__(
        self,
        config: KubeletConfig | None = None,
        *,
        docker: DockerAPI | None = None,
        network: NetworkPlugin | None = None,
        volumes: VolumeProvider | None = None,
    ) -> None:
        self.config = config or KubeletConfig()
        state = self.config.state_dir
        if volumes is None and is_local_daemon(resolve_docker_url(self.config.docker_url)):
            # Volumes are directories on this machine: only a local engine can mount them.
            root = state / "volumes" if state is not None else default_root(self.config.node_name)
            volumes = VolumeManager(
                root=root,
                node_name=self.config.node_name,
                service_account_issuer=self.config.service_account_issuer,
            )
        self.recorder = EventRecorder(
            path=access.StateDir(state).events if state is not None else None,
            node_name=self.config.node_name,
        )
        self.status = StatusManager(state_dir=state)
        self.metrics = NodeMetrics(
            running_pods=self._running_pods, running_containers=self._running_containers
        )
        self.runtime = RuntimeManager(
            RuntimeConfig(
                node_name=self.config.node_name,
                pause_image=self.config.pause_image,
                docker_url=self.config.docker_url,
                dns=self.config.dns,
            ),
            docker=docker,
            network=network,
            events=self.recorder,
            volumes=volumes,
            metrics=self.metrics,
        )
        self.startup = PodStartupTracker(
            sli=self.metrics.pod_start_sli_duration.observe,
            total=self.metrics.pod_start_total_duration.observe,
        )
        self.recorder.subscribe(
            lambda e: self.startup.event(e.uid, reason=e.reason, message=e.message)
        )
        self.pleg = PLEG(
            self.runtime.docker,
            node_name=self.config.node_name,
            wake=self._wake,
            relist_period=self.config.relist_period,
            on_relist=lambda s: self.metrics.pleg_relist_duration.observe(s),
            forget=self.runtime.forget,
        )
        self._entries: dict[str, _Entry] = {}
        self._sources: dict[str, set[str]] = {}
        self._runtime_seen: dict[str, PodRuntimeStatus] = {}
        self._started: set[str] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._housekeeping_wanted = anyio.Event()
        self._closing = False
        self._saved: dict[str, Pod] = {}
        self.manifest_source: ManifestDirSource | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def node_name(self) -> str:
        return self.config.node_name

    async def __aenter__(self) -> Self:
        await self.runtime.__aenter__()
        try:
            if not await self.runtime.docker.ping():
                raise errors.RuntimeUnavailable(
                    f"cannot reach the Docker engine at {self.runtime.docker.url}; "
                    "is dockerd running?"
                )
            if self.config.state_dir is not None:
                hostfs.make_dirs(self.config.state_dir, ".", mode=STATE_DIR_MODE)
                self._saved = read_status_files(self.config.state_dir)
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.runtime.__aexit__(None, None, None)
            raise
        try:
            await self._tg.start(self._guard(self.status.run), name="status files")
            await self._tg.start(self._guard(self.pleg.run), name="pleg")
            if self.config.manifest_dir is not None:
                self.manifest_source = ManifestDirSource(
                    self.config.manifest_dir,
                    sink=self.set_source,
                    node_name=self.node_name,
                    pod_security=self.config.pod_security,
                )
                await self._tg.start(self._guard(self.manifest_source.run), name="manifests")
            self._tg.start_soon(self._guard(self._housekeeping_loop), name="housekeeping")
            if self.config.loop_lag_period is not None:
                monitor = LoopLagMonitor(
                    self.metrics.event_loop_lag.observe, period=self.config.loop_lag_period
                )
                self._tg.start_soon(self._guard(monitor.run), name="loop lag")
        except BaseException as e:
            await self._close(type(e), e, e.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close(exc_type, exc, tb)

    async def _close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None
        self._closing = True
        with anyio.CancelScope(shield=True):
            for entry in list(self._entries.values()):
                entry.worker.leave_running = self.config.leave_running and not entry.deleting
                entry.stop.set()
            for entry in list(self._entries.values()):
                await entry.done.wait()
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True):
                await self.runtime.__aexit__(None, None, None)

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A background task that dies is logged, then its error ends the node."""

        async def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                await fn(*args, **kwargs)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception:
                logger.exception("node task {} failed", getattr(fn, "__qualname__", fn))
                raise

        return guarded

    # -- desired state --------------------------------------------------------------------

    def _prepare(self, pods: Manifests | Pod | Iterable[Pod]) -> tuple[list[Pod], Manifests]:
        if isinstance(pods, Manifests):
            return list(pods.pods), pods
        items = [pods] if isinstance(pods, Pod) else list(pods)
        prepared: list[Pod] = []
        for pod in items:
            text = yaml.safe_dump(pod.to_dict())
            name = pod.metadata.name if pod.metadata else None
            loaded = load_manifests_text(
                text,
                source_name=f"pod {name}",
                pod_security=self.config.pod_security,
                node_name=self.node_name,
            )
            prepared.extend(loaded.pods)
        return prepared, Manifests(pods=tuple(prepared))

    async def apply(self, pods: Manifests | Pod | Iterable[Pod]) -> list[Pod]:
        """Make these pods wanted (new ones start, changed ones converge); returns them.

        ``Pod`` objects are defaulted, validated and admitted as manifests are; a
        :class:`~asynckubelet.errors.ManifestError` names what is wrong. A pod keeps its
        UID across applies (it derives from node, namespace and name), so a changed spec
        restarts only the containers whose spec changed.
        """
        prepared, manifests = self._prepare(pods)
        for pod in prepared:
            self._want(pod, API_SOURCE, manifests)
        self._sources.setdefault(API_SOURCE, set()).update(ctr.pod_identity(p)[2] for p in prepared)
        return prepared

    def set_source(self, source: str, manifests: Manifests) -> None:
        """Everything ``source`` wants now: pods it no longer lists are deleted."""
        wanted = {ctr.pod_identity(p)[2] for p in manifests.pods}
        for uid in self._sources.get(source, set()) - wanted:
            entry = self._entries.get(uid)
            if entry is not None and entry.source == source:
                self._begin_delete(uid, grace_period=None)
        self._sources[source] = wanted
        for pod in manifests.pods:
            self._want(pod, source, manifests)

    def _options(self, pod: Pod, manifests: Manifests) -> RunOptions:
        uid = ctr.pod_identity(pod)[2]
        options = RunOptions()
        options.contexts[uid] = pod_context(manifests, pod, node_name=self.node_name)
        options.pull_secrets[uid] = pull_secrets(manifests, pod)
        return options

    def _want(self, pod: Pod, source: str, manifests: Manifests) -> None:
        name, ns, uid = ctr.pod_identity(pod)
        options = self._options(pod, manifests)
        for other_uid, other in list(self._entries.items()):
            oname, ons, _ = ctr.pod_identity(other.worker.pod)
            if other_uid != uid and (ons, oname) == (ns, name) and not other.deleting:
                self._begin_delete(other_uid, grace_period=None)
        entry = self._entries.get(uid)
        if entry is None:
            self._start_worker(pod, source, options)
            return
        if entry.deleting:
            entry.replacement = (pod, source, options)
            return
        entry.source = source
        entry.worker.options.contexts.update(options.contexts)
        entry.worker.options.pull_secrets.update(options.pull_secrets)
        if (entry.worker.pod.spec, entry.worker.pod.metadata) != (pod.spec, pod.metadata):
            logger.bind(pod=f"{ns}/{name}").info("pod spec changed; syncing to the new spec")
            entry.worker.update(pod)
        else:
            entry.worker.poke()

    def _start_worker(self, pod: Pod, source: str, options: RunOptions) -> None:
        assert self._tg is not None, "the Kubelet is not running; use `async with`"
        name, ns, uid = ctr.pod_identity(pod)
        saved = self._saved.pop(uid, None)
        if saved is not None and saved.status is not None and pod.status is None:
            # An adopted pod keeps its start time, transition times and terminal phase.
            pod = copy.deepcopy(pod)
            pod.status = saved.status
        self.startup.seen(
            uid, started_before=pod.status is not None and pod.status.startTime is not None
        )
        worker = PodWorker(
            self.runtime,
            pod,
            on_status=self._on_status,
            options=options,
            own_events=False,
            exit_on_terminal=False,
            resync_interval=self.config.resync_period,
        )
        entry = _Entry(
            worker=worker,
            source=source,
            stop=anyio.Event(),
            done=anyio.Event(),
            seen=time.monotonic(),
        )
        self._entries[uid] = entry
        self._tg.start_soon(self._run_worker, uid, entry, name=f"pod {ns}/{name}")

    async def _run_worker(self, uid: str, entry: _Entry) -> None:
        try:
            await entry.worker.run(entry.stop)
        except Exception:
            logger.exception("pod worker of {} failed", uid)
        finally:
            if self._entries.get(uid) is entry:
                del self._entries[uid]
            if entry.deleting:
                self.status.remove(uid)
                self._runtime_seen.pop(uid, None)
                self._started.discard(uid)
                self.startup.forget(uid)
            entry.done.set()
            if entry.replacement is not None and not self._closing:
                pod, source, options = entry.replacement
                self._start_worker(pod, source, options)

    def _begin_delete(self, uid: str, *, grace_period: float | None) -> _Entry | None:
        entry = self._entries.get(uid)
        if entry is None:
            return None
        if not entry.deleting:
            entry.deleting = True
            pod = copy.deepcopy(entry.worker.pod)
            if pod.metadata is not None:
                pod.metadata.deletionTimestamp = datetime.now(UTC)
                pod.metadata.deletionGracePeriodSeconds = (
                    int(grace_period) if grace_period is not None else None
                )
            record = self.status.get(uid)
            if record is not None:
                self.status.set(pod, record.status)
            entry.worker.options.grace_period = grace_period
            entry.worker.options.keep = False
            entry.worker.leave_running = False
        elif grace_period is not None:
            entry.worker.options.grace_period = grace_period
        entry.replacement = None
        entry.stop.set()
        for members in self._sources.values():
            members.discard(uid)
        return entry

    async def delete(
        self, namespace: str, name: str, *, grace_period: float | None = None, wait: bool = True
    ) -> bool:
        """Stop the pod gracefully and remove its containers; False when there is none.

        ``grace_period`` overrides the pod's ``terminationGracePeriodSeconds``. With
        ``wait`` (the default) this returns once the pod's objects are gone.
        """
        for uid, entry in list(self._entries.items()):
            pname, pns, _ = ctr.pod_identity(entry.worker.pod)
            if (pns, pname) == (namespace, name):
                self._begin_delete(uid, grace_period=grace_period)
                if wait:
                    await entry.done.wait()
                return True
        return False

    # -- reading --------------------------------------------------------------------------

    def _on_status(self, pod: Pod, status: PodStatus) -> None:
        uid = ctr.pod_identity(pod)[2]
        entry = self._entries.get(uid)
        if entry is None:
            return
        if entry.deleting:
            record = self.status.get(uid)
            if record is not None:
                pod = record.pod
        if uid not in self._started and status.phase in ("Running", "Succeeded"):
            self._started.add(uid)
            self.metrics.pod_start_duration.observe(time.monotonic() - entry.seen)
        self.status.set(pod, status)
        self.startup.status(uid, pod, status)

    def get(self, namespace: str, name: str) -> Pod | None:
        """The pod as a full v1 object with its latest status, or None."""
        record = self.status.find(namespace, name)
        return record.api_object() if record is not None else None

    def list(self) -> list[Pod]:
        return [r.api_object() for r in self.status.list()]

    def list_json(self) -> builtins.list[str]:
        """Every pod as v1 Pod JSON text, made once per change of the pod."""
        return [r.json_text for r in self.status.list()]

    async def wait(
        self,
        namespace: str,
        name: str,
        condition: Condition = "Ready",
        *,
        timeout: float | None = None,
    ) -> Pod | None:
        """Wait until the pod meets ``condition``; returns the pod (None for ``Deleted``).

        ``condition`` is a pod condition type (``Ready``, ``Initialized``...), a phase
        (``Running``, ``Succeeded``, ``Failed``), ``Terminal`` (either terminal phase),
        ``Deleted``, or a callable given the pod (or None when there is none). On timeout,
        :class:`TimeoutError` says what the pod's status was.
        """
        check = _condition(condition)
        try:
            with anyio.fail_after(timeout):
                while True:
                    pod = self.get(namespace, name)
                    if check(pod):
                        return pod
                    await self.status.changed()
        except TimeoutError:
            pod = self.get(namespace, name)
            raise TimeoutError(
                f"timed out waiting for pod {namespace}/{name} to be {condition}: "
                f"{_describe_state(pod)}"
            ) from None

    async def events(self, *, history: bool = False) -> AsyncIterator[PodEvent]:
        """Events as they are recorded (with ``history``, first those already recorded)."""
        send, receive = anyio.create_memory_object_stream[PodEvent](1000)

        def offer(event: PodEvent) -> None:
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning("an events() reader is too slow; an event was dropped")

        if history:
            for event in self.recorder.list():
                offer(event)
        unsubscribe = self.recorder.subscribe(offer)
        try:
            async with receive:
                async for event in receive:
                    yield event
        finally:
            unsubscribe()
            send.close()

    async def watch(self, *, initial: bool = True) -> AsyncIterator[tuple[str, Pod]]:
        """``(type, pod)`` for every change, as a Kubernetes watch: ``ADDED``, ``MODIFIED``,
        ``DELETED``. With ``initial``, every current pod first comes as ``ADDED``."""
        send, receive = anyio.create_memory_object_stream[tuple[str, Pod]](1000)
        known: dict[str, Pod] = {}

        def offer(record: PodRecord | None, uid: str) -> None:
            if record is None:
                old = known.pop(uid, None)
                if old is None:
                    return
                item = ("DELETED", old)
            else:
                item = ("MODIFIED" if uid in known else "ADDED", record.api_object())
                known[uid] = item[1]
            try:
                send.send_nowait(item)
            except anyio.WouldBlock:
                logger.warning("a watch() reader is too slow; a change was dropped")

        if initial:
            for record in self.status.list():
                offer(record, record.uid)
        unsubscribe = self.status.subscribe(offer)
        try:
            async with receive:
                async for item in receive:
                    yield item
        finally:
            unsubscribe()
            send.close()

    def _pod(self, namespace: str, name: str) -> Pod:
        record = self.status.find(namespace, name)
        if record is None:
            raise errors.NotFound(f'pods "{name}" not found')
        return record.pod

    async def logs(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        since: float | None = None,
    ) -> AsyncIterator[LogLine]:
        """A container's output (the first container when none is named)."""
        pod = self._pod(namespace, name)
        chosen, _ = access.default_container(pod, container)
        instance = await access.container_instance(
            self.runtime, pod, container=chosen, previous=previous
        )
        async for line in self.runtime.docker.logs(
            instance.id, follow=follow, tail=tail, timestamps=timestamps, since=since
        ):
            yield line

    async def exec(
        self,
        namespace: str,
        name: str,
        command: Sequence[str],
        *,
        container: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` in a running container of the pod and collect its output."""
        pod = self._pod(namespace, name)
        chosen, _ = access.default_container(pod, container)
        instance = await access.container_instance(self.runtime, pod, container=chosen)
        if instance.state is not ContainerState.RUNNING:
            raise errors.PodError(
                f"cannot exec in a container that is not running: {name}/{chosen}"
            )
        return await self.runtime.docker.exec_run(instance.id, command, timeout=timeout)

    # -- PLEG and housekeeping -----------------------------------------------------------

    def _wake(self, uid: str) -> None:
        entry = self._entries.get(uid)
        if entry is not None:
            entry.worker.poke()
        else:
            self._housekeeping_wanted.set()

    def _running_pods(self) -> int:
        count = 0
        for record in self.status.list():
            if record.status.phase == "Running" or any(
                (c.state is not None and c.state.running is not None)
                for c in record.status.containerStatuses or []
            ):
                count += 1
        return count

    def _running_containers(self) -> dict[str, int]:
        counts = {"running": 0, "exited": 0, "created": 0, "unknown": 0}
        for record in self.status.list():
            for c in [
                *(record.status.initContainerStatuses or []),
                *(record.status.containerStatuses or []),
            ]:
                if c.state is None:
                    continue
                if c.state.running is not None:
                    counts["running"] += 1
                elif c.state.terminated is not None:
                    counts["exited"] += 1
                else:
                    counts["created" if c.containerID else "unknown"] += 1
        return counts

    async def _housekeeping_loop(self) -> None:
        while True:
            await anyio.sleep(self.config.housekeeping_period)
            self._housekeeping_wanted = anyio.Event()
            try:
                await self.housekeeping()
            except errors.DockerError as e:
                logger.warning("housekeeping failed: {}", e)
                continue
            with anyio.move_on_after(self.config.relist_period):
                await self._housekeeping_wanted.wait()

    async def housekeeping(self) -> builtins.list[str]:
        """Kill and remove this node's pods that no source wants; returns their uids."""
        self._saved.clear()
        self.status.prune()
        removed = []
        for uid, (ns, name) in (await self.runtime.list_pod_uids()).items():
            if uid in self._entries:
                continue
            logger.bind(pod=f"{ns}/{name}").info("removing pod {} that is not wanted", uid)
            runtime = await self.runtime.get_pod_status(uid=uid, name=name, namespace=ns)
            if uid in self._entries:
                continue
            with anyio.CancelScope(shield=True):
                await self.runtime.kill_pod(None, runtime)
                await self.runtime.remove_pod(uid=uid)
            removed.append(uid)
        return removed


def _condition(condition: Condition) -> Callable[[Pod | None], bool]:
    if callable(condition):
        return condition
    if condition == "Deleted":
        return lambda pod: pod is None

    def check(pod: Pod | None) -> bool:
        if pod is None or pod.status is None:
            return False
        phase = pod.status.phase or ""
        if condition == "Terminal":
            return phase in ("Succeeded", "Failed")
        if condition in PHASES:
            return phase == condition
        if condition in CONDITIONS:
            return any(
                c.type == condition and c.status == "True" for c in pod.status.conditions or []
            )
        raise ValueError(
            f"unknown condition {condition!r}: use a pod condition type "
            f"({', '.join(CONDITIONS)}), a phase, Terminal or Deleted"
        )

    return check


def _describe_state(pod: Pod | None) -> str:
    if pod is None or pod.status is None:
        return "no such pod"
    parts = [f"status {kubectl_status(pod, pod.status)}"]
    for c in [*(pod.status.initContainerStatuses or []), *(pod.status.containerStatuses or [])]:
        waiting = c.state.waiting if c.state is not None else None
        if waiting is not None and waiting.reason and waiting.message:
            parts.append(f"{c.name}: {waiting.reason}: {waiting.message}")
    return "; ".join(parts)
