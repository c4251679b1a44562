"""What a node tells about its pods: each pod as a v1 object with its latest status, waiting
for a condition, the event and status streams, logs and exec.

These are the read side of :class:`~asynckubelet.node.kubelet.Kubelet` (which inherits
them): they need only its status manager, its event recorder and its runtime.

The streams (:meth:`PodReads.events`, :meth:`PodReads.watch`, :meth:`PodReads.logs`) are
async context managers: what a stream holds (a subscription, a connection to the engine)
is released the moment its block is left, not when a garbage collector gets to an
abandoned generator.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Self, TypeVar

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import ExecResult, LogLine
from asynckubelet.node import access
from asynckubelet.node.events import EventRecorder, PodEvent, since_creation
from asynckubelet.node.failures import DEFAULT_MAX_RESTARTS, Failure, FailureWatch
from asynckubelet.node.printpod import created, kubectl_status
from asynckubelet.node.status_manager import PodRecord, StatusManager
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.manager import RuntimeManager
from asynckubelet.runtime.types import ContainerState

if TYPE_CHECKING:
    from asynckubelet.node.objects import ObjectStore

T = TypeVar("T")
CONDITIONS = (
    "Ready",
    "ContainersReady",
    "Initialized",
    "PodScheduled",
    "PodReadyToStartContainers",
)
PHASES = ("Pending", "Running", "Succeeded", "Failed")
STREAM_BUFFER = 1000
"""Items a stream holds for a reader that has not taken them yet."""
Condition = str | Callable[[Pod | None], bool]
"""A pod condition type, a phase, ``Terminal``, ``Deleted``, or a callable given the pod."""


class PodReads:
    """The read side of a node (mixed into :class:`~asynckubelet.node.kubelet.Kubelet`)."""

    status: StatusManager
    recorder: EventRecorder
    runtime: RuntimeManager
    objects: ObjectStore

    def get(self, namespace: str, name: str) -> Pod | None:
        """The pod as a full v1 object with its latest status, or None."""
        record = self.status.find(namespace, name)
        return record.api_object() if record is not None else None

    def list(self) -> list[Pod]:
        return [r.api_object() for r in self.status.list()]

    def views(self) -> builtins.list[Pod]:
        """Every pod as :meth:`list` gives it, but sharing its parts with the node's record
        (:attr:`~asynckubelet.node.status_manager.PodRecord.view`), for readers that neither
        change nor keep them (Service endpoints, tables): no deep copy of every pod each
        time one of them changes."""
        return [r.view for r in self.status.list()]

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
        max_restarts: int | None = DEFAULT_MAX_RESTARTS,
    ) -> Pod | None:
        """Wait until the pod meets ``condition``; returns the pod (None for ``Deleted``).

        ``condition`` is a pod condition type (``Ready``, ``Initialized``...), a phase
        (``Running``, ``Succeeded``, ``Failed``), ``Terminal`` (either terminal phase),
        ``Deleted``, or a callable given the pod (or None when there is none). On timeout,
        :class:`TimeoutError` says what the pod's status was.

        A wait for a named condition other than ``Deleted`` ends early, with
        :class:`~asynckubelet.errors.PodError` saying ``pod/NAME/CONTAINER: REASON:
        MESSAGE``, on what waiting will not fix (see :mod:`asynckubelet.node.failures`):
        an image that cannot be had, a pod the node rejected, a container crash-looping
        past ``max_restarts`` restarts (None: never), with its last exit code and log line.
        A callable decides alone: it may be waiting for just such a state.
        """
        check = _condition(condition)
        watch = (
            None
            if callable(condition) or condition == "Deleted"
            else FailureWatch(pull_timeout=None, config_timeout=None, max_restarts=max_restarts)
        )
        try:
            with anyio.fail_after(timeout):
                while True:
                    pod = self.get(namespace, name)
                    if check(pod):
                        return pod
                    if watch is not None and pod is not None and pod.status is not None:
                        failure = watch.observe(pod.status, now=anyio.current_time())
                        if failure is not None:
                            raise errors.PodError(
                                (await self._with_log_line(namespace, name, failure)).line(name)
                            )
                    await self.status.changed()
        except TimeoutError:
            pod = self.get(namespace, name)
            raise TimeoutError(
                f"timed out waiting for pod {namespace}/{name} to be {condition}: "
                f"{_describe_state(pod)}"
            ) from None

    async def _with_log_line(self, namespace: str, name: str, failure: Failure) -> Failure:
        """``failure`` with its container's last log line, when it wants one and one can
        be read."""
        if not failure.wants_log_line:
            return failure
        try:
            lines = await self.read_logs(
                namespace, name, container=failure.container, previous=True, tail=1
            )
        except errors.AsyncKubeletError:
            return failure
        return failure.with_log_line(lines[-1].text if lines else None)

    def list_events(
        self, *, namespace: str | None = None, name: str | None = None
    ) -> builtins.list[PodEvent]:
        """The events recorded so far, oldest first (of one pod, given its namespace and
        name): what ``describe`` shows, without following. As the node's API lists them
        (:meth:`own_events`): those of an earlier pod of the same name are not listed."""
        return self.own_events(
            e
            for e in self.recorder.list()
            if (namespace is None or e.namespace == namespace) and (name is None or e.pod == name)
        )

    def own_events(self, events: Iterable[PodEvent]) -> builtins.list[PodEvent]:
        """``events`` less those about a pod there now that happened before it was created
        (the events of a pod deleted before it, which had its name and so its uid)."""
        events = builtins.list(events)
        uids = {e.uid for e in events if e.kind == "Pod"}
        if not uids:
            return events
        since = {
            uid: self.creation_time(pod)
            for pod in self.views()
            if (uid := ctr.pod_identity(pod)[2]) in uids
        }
        return [e for e in events if e.kind != "Pod" or since_creation([e], since.get(e.uid))]

    def creation_time(self, pod: Pod) -> datetime | None:
        """When the node's API says ``pod`` was created: its ``creationTimestamp``, else
        that of the object stored for it (its first apply), else its start time."""
        meta = pod.metadata
        if meta is not None and meta.creationTimestamp is None:
            name, namespace, _ = ctr.pod_identity(pod)
            stored = self.objects.get("Pod", namespace, name)
            first = stored.created() if stored is not None else None
            if first is not None:
                return first
        return created(pod)

    @contextlib.asynccontextmanager
    async def events(
        self, *, history: bool = False, buffer: int = STREAM_BUFFER
    ) -> AsyncIterator[AsyncIterator[PodEvent]]:
        """Events as they are recorded, while the block runs::

            async with node.events() as events:
                async for event in events:
                    ...

        With ``history``, first those already recorded. Leaving the block unsubscribes at
        once. Events say what happened, not what is: a reader more than ``buffer`` events
        behind misses the newest (logged as a warning).
        """
        earlier = self.recorder.list() if history else []
        send, receive = anyio.create_memory_object_stream[PodEvent](buffer + len(earlier))

        def offer(event: PodEvent) -> None:
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning("an events() reader is too slow; an event was dropped")

        for event in earlier:
            offer(event)
        unsubscribe = self.recorder.subscribe(offer)
        try:
            with send, receive:
                yield _Stream(receive)
        finally:
            unsubscribe()

    @contextlib.asynccontextmanager
    async def watch(
        self, *, initial: bool = True, buffer: int = STREAM_BUFFER
    ) -> AsyncIterator[AsyncIterator[tuple[str, Pod]]]:
        """``(type, pod)`` for every change while the block runs, as a Kubernetes watch:
        ``ADDED``, ``MODIFIED``, ``DELETED``::

            async with node.watch() as changes:
                async for kind, pod in changes:
                    ...

        With ``initial``, every current pod first comes as ``ADDED`` (without, a pod that is
        there already comes as ``MODIFIED`` when it changes). Leaving the block
        unsubscribes at once. A reader that falls more than ``buffer`` changes behind
        gets every change up to there, then :class:`~asynckubelet.errors.ResyncNeeded`
        ends the iteration (the API server's ``410 Gone``): nothing is missed silently;
        watch again with ``initial`` to start from the current state.
        """
        records = self.status.list() if initial else []
        send, receive = anyio.create_memory_object_stream[tuple[str, Pod]](buffer + len(records))
        # The records the reader was last told of (the node's own, frozen: no copy is
        # kept); a deleted pod is sent as the last of them showed it.
        known: dict[str, PodRecord] = {} if initial else {r.uid: r for r in self.status.list()}
        overflowed = False

        def offer(record: PodRecord | None, uid: str) -> None:
            nonlocal overflowed
            if overflowed:
                return
            if record is None:
                old = known.pop(uid, None)
                if old is None:
                    return
                item = ("DELETED", old.api_object())
            else:
                item = ("MODIFIED" if uid in known else "ADDED", record.api_object())
                known[uid] = record
            try:
                send.send_nowait(item)
            except anyio.WouldBlock:
                overflowed = True
                unsubscribe()
                send.close()
                logger.warning("a watch() reader fell {} changes behind; it must resync", buffer)

        def ended() -> BaseException | None:
            if not overflowed:
                return None
            return errors.ResyncNeeded(
                f"the watch fell more than {buffer} changes behind; list the pods again "
                "(watch with initial=True) and watch from there"
            )

        for record in records:
            offer(record, record.uid)
        unsubscribe = self.status.subscribe(offer)
        try:
            with send, receive:
                yield _Stream(receive, ended=ended)
        finally:
            unsubscribe()

    def _pod(self, namespace: str, name: str) -> Pod:
        record = self.status.find(namespace, name)
        if record is None:
            raise errors.PodNotFound(f'pods "{name}" not found')
        return record.pod

    @contextlib.asynccontextmanager
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
    ) -> AsyncIterator[AsyncIterator[LogLine]]:
        """A container's output (the first container when none is named), a line at a
        time while the block runs::

            async with node.logs("default", "web", follow=True) as lines:
                async for line in lines:
                    ...

        An unknown pod or container raises :class:`~asynckubelet.errors.NotFound` on
        entry; the engine's errors come from the iteration. Leaving the block closes the
        connection to the engine at once. :meth:`read_logs` collects the output there is.
        """
        pod = self._pod(namespace, name)
        chosen, _ = access.default_container(pod, container)
        record = self.status.find(namespace, name)
        instance = await access.container_instance(
            self.runtime,
            pod,
            container=chosen,
            previous=previous,
            reported=record.status if record is not None else None,
        )
        lines = self.runtime.docker.logs(
            instance.id, follow=follow, tail=tail, timestamps=timestamps, since=since
        )
        try:
            yield lines
        finally:
            if isinstance(lines, AsyncGenerator):
                with anyio.CancelScope(shield=True):
                    await lines.aclose()

    async def read_logs(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        previous: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        since: float | None = None,
    ) -> builtins.list[LogLine]:
        """The output a container has written so far, as :meth:`logs` gives it."""
        async with self.logs(
            namespace,
            name,
            container=container,
            previous=previous,
            tail=tail,
            timestamps=timestamps,
            since=since,
        ) as lines:
            return [line async for line in lines]

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


class _Stream(Generic[T]):
    """The reading end of a stream, as an async iterator that ends with ``ended()``'s
    error when it gives one."""

    def __init__(
        self,
        receive: anyio.abc.ObjectReceiveStream[T],
        *,
        ended: Callable[[], BaseException | None] = lambda: None,
    ) -> None:
        self._receive = receive
        self._ended = ended

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            error = self._ended()
            if error is not None:
                raise error from None
            raise StopAsyncIteration from None


__all__ = ["Condition", "PodReads"]
