"""``Kubelet``: the long-running node agent, embeddable in any asyncio program.

Sources (the library's :meth:`Kubelet.apply`/:meth:`Kubelet.delete`, the static-pod
manifest directory) say which pods are wanted; one pod worker per pod UID drives each
toward its spec, woken by the PLEG as soon as Docker reports a change; the status manager
keeps the latest ``PodStatus`` of each; the event recorder keeps what happened; and
housekeeping kills containers of this node that belong to no wanted pod. A pod new to the
node is admitted first, as the kubelet admits it (:mod:`asynckubelet.node.admission`):
one the node cannot take (its resources, host ports, labels) gets no worker, only a
``Failed`` status with the kubelet's reason and a Warning event. Nothing runs on a timer
unless it is due: workers wait for the PLEG, housekeeping runs after the PLEG saw a
container of a pod nobody wants (and with each safety-net relist), so a node whose pods
change nothing makes no Docker call and writes nothing. State lives in
Docker, so a new ``Kubelet`` on the same node adopts running pods as they are: same UIDs,
restart counts from the labels, and no container restarted.

The object installs no signal handlers and keeps no global state. Leaving the ``async
with`` block (or cancelling its owner) stops the pods gracefully and removes them, unless
``KubeletConfig.leave_running`` asks to leave them for the next start to adopt; pods still
stopping after ``KubeletConfig.shutdown_timeout`` are killed at once.

The streams (:meth:`Kubelet.events`, :meth:`Kubelet.watch`, :meth:`Kubelet.logs`) are
async context managers: what a stream holds (a subscription, a connection to the engine)
is released the moment its block is left, not when a garbage collector gets to an
abandoned generator.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc
import anyio.to_thread
import yaml
from lightkube.models.core_v1 import Pod, PodCondition, PodStatus

from asynckubelet import _trace, errors, hostfs
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.docker.engine import is_local_daemon, resolve_docker_url
from asynckubelet.manifests import Manifests, load_manifests_text
from asynckubelet.network import NetworkPlugin, StartingPlugin
from asynckubelet.node.access import StateDir
from asynckubelet.node.admission import (
    NodeAdmitter,
    NodeInfo,
    host_port_in_use,
    host_ports,
    host_resources,
)
from asynckubelet.node.config import KubeletConfig
from asynckubelet.node.engine_ports import EnginePorts
from asynckubelet.node.events import EventRecorder
from asynckubelet.node.foreground import Foreground, PodOutput, WorkerEntry
from asynckubelet.node.housekeeping import Housekeeping
from asynckubelet.node.inplace import Restarter
from asynckubelet.node.metrics import (
    LoopLagMonitor,
    NodeMetrics,
    NoMetrics,
    PodStartupTracker,
)
from asynckubelet.node.objects import ObjectStore
from asynckubelet.node.pleg import PLEG
from asynckubelet.node.podoptions import PodOptions
from asynckubelet.node.reads import PodReads
from asynckubelet.node.resizer import Resizer
from asynckubelet.node.resizes import Allocations, allocated_of
from asynckubelet.node.runner import PodWorker, RunOptions, StopHook
from asynckubelet.node.runoptions import PodOutcome
from asynckubelet.node.status import KUBELET_CONDITIONS, TERMINAL_PHASES, rejected_status
from asynckubelet.node.status_manager import StatusManager, read_status_files
from asynckubelet.node.volumes import VolumeManager, default_root
from asynckubelet.node.worker_state import Termination, WorkerPolicy
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.manager import RuntimeManager
from asynckubelet.runtime.types import PodRuntimeStatus
from asynckubelet.runtime.volumes import VolumeProvider

if TYPE_CHECKING:
    from asynckubelet.node.sources import ManifestDirSource

API_SOURCE = "api"
STATE_DIR_MODE = 0o750
"""A state dir the node makes: closed to other local users (it holds pod specs, events,
volumes with Secrets and the token signing key)."""


class Kubelet(PodReads, Housekeeping, PodOptions, Foreground, Resizer, Restarter):
    """The node agent. ``async with Kubelet(KubeletConfig(...)) as node: ...``; ``output``
    is where its pods' output and statuses are shown (a foreground run's terminal)."""

    def __init__(
        self,
        config: KubeletConfig | None = None,
        *,
        docker: DockerAPI | None = None,
        network: NetworkPlugin | None = None,
        volumes: VolumeProvider | None = None,
        objects: ObjectStore | None = None,
        output: PodOutput | None = None,
    ) -> None:
        self.config = config or KubeletConfig()
        self.output = output or PodOutput()
        self._network_start: StartingPlugin | None = None
        if network is not None and self.config.start_network_with_pods:
            # The runtime gets it once entered, so that its start waits for the first pod.
            self._network_start, network = StartingPlugin(network), None
        self.worker_policy = WorkerPolicy(
            exit_when_terminal=self.config.exit_when_terminal,
            own_events=False,
            resync_interval=self.config.resync_period,
        )
        """How the node's pod workers run: woken by the PLEG, ended once their pod is
        terminal only when :attr:`KubeletConfig.exit_when_terminal` asks it."""
        self.objects = objects if objects is not None else ObjectStore(persistent_source=API_SOURCE)
        """Namespaces, ConfigMaps, Secrets and applied Pods: what every pod of a namespace
        may refer to, whichever source brought it (kept across restarts when the store
        has a directory)."""
        self.objects.subscribe(self._objects_changed)
        self.services: Callable[[], Iterable[Mapping[str, Any]]] = self._stored_services
        """The Services whose variables pods get (bodies, every namespace): those stored on
        the node; a cluster node reads the API server's instead."""
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
            path=StateDir(state).events if state is not None else None,
            node_name=self.config.node_name,
        )
        self.status = StatusManager(state_dir=state)
        self.stop_hooks: list[StopHook] = []
        """Awaited, in order, before a running pod's containers are stopped for good (a
        Service controller takes the pod out of its endpoints' rules first)."""
        self.metrics: NodeMetrics | NoMetrics = (
            NodeMetrics(
                running_pods=self.status.running_pods,
                running_containers=self.status.container_states,
            )
            if self.config.metrics
            else NoMetrics()
        )
        self.startup = PodStartupTracker(
            sli=self.metrics.pod_start_sli_duration.observe,
            total=self.metrics.pod_start_total_duration.observe,
        )
        self.runtime = RuntimeManager(
            self.config.runtime_config(),
            docker=docker,
            network=network,
            events=self._runtime_event if self.config.record_events else None,
            volumes=volumes,
            metrics=self.metrics,
        )
        self.pleg = PLEG(
            self.runtime.docker,
            node_name=self.config.node_name,
            wake=self._wake,
            relist_period=self.config.relist_period,
            on_relist=lambda s: self.metrics.pleg_relist_duration.observe(s),
            forget=self.runtime.forget,
        )
        self._entries: dict[str, WorkerEntry] = {}
        self._outcomes: dict[str, PodOutcome] = {}
        self._killing = False
        self._network_begun = False
        self._sources: dict[str, set[str]] = {}
        self._runtime_seen: dict[str, PodRuntimeStatus] = {}
        self._started: set[str] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._housekeeping_wanted = anyio.Event()
        self._closing = False
        self._unready_sources = set(self.config.wait_for_sources)
        self._saved: dict[str, Pod] = {}
        self._on_docker: set[str] = set()
        self._maybe_on_docker: set[str] = set()
        """UIDs Docker may hold containers of (of any owner): those it held when the node
        started, those of every pod given a worker since (until the worker removed them),
        and those the PLEG woke without a worker. A pod whose UID is not here gets a worker
        whose first look asks Docker nothing (:attr:`PodWorker.nothing_on_docker`)."""
        self._rejected: set[str] = set()
        self.engine_ports = EnginePorts(
            self.runtime.docker, node_name=self.config.node_name, owner=self.config.owner
        )
        self.resizes = Allocations()
        self.admitter = NodeAdmitter(
            node=self.config.node
            or NodeInfo(name=self.config.node_name, allocatable=host_resources()),
            host_port_in_use=host_port_in_use if self.config.check_host_ports else None,
            held_ports=lambda: self.engine_ports.ports,
        )
        self.manifest_source: ManifestDirSource | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def node_name(self) -> str:
        return self.config.node_name

    async def __aenter__(self) -> Self:
        await self.runtime.__aenter__()
        if self._network_start is not None:
            self.runtime.network = self._network_start
        try:
            if not await self.runtime.docker.ping():
                raise errors.RuntimeUnavailable(
                    f"cannot reach the Docker engine at {self.runtime.docker.url}; "
                    "is dockerd running?"
                )
            if self.config.state_dir is not None:
                hostfs.make_dirs(self.config.state_dir, ".", mode=STATE_DIR_MODE)
                self._saved = read_status_files(self.config.state_dir)
                await anyio.to_thread.run_sync(self.recorder.load)
            mine, every = await self.runtime.list_pod_uids_by_owner()
            self._on_docker, self._maybe_on_docker = set(mine), set(every)
            await self.engine_ports.refresh()
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.runtime.__aexit__(None, None, None)
            raise
        try:
            await self._tg.start(self._guard(self.status.run), name="status files")
            await self._tg.start(self._guard(self.recorder.run), name="events file")
            await self._tg.start(self._guard(self.pleg.run), name="pleg")
            self._restore_objects()
            if self.config.manifest_dir is not None:
                from asynckubelet.node.sources import ManifestDirSource

                self.manifest_source = ManifestDirSource(
                    self.config.manifest_dir,
                    sink=self.set_source,
                    node_name=self.node_name,
                    pod_security=self.config.pod_security,
                    allow_namespace_policy=self.config.allow_namespace_policy,
                    on_error=self._manifest_failed,
                    node_labels=self.admitter.node.labels is not None,
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
        assert self._tg is not None  # noqa: S101  (type narrowing: set by __aenter__)
        self._closing = True
        with anyio.CancelScope(shield=True):
            entries = list(self._entries.values())
            for entry in entries:
                entry.worker.termination = dataclasses.replace(
                    entry.worker.termination,
                    leave_running=self.config.leave_running and not entry.deleting,
                )
                entry.stop.set()
            with anyio.move_on_after(self.config.shutdown_timeout):
                for entry in entries:
                    await entry.done.wait()
            late = [entry for entry in entries if not entry.done.is_set()]
            if late:
                logger.warning(
                    "{} pod(s) still stopping after {}s; killing them",
                    len(late),
                    self.config.shutdown_timeout,
                )
                async with anyio.create_task_group() as tg:
                    for entry in late:
                        tg.start_soon(entry.worker.kill_now)
            for entry in list(self._entries.values()):
                await entry.done.wait()
            if self._network_start is not None and self._network_begun:
                with contextlib.suppress(errors.NetworkError):
                    await self._network_start.started()
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

    def _manifest_failed(self, path: Path, message: str) -> None:
        """A manifest file that was not loaded: a Warning event about the file (it made no
        pod to carry one), the reason the kubelet gives a pod it refuses from a source."""
        from asynckubelet.node.sources import source_name

        self.recorder.record(
            namespace="",
            name=path.name,
            uid=source_name(path),
            type="Warning",
            reason="FailedValidation",
            message=message,
        )

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
                allow_namespace_policy=self.config.allow_namespace_policy,
                node_name=self.node_name,
                namespaces=self.objects.namespaces(),
                node_labels=self.admitter.node.labels is not None,
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
        self._check_objects(manifests)
        self.objects.put(manifests, source=API_SOURCE)
        if any(True for pod in prepared for _ in host_ports(pod)):
            await self.engine_ports.refresh()
        for pod in prepared:
            self._want(pod, API_SOURCE)
        self._sources.setdefault(API_SOURCE, set()).update(ctr.pod_identity(p)[2] for p in prepared)
        return prepared

    def _check_objects(self, manifests: Manifests) -> None:
        problems = self.objects.update_errors(manifests)
        if problems:
            n = len(problems)
            raise errors.ManifestError(
                f"manifests rejected: {n} {'error' if n == 1 else 'errors'}", problems
            )

    def want(self, pods: Iterable[Pod], *, source: str) -> None:
        """Make these pods wanted as ``source``'s (a controller's): stored as its objects
        and run like any pod. They must be valid already (a controller makes them from a
        template validated as a pod); they are not loaded again."""
        made = list(pods)
        if not made:
            return
        for pod in made:
            body = pod.to_dict()
            body["apiVersion"], body["kind"] = "v1", "Pod"
            self.objects.put_object(body, source=source)
        for pod in made:
            self._want(pod, source)
        self._sources.setdefault(source, set()).update(ctr.pod_identity(p)[2] for p in made)

    def set_source(self, source: str, manifests: Manifests) -> None:
        """Everything ``source`` wants now: pods it no longer lists are deleted."""
        wanted = {ctr.pod_identity(p)[2] for p in manifests.pods}
        for uid in self._sources.get(source, set()) - wanted:
            entry = self._entries.get(uid)
            if entry is not None and entry.source == source:
                self._begin_delete(uid, grace_period=None)
            elif entry is None:
                if uid in self._rejected:
                    self.recorder.forget(uid)
                self._forget_rejected(uid)
        if wanted:
            self._sources[source] = wanted
        else:
            self._sources.pop(source, None)
        self.objects.set_source(source, manifests)
        for pod in manifests.pods:
            self._want(pod, source)

    def source_ready(self, source: str) -> None:
        """``source`` (one of ``wait_for_sources``) has said what it wants: housekeeping
        may remove what no source wants once every such source is ready."""
        self._unready_sources.discard(source)
        if not self._unready_sources:
            self._housekeeping_wanted.set()

    def terminate(self, uid: str, *, grace_period: float | None) -> anyio.Event | None:
        """Stop the pod ``uid`` (``grace_period`` None: the pod's own) and remove it, as
        for a pod deleted on an API server; returns an event set once its containers are
        gone, or None when the node runs no such pod."""
        entry = self._begin_delete(uid, grace_period=grace_period)
        return entry.done if entry is not None else None

    def has_pod(self, uid: str) -> bool:
        """Whether a pod worker drives the pod ``uid`` (running, or being stopped)."""
        return uid in self._entries

    def set_conditions(self, uid: str, conditions: Sequence[PodCondition]) -> bool:
        """Conditions others own (a readiness gate's, written to the pod's status through
        the API) in place of the ones they set before; the kubelet's own stay its own, and
        the pod's status is generated anew with them (its Ready condition waits for its
        readiness gates' conditions). False: the node runs no such pod."""
        entry = self._entries.get(uid)
        if entry is None or entry.deleting:
            return False
        pod = copy.deepcopy(entry.worker.pod)
        status = pod.status or PodStatus()
        own = [c for c in status.conditions or [] if c.type in KUBELET_CONDITIONS]
        status.conditions = [*own, *(c for c in conditions if c.type not in KUBELET_CONDITIONS)]
        pod.status = status
        entry.worker.update(pod)
        return True

    def _want(self, pod: Pod, source: str) -> None:
        name, ns, uid = ctr.pod_identity(pod)
        _trace.mark("seen", uid)
        options = self._options(pod)
        for other_uid, other in list(self._entries.items()):
            oname, ons, _ = ctr.pod_identity(other.worker.pod)
            if other_uid != uid and (ons, oname) == (ns, name) and not other.deleting:
                self._begin_delete(other_uid, grace_period=None)
        entry = self._entries.get(uid)
        if entry is None:
            if self._admit(pod):
                self._start_worker(pod, source, options)
            return
        if entry.deleting:
            entry.replacement = (pod, source, options)
            return
        entry.source = source
        entry.worker.options.contexts.update(options.contexts)
        entry.worker.options.pull_secrets.update(options.pull_secrets)
        self._resize(uid, entry, pod)

    def _admit(self, pod: Pod) -> bool:
        """The kubelet's admission of a pod new to the node, over the pods it runs; a pod
        refused gets a ``Failed`` status, the reason as a Warning event, and no worker."""
        name, ns, uid = ctr.pod_identity(pod)
        rejection = self.admitter.admit(
            self._allocated(pod), admitted=self._admitted(), running=uid in self._on_docker
        )
        if rejection is None:
            self._forget_rejected(uid)
            return True
        status = rejected_status(
            pod, reason=rejection.reason, message=rejection.message, now=datetime.now(UTC)
        )
        record = self.status.get(uid)
        if (
            uid in self._rejected
            and record is not None
            and record.pod == pod
            and (record.status.reason, record.status.message) == (status.reason, status.message)
        ):
            return False
        self._rejected.add(uid)
        self._saved.pop(uid, None)
        self.status.set(pod, status)
        self.recorder(pod, type="Warning", reason=rejection.reason, message=rejection.message)
        logger.bind(pod=f"{ns}/{name}").warning(
            "pod rejected: {}: {}", rejection.reason, rejection.message
        )
        return False

    def _admitted(self) -> list[Pod]:
        """The pods the node runs, as admission counts them (not stopping, not ended)."""
        admitted = []
        for uid, entry in self._entries.items():
            record = self.status.get(uid)
            if entry.deleting or (record is not None and record.status.phase in TERMINAL_PHASES):
                continue
            admitted.append(entry.worker.pod)
        return admitted

    async def _before_pod_stop(self, pod: Pod) -> None:
        for hook in list(self.stop_hooks):
            await hook(pod)

    def _forget_rejected(self, uid: str) -> None:
        if uid in self._rejected:
            self._rejected.discard(uid)
            self.status.remove(uid)

    def _start_worker(self, pod: Pod, source: str, options: RunOptions) -> None:
        assert self._tg is not None, "the Kubelet is not running; use `async with`"  # noqa: S101  (a programming error, not input: use outside `async with`)
        name, ns, uid = ctr.pod_identity(pod)
        saved = self._saved.pop(uid, None)
        if saved is None and uid not in self._on_docker:
            # A pod made anew under the UID of one deleted before (local UIDs come from the
            # node, namespace and name): the old pod's events are not this one's. Those of a
            # deleted pod stay listed until then, as the API server keeps them.
            self.recorder.forget(uid)
        if saved is not None and saved.status is not None and pod.status is None:
            # An adopted pod keeps its start time, transition times and terminal phase.
            pod = copy.deepcopy(pod)
            pod.status = saved.status
        self.startup.seen(
            uid, started_before=pod.status is not None and pod.status.startTime is not None
        )
        allocated = allocated_of(pod, saved) if saved is not None else None
        worker = PodWorker(
            self.runtime,
            allocated or pod,
            policy=self.worker_policy,
            on_status=self._on_status,
            on_log=self.output.logs,
            output_closed=self.output.closed,
            options=options,
            host_ips=self.config.host_ips,
            nothing_on_docker=uid not in self._maybe_on_docker,
        )
        self._maybe_on_docker.add(uid)
        # A worker cancelled with its owner (not stopped by _close) obeys leave_running too.
        worker.termination = Termination(leave_running=self.config.leave_running)
        worker.before_stop = self._before_pod_stop
        entry = WorkerEntry(
            worker=worker,
            source=source,
            stop=anyio.Event(),
            done=anyio.Event(),
            seen=time.monotonic(),
        )
        self._entries[uid] = entry
        if allocated is not None:
            self._give(uid, entry, pod)
        _trace.mark("admitted", uid)
        self._tg.start_soon(self._run_worker, uid, entry, name=f"pod {ns}/{name}")
        if self._killing:
            self._kill(entry)
        if self._network_start is not None and not self._network_begun:
            self._network_begun = True
            # The node's network starts while the first pod's sandbox is made.
            self._tg.start_soon(self._network_start.start, name="network")

    async def _run_worker(self, uid: str, entry: WorkerEntry) -> None:
        try:
            await entry.worker.run(entry.stop)
        except Exception:
            logger.exception("pod worker of {} failed", uid)
        finally:
            if self._entries.get(uid) is entry:
                del self._entries[uid]
                self.resizes.forget(uid)
                self._retry_deferred()
            if entry.worker.removed:
                self._maybe_on_docker.discard(uid)
            self._outcomes[uid] = entry.worker.outcome
            if entry.deleting:
                self.status.remove(uid)
                self._runtime_seen.pop(uid, None)
                self._started.discard(uid)
                self.startup.forget(uid)
                self._on_docker.discard(uid)
                self._outcomes.pop(uid, None)
            entry.done.set()
            if entry.replacement is not None and not self._closing:
                pod, source, options = entry.replacement
                self._start_worker(pod, source, options)

    def _begin_delete(self, uid: str, *, grace_period: float | None) -> WorkerEntry | None:
        from asynckubelet.node.sources import is_static_source

        entry = self._entries.get(uid)
        if entry is None:
            return None
        if not entry.deleting:
            entry.deleting = True
            self.status.show_deleted(entry.worker.pod, grace_period, at=datetime.now(UTC))
            entry.worker.options.grace_period = grace_period
            entry.worker.options.keep = False
            entry.worker.termination = Termination(
                report_stopped=True, static=is_static_source(entry.source)
            )
        elif grace_period is not None:
            entry.worker.shorten_grace_period(grace_period)
            if (record := self.status.get(uid)) is not None:
                self.status.show_deleted(record.pod, entry.worker.options.grace_period)
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
        self.objects.remove("Pod", namespace, name)
        for uid, entry in list(self._entries.items()):
            pname, pns, _ = ctr.pod_identity(entry.worker.pod)
            if (pns, pname) == (namespace, name):
                self._begin_delete(uid, grace_period=grace_period)
                if wait:
                    await entry.done.wait()
                return True
        record = self.status.find(namespace, name)
        if record is not None and record.uid in self._rejected:
            self.recorder.forget(record.uid)
            self._forget_rejected(record.uid)
            for members in self._sources.values():
                members.discard(record.uid)
            return True
        return False

    # -- reading --------------------------------------------------------------------------

    def _on_status(self, pod: Pod, status: PodStatus) -> None:
        uid = ctr.pod_identity(pod)[2]
        entry = self._entries.get(uid)
        if entry is None:
            return
        record = self.status.get(uid)
        if entry.deleting and record is not None:
            pod = record.pod
        ended = status.phase in TERMINAL_PHASES and (
            record is None or record.status.phase not in TERMINAL_PHASES
        )
        if uid not in self._started and status.phase in ("Running", "Succeeded"):
            self._started.add(uid)
            _trace.mark("running", uid)
            self.metrics.pod_start_duration.observe(time.monotonic() - entry.seen)
        self.status.set(pod, status)
        self.startup.status(uid, pod, status)
        if self.output.statuses is not None:
            self.output.statuses(pod, status)
        if ended:
            self._retry_deferred()

    def _runtime_event(
        self, pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None:
        """The runtime's events go to the recorder; a pull's also to the startup tracker."""
        self.recorder(pod, type=type, reason=reason, message=message, container=container)
        self.startup.event(ctr.pod_identity(pod)[2], reason=reason, message=message)

    def _wake(self, uid: str) -> None:
        entry = self._entries.get(uid)
        if entry is not None:
            entry.worker.poke()
        else:
            self._maybe_on_docker.add(uid)
            self._housekeeping_wanted.set()


__all__ = ["API_SOURCE", "STATE_DIR_MODE", "Kubelet", "KubeletConfig"]
