"""The kubelet's prober: liveness, readiness and startup probes of one pod's containers.

One worker per (container instance, probe kind), as the kubelet's ``prober/worker.go``:
it waits ``initialDelaySeconds`` after the container started, probes every
``periodSeconds`` with ``timeoutSeconds``, and flips the result only after
``successThreshold`` / ``failureThreshold`` consecutive outcomes. Liveness and readiness
do not probe before the startup probe has succeeded, and the startup probe stops once it
has. A failed liveness or startup result is held until the container is replaced (a new
instance gets new workers). Each failure records an ``Unhealthy`` event with the
kubelet's text.

The verdicts feed the pure deciders: ``liveness``/``startup`` keyed by Docker container
id go to ``compute_pod_actions``; ``readiness``/``started`` keyed by container name go to
``status.generate``.

The handlers themselves (exec, HTTP and TCP from the node, through the pod's network
namespace or through the pod's probe helper) are :mod:`asynckubelet.runtime.hooks`, shared
with lifecycle hooks; where HTTP and TCP go is the runtime's choice (``locate``, the
runtime manager's ``hook_target``), the same for probes and hooks. That place does not
change while the container instance lives (its pod IP, its sandbox's namespace), so a
worker asks once and keeps the answer; only a probe helper, a container of its own that
may be replaced, is asked for again each time. A worker sleeps until its next probe is
due; a container without probes has none, so a pod without probes costs the prober
nothing between changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.core_v1 import Container, Pod, Probe

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.runtime.events import EventSink
from asynckubelet.runtime.hooks import HookTarget, run_handler
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

LIVENESS = "Liveness"
READINESS = "Readiness"
STARTUP = "Startup"
INITIAL = {
    LIVENESS: ProbeResult.SUCCESS,
    READINESS: ProbeResult.FAILURE,
    STARTUP: ProbeResult.UNKNOWN,
}
"""The kubelet's initial results: live until proven dead, not ready until proven ready."""
Locate = Callable[..., Awaitable[HookTarget]]
"""``locate(pod, container_id=, sandbox_id=, pod_ip=)``: where a probe's HTTP/TCP goes."""


def has_probes(pod: Pod) -> bool:
    """Whether any container of the pod (init containers included) has a probe."""
    spec = pod.spec
    if spec is None:
        return False
    return any(
        _probe_of(c, kind) is not None
        for c in [*(spec.initContainers or []), *spec.containers]
        for kind in (STARTUP, LIVENESS, READINESS)
    )


def _probe_of(container: Container, kind: str) -> Probe | None:
    return {
        LIVENESS: container.livenessProbe,
        READINESS: container.readinessProbe,
        STARTUP: container.startupProbe,
    }[kind]


class _Worker:
    def __init__(
        self, prober: Prober, container: Container, status: ContainerStatus, kind: str
    ) -> None:
        probe = _probe_of(container, kind)
        assert probe is not None  # noqa: S101  (type narrowing: a worker is made only for a probe that is set)
        self.prober = prober
        self.container = container
        self.status = status
        self.kind = kind
        self.probe = probe
        self.result = INITIAL[kind]
        self.run_length = 0
        self.last: ProbeResult | None = None
        self.on_hold = False
        self.scope = anyio.CancelScope()
        self.target: HookTarget | None = None
        """Where HTTP and TCP probes go, once found (see the module docstring)."""

    async def run(self) -> None:
        probe = self.probe
        period = float(probe.periodSeconds or 10)
        with self.scope:
            while True:
                if not await self.once():
                    return
                await anyio.sleep(period)

    async def once(self) -> bool:  # noqa: C901  (mirrors upstream prober worker.doProbe)
        """One probe; False when the worker should stop."""
        probe = self.probe
        prober = self.prober
        if self.kind == STARTUP and self.result is ProbeResult.SUCCESS:
            return False
        if self.on_hold:
            return True
        if self.kind != STARTUP and not prober.is_started(self.status):
            return True
        started = self.status.started_at or datetime.now(UTC)
        delay = float(probe.initialDelaySeconds or 0)
        if (datetime.now(UTC) - started).total_seconds() < delay:
            return True
        if probe.exec is not None:
            target = HookTarget(container_id=self.status.id, host="", netns=None)
        elif self.target is not None:
            target = self.target
        else:
            target = await prober.target(self.status)
            if not target.error and target.helper is None:
                self.target = target
        outcome = await run_handler(
            probe,
            self.container,
            target,
            docker=prober.docker,
            timeout=float(probe.timeoutSeconds or 1),
        )
        if outcome.error:
            prober.event(self.container, f"{self.kind} probe errored: {outcome.error}")
        elif outcome.result is ProbeResult.FAILURE:
            prober.event(self.container, f"{self.kind} probe failed: {outcome.output}")
        result = outcome.result
        if result is self.last:
            self.run_length += 1
        else:
            self.last, self.run_length = result, 1
        failure = int(probe.failureThreshold or 3)
        success = int(probe.successThreshold or 1)
        if (result is ProbeResult.FAILURE and self.run_length < failure) or (
            result is ProbeResult.SUCCESS and self.run_length < success
        ):
            return True
        if result is ProbeResult.UNKNOWN:
            return True
        if result is not self.result:
            self.result = result
            prober.changed()
        if self.kind in (LIVENESS, STARTUP) and result is ProbeResult.FAILURE:
            self.on_hold = True
            self.run_length = 0
        return True


