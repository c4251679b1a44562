"""What the node's client commands do to its pods, as library calls.

``apply --wait`` (beside a daemon), and ``delete``, ``logs`` and ``exec`` without one, act
on the pods' state in Docker and in the state dir (see :mod:`asynckubelet.node.access`),
so any process can wait for pods to become ready,
delete them and wait until they are gone, or find the container instance to read or
enter. These functions do that on a :class:`PodRuntime` (the runtime manager's status,
kill and remove calls); they print nothing and report through return values, callbacks
and the project's exceptions.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.node.access import choose_instance, default_container, find_pod
from asynckubelet.node.failures import (
    DEFAULT_CONFIG_TIMEOUT,
    DEFAULT_MAX_RESTARTS,
    FailureWatch,
    holdups,
)
from asynckubelet.node.printpod import kubectl_status
from asynckubelet.node.status import SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import naming
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus

if TYPE_CHECKING:
    from asynckubelet.docker import DockerAPI

PodKey = tuple[str, str]
"""``(namespace, name)`` of a pod."""


class PodRuntime(Protocol):
    """The runtime calls these operations need (:class:`~asynckubelet.runtime.manager.
    RuntimeManager` has them)."""

    async def list_pod_uids(self) -> dict[str, tuple[str, str]]: ...

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus: ...

    async def kill_pod(
        self,
        pod: Pod | None = None,
        status: PodRuntimeStatus | None = None,
        *,
        grace_period: float | None = None,
    ) -> object: ...

    async def remove_pod(self, *, uid: str) -> object: ...


def pod_key(pod: Pod) -> PodKey:
    name, namespace, _ = ctr.pod_identity(pod)
    return namespace, name


# -- delete ----------------------------------------------------------------------------------


async def delete_pods(
    runtime: PodRuntime,
    *,
    pods: Collection[PodKey],
    daemon_running: bool,
    grace_period: float | None = None,
    timeout: float | None = None,
    poll_interval: float = 0.3,
) -> set[PodKey]:
    """Stop ``pods`` and wait until Docker holds nothing of them; the pods still there when
    ``timeout`` (seconds; None: no limit) ran out, an empty set when all are gone.

    With ``daemon_running`` the daemon is deleting the pods itself: this process then
    only stops the containers when ``grace_period`` overrides the pod's own, and leaves
    their removal to the daemon. Without a daemon this process stops and removes them.
    """
    wanted = set(pods)
    uids = {uid: key for uid, key in (await runtime.list_pod_uids()).items() if key in wanted}
    if not daemon_running or grace_period is not None:
        async with anyio.create_task_group() as tg:
            for uid, key in uids.items():
                tg.start_soon(_stop_pod, runtime, uid, key, grace_period, not daemon_running)
    left = set(uids)
    with anyio.move_on_after(timeout):
        while left := left & set(await runtime.list_pod_uids()):  # noqa: ASYNC110
            await anyio.sleep(poll_interval)
    return {uids[uid] for uid in left}


async def _stop_pod(
    runtime: PodRuntime, uid: str, key: PodKey, grace_period: float | None, remove: bool
) -> None:
    namespace, name = key
    status = await runtime.get_pod_status(uid=uid, name=name, namespace=namespace)
    await runtime.kill_pod(None, status, grace_period=grace_period)
    if remove:
        await runtime.remove_pod(uid=uid)


# -- logs and exec ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerTarget:
    """The container a command acts on and the Docker container of its chosen instance."""

    pod: Pod
    container: str
    container_id: str


async def find_container(
    runtime: PodRuntime,
    pods: Sequence[Pod],
    *,
    namespace: str,
    name: str,
    container: str | None,
    previous: bool = False,
    on_notice: Callable[[str], None] | None = None,
) -> ContainerTarget:
    """The pod ``namespace/name`` among ``pods``, its container (``container``, else the
    pod's default one, see :func:`~asynckubelet.node.access.default_container`) and that
    container's current instance (with ``previous``, its last dead one) on Docker now.

    ``on_notice`` gets kubectl's ``Defaulted container ...`` when the container was chosen
    for the caller, before the instance is looked up. Raises
    :class:`~asynckubelet.errors.NotFound` for a missing pod, container or instance.
    """
    pod = find_pod(list(pods), namespace=namespace, name=name)
    chosen, notice = default_container(pod, container)
    if notice and on_notice is not None:
        on_notice(notice)
    pod_name, pod_namespace, uid = ctr.pod_identity(pod)
    status = await runtime.get_pod_status(uid=uid, name=pod_name, namespace=pod_namespace)
    instance = choose_instance(pod, status, container=chosen, previous=previous)
    return ContainerTarget(pod=pod, container=chosen, container_id=instance.id)


async def next_instance(
    runtime: PodRuntime,
    *,
    pod: Pod,
    container: str,
    seen: Collection[str],
    poll_interval: float = 0.5,
) -> str | None:
    """Wait until an instance of ``container`` that is not in ``seen`` (container ids) has
    started; its id, or None once the pod will not start another (its restart policy
    leaves the container exited, or the pod's containers are gone)."""
    policy = (pod.spec.restartPolicy if pod.spec else None) or "Always"
    name, namespace, uid = ctr.pod_identity(pod)
    while True:
        status = await runtime.get_pod_status(uid=uid, name=name, namespace=namespace)
        if not status.containers:
            return None
        current = status.find_container(container)
        if (
            current is not None
            and current.id not in seen
            and current.state is not ContainerState.CREATED
        ):
            return current.id
        if (
            current is not None
            and current.state is ContainerState.EXITED
            and (policy == "Never" or (policy == "OnFailure" and current.exit_code == 0))
        ):
            return None
        await anyio.sleep(poll_interval)


INT64_MAX = 2**63 - 1


@dataclass(frozen=True, kw_only=True)
class PodLogOptions:
    """The pod ``log`` subresource's parameters, as Kubernetes' ``PodLogOptions``, and
    their query parameters on the wire (:meth:`query`, :meth:`from_query`): one place
    says what a log request may ask, for the client, the server and the in-process side.
    """

    container: str | None = None
    """None: the pod's default container."""
    follow: bool = False
    """Go on across the container's restarts until the pod will not start it again."""
    previous: bool = False
    tail_lines: int | None = None
    timestamps: bool = False
    since_seconds: int | None = None
    limit_bytes: int | None = None

    def query(self) -> dict[str, str | int | bool | None]:
        """The request's query parameters (None: left out)."""
        return {
            "container": self.container,
            "follow": self.follow,
            "previous": self.previous,
            "tailLines": self.tail_lines,
            "timestamps": self.timestamps,
            "sinceSeconds": self.since_seconds,
            "limitBytes": self.limit_bytes,
        }

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> PodLogOptions:
        """The options a request's query asks for, checked as ``ValidatePodLogOptions``
        checks them; a :class:`ValueError` naming the parameter (the API server's words)."""
        return cls(
            container=query.get("container") or None,
            follow=_flag(query, "follow"),
            previous=_flag(query, "previous"),
            tail_lines=_count(query, "tailLines", 0, "must be greater than or equal to 0"),
            timestamps=_flag(query, "timestamps"),
            since_seconds=_count(query, "sinceSeconds", 1, "must be greater than 0"),
            limit_bytes=_count(query, "limitBytes", 1, "must be greater than 0"),
        )


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true", "yes")


def _count(query: Mapping[str, str], name: str, minimum: int, message: str) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}: Invalid value: {json.dumps(text)}: must be an integer") from None
    if value > INT64_MAX:
        raise ValueError(f"{name}: Invalid value: {json.dumps(text)}: value out of range")
    if value < minimum:
        raise ValueError(f"{name}: Invalid value: {value}: {message}")
    return value


class LogRuntime(PodRuntime, Protocol):
    """The runtime calls :func:`container_log` needs: a pod's status and its engine."""

    @property
    def docker(self) -> DockerAPI: ...


async def container_log(
    runtime: LogRuntime, target: ContainerTarget, options: PodLogOptions
) -> AsyncGenerator[bytes, None]:
    """The output of ``target``'s container instance as it was written, each line with
    its newline (:attr:`~asynckubelet.docker.LogLine.newline`), at most ``limitBytes``;
    with ``follow`` (not with ``previous``), on across the container's restarts until
    the pod will not start it again (:func:`next_instance`). ``tailLines`` and
    ``sinceSeconds`` bound the first instance's output only. The engine's stream is
    closed as soon as it is left."""
    follow = options.follow and not options.previous
    tail, timestamps = options.tail_lines, options.timestamps
    since = None
    if options.since_seconds is not None:
        since = max(0.0, time.time() - options.since_seconds)
    cid, seen, left = target.container_id, {target.container_id}, options.limit_bytes
    while True:
        lines = runtime.docker.logs(
            cid, follow=follow, tail=tail, timestamps=timestamps, since=since
        )
        try:
            async for line in lines:
                data = (line.text + ("\n" if line.newline else "")).encode()
                if left is not None:
                    data = data[:left]
                    left -= len(data)
                yield data
                if left is not None and left <= 0:
                    return
        finally:
            if isinstance(lines, AsyncGenerator):
                with anyio.CancelScope(shield=True):
                    await lines.aclose()
        if not follow:
            return
        following = await next_instance(
            runtime, pod=target.pod, container=target.container, seen=seen
        )
        if following is None:
            return
        seen.add(following)
        cid, tail, since = following, None, None


# -- apply --wait ----------------------------------------------------------------------------


def spec_key(pod: Pod) -> str:
    """The pod's spec as canonical JSON: equal for equal specs."""
    return json.dumps(pod.spec.to_dict() if pod.spec else {}, sort_keys=True)


def pod_state(pod: Pod) -> str:
    """What a pod is doing, in a line: kubectl's STATUS, then what holds it back (each
    container that waits with a message, a scheduling reason) or each container that
    exited with a non-zero code; a STATUS that only repeats a container's reason is left
    out."""
    status = pod.status
    if status is None:
        return "Unknown"
    held = [f for f in holdups(status, max_restarts=None) if f.message]
    shown = kubectl_status(pod, status)
    parts = [] if shown.removeprefix("Init:") in {f.reason for f in held} else [shown]
    parts += [
        f"{f.container}: {f.reason}: {f.message}" if f.container else f"{f.reason}: {f.message}"
        for f in held
    ]
    for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        state = c.state
        if state is not None and state.terminated is not None and state.terminated.exitCode:
            term = state.terminated
            parts.append(f"{c.name}: exited {term.exitCode} ({term.reason or 'Error'})")
    return "; ".join(parts)


NOT_SEEN = "not seen by the node yet"


async def wait_until_ready(
    runtime: PodRuntime,
    *,
    pods: Sequence[Pod],
    read_pods: Callable[[], Awaitable[list[Pod]]],
    node_running: Callable[[], bool],
    timeout: float | None,
    on_ready: Callable[[Pod], None] | None = None,
    on_waiting: Callable[[Mapping[PodKey, str]], None] | None = None,
    poll_interval: float = 0.3,
    config_timeout: float | None = DEFAULT_CONFIG_TIMEOUT,
    max_restarts: int | None = DEFAULT_MAX_RESTARTS,
    last_line: Callable[[PodKey, str], Awaitable[str | None]] | None = None,
) -> None:
    """Wait until each of ``pods`` (as applied) has Succeeded, or runs the applied spec
    (every container's spec hash) and is Ready.

    ``read_pods`` reads the node's pods with their status (e.g.
    :func:`~asynckubelet.node.access.read_pods`); ``node_running`` says whether the node
    still runs. ``on_ready`` gets each pod (as read) once it is Ready, ``on_waiting`` the
    pods still waited for and why, after each look. Raises
    :class:`~asynckubelet.errors.PodError` when a pod fails, is ``SchedulingGated``, waits
    for what waiting will not bring (``pod/NAME: REASON: MESSAGE``, see
    :class:`~asynckubelet.node.failures.FailureWatch`; a ``CreateContainerConfigError``
    after ``config_timeout`` seconds, a crash loop after ``max_restarts`` restarts, with
    the container's last log line from ``last_line`` when given) or ``timeout`` (seconds;
    None: none) runs out, naming
    each pod still waited for and why; :class:`~asynckubelet.errors.RuntimeUnavailable`
    when the node stops.
    """
    pending = {pod_key(p): p for p in pods}
    last: dict[PodKey, str] = {}
    watches = {
        key: FailureWatch(
            pull_timeout=None, config_timeout=config_timeout, max_restarts=max_restarts
        )
        for key in pending
    }
    with anyio.move_on_after(timeout) as scope:
        while pending:
            if not node_running():
                raise errors.RuntimeUnavailable("the node stopped while waiting")
            current = await read_pods()
            for key, wanted in list(pending.items()):
                found = _applied(current, key, wanted)
                if found is None:
                    last[key] = NOT_SEEN
                    continue
                last[key] = pod_state(found)
                assert found.status is not None  # noqa: S101  (type narrowing: a reported pod has a status)
                failure = watches[key].observe(found.status, now=anyio.current_time())
                if failure is not None:
                    if failure.wants_log_line and last_line is not None:
                        failure = failure.with_log_line(await last_line(key, failure.container))
                    raise errors.PodError(failure.line(key[1]))
                verdict = await _verdict(runtime, found, wanted, last)
                if verdict is not None:
                    del pending[key]
                if verdict == "Ready" and on_ready is not None:
                    on_ready(found)
            if pending:
                if on_waiting is not None:
                    on_waiting({k: last.get(k, "") for k in pending})
                await anyio.sleep(poll_interval)
    if scope.cancelled_caught:
        reasons = "; ".join(f"pod/{k[1]}: {v}" for k, v in last.items() if k in pending)
        raise errors.PodError(f"timed out after {timeout:g}s waiting for {reasons}")


def _applied(current: list[Pod], key: PodKey, wanted: Pod) -> Pod | None:
    """The node's pod ``key`` once it runs the applied spec and has a status."""
    try:
        pod = find_pod(current, namespace=key[0], name=key[1])
    except errors.NotFound:
        return None
    if pod.status is None or spec_key(pod) != spec_key(wanted):
        return None
    return pod


async def _verdict(
    runtime: PodRuntime, pod: Pod, wanted: Pod, last: dict[PodKey, str]
) -> str | None:
    """``Succeeded``, or ``Ready`` (on the applied spec), when the wait for this pod is
    over; None while it goes on (``last`` then says why)."""
    assert pod.status is not None  # noqa: S101  (type narrowing: a reported pod has a status)
    key = pod_key(pod)
    name = key[1]
    if pod.status.phase == "Failed":
        raise errors.PodError(f"pod/{name} failed: {last[key]}")
    if kubectl_status(pod, pod.status) == SCHEDULING_GATED:
        raise errors.PodError(
            f"pod/{name} is SchedulingGated ({SCHEDULING_GATED_MESSAGE}); it "
            "starts once spec.schedulingGates is removed from its manifest"
        )
    if pod.status.phase == "Succeeded":
        return "Succeeded"
    ready = next((c for c in pod.status.conditions or [] if c.type == "Ready"), None)
    if ready is None or ready.status != "True":
        if ready is not None and ready.message:
            last[key] += f"; {ready.message}"
        return None
    name, namespace, uid = ctr.pod_identity(wanted)
    status = await runtime.get_pod_status(uid=uid, name=name, namespace=namespace)
    spec = wanted.spec
    hashes = {c.name: naming.hash_container(c) for c in spec.containers} if spec else {}
    reported = {c.name: c.containerID for c in pod.status.containerStatuses or []}
    applied = all(
        (instance := status.find_container(n)) is not None
        and instance.hash == h
        and instance.state is ContainerState.RUNNING
        and reported.get(n) == instance.container_id
        for n, h in hashes.items()
    )
    if not applied:
        last[key] += "; the edited containers are not running yet"
    return "Ready" if applied else None