class Prober:
    """The probe workers of one pod. Run :meth:`run` in a task group, call :meth:`update`
    with each fresh runtime status, read the verdicts."""

    def __init__(
        self,
        *,
        docker: DockerAPI,
        events: EventSink,
        on_change: Callable[[], None] | None = None,
        locate: Locate | None = None,
    ) -> None:
        self.docker = docker
        self.events = events
        self.on_change = on_change
        self.locate = locate
        self.pod: Pod | None = None
        self.runtime: PodRuntimeStatus | None = None
        self.workers: dict[tuple[str, str], _Worker] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._netns: dict[str, str | None] = {}

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def event(self, container: Container, message: str) -> None:
        assert self.pod is not None  # noqa: S101  (type narrowing: set by update before any worker runs)
        self.events(
            self.pod, type="Warning", reason="Unhealthy", message=message, container=container.name
        )

    def update(self, pod: Pod, runtime: PodRuntimeStatus) -> None:
        """Start workers for newly running containers; stop those of containers gone."""
        self.pod = pod
        self.runtime = runtime
        assert pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
        specs = {c.name: c for c in list(pod.spec.initContainers or []) + list(pod.spec.containers)}
        wanted: set[tuple[str, str]] = set()
        newest: set[str] = set()
        for cs in runtime.containers:
            if cs.name in newest:
                continue
            newest.add(cs.name)
            spec = specs.get(cs.name)
            if spec is None or cs.state is not ContainerState.RUNNING:
                continue
            for kind in (STARTUP, LIVENESS, READINESS):
                if _probe_of(spec, kind) is None:
                    continue
                key = (cs.id, kind)
                wanted.add(key)
                if key not in self.workers and self._tg is not None:
                    worker = _Worker(self, spec, cs, kind)
                    self.workers[key] = worker
                    self._tg.start_soon(worker.run, name=f"probe {kind} {cs.name}")
        for key in list(self.workers):
            if key not in wanted:
                self.workers.pop(key).scope.cancel()

    def is_started(self, status: ContainerStatus) -> bool:
        worker = self.workers.get((status.id, STARTUP))
        return worker is None or worker.result is ProbeResult.SUCCESS

    def results(self, kind: str) -> dict[str, ProbeResult]:
        """Container id -> the current result of ``kind`` (only probed containers)."""
        return {cid: w.result for (cid, k), w in self.workers.items() if k == kind}

    @property
    def liveness(self) -> dict[str, ProbeResult]:
        return self.results(LIVENESS)

    @property
    def startup(self) -> dict[str, ProbeResult]:
        return self.results(STARTUP)

    def _by_name(self, kind: str) -> dict[str, bool]:
        found: dict[str, bool] = {}
        for (_, k), w in self.workers.items():
            if k == kind:
                found[w.status.name] = w.result is ProbeResult.SUCCESS
        return found

    def readiness(self) -> dict[str, bool]:
        """Container name -> ready, for ``status.generate``."""
        return self._by_name(READINESS)

    def started(self) -> dict[str, bool]:
        """Container name -> started, for ``status.generate``."""
        return self._by_name(STARTUP)

    async def target(self, status: ContainerStatus) -> HookTarget:
        runtime = self.runtime
        pod = self.pod
        if self.locate is not None and pod is not None:
            return await self.locate(
                pod,
                container_id=status.id,
                sandbox_id=status.sandbox_id,
                pod_ip=runtime.ips[0] if runtime is not None and runtime.ips else "",
            )
        host_network = bool(pod is not None and pod.spec is not None and pod.spec.hostNetwork)
        if host_network:
            return HookTarget(container_id=status.id, host="127.0.0.1", netns=None)
        if runtime is not None and runtime.ips:
            return HookTarget(container_id=status.id, host=runtime.ips[0], netns=None)
        return HookTarget(
            container_id=status.id, host="127.0.0.1", netns=await self._sandbox_netns(status)
        )

    async def _sandbox_netns(self, status: ContainerStatus) -> str | None:
        sandbox = status.sandbox_id
        if sandbox not in self._netns:
            try:
                info = await self.docker.inspect_container(sandbox)
                pid = info.get("State", {}).get("Pid", 0)
            except errors.DockerError as e:
                logger.debug("no sandbox pid for probes of {}: {}", status.name, e)
                pid = 0
            self._netns[sandbox] = f"/proc/{pid}/ns/net" if pid else None
        return self._netns[sandbox]


__all__ = ["Prober"]
