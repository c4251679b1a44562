"""``apply --wait``: each applied object waited for until it is ready, or cannot be.

Pods Ready (or Succeeded) on the applied spec, Deployments rolled out, Jobs complete,
StatefulSets and ReplicaSets ready, Services that select pods with a ready endpoint; while
it waits it names, per object, the pod and container that hold it back with the kubelet's
reason and message, and it ends as soon as one cannot get there (see
:mod:`asynckubelet.node.failures`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from asynckubelet.cli.client import as_pod
from asynckubelet.cli.options import NodeRef
from asynckubelet.cli.output import err, escape, made, out

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.api.protocol import NodeAPI

__all__ = ["DEFAULT_MAX_RESTARTS", "item_name", "wait_applied"]


def item_name(item: Mapping[str, Any]) -> str:
    """``deployment.apps/web``."""
    resource = str(item.get("resource") or str(item.get("kind", "")).lower())
    return f"{resource}/{item.get('name', '')}"


POLL = 0.3
"""Seconds between looks at the workloads waited for."""
DEFAULT_MAX_RESTARTS = 3
LOG_LINE_BYTES = 4096
"""Bytes of a crash-looping container's output read for its last line."""


async def _wait_services(
    services: list[dict[str, Any]], api: NodeAPI, timeout: float, waiting: Any
) -> None:
    """Wait until each Service that selects pods has a ready endpoint (a Service without
    a selector, or an ExternalName, has nothing to wait for)."""
    import anyio
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.kubectl.objects import endpoint_addresses

    left = {
        (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        for body in services
        if (spec := body.get("spec") or {}).get("selector") and spec.get("type") != "ExternalName"
        for meta in [body.get("metadata") or {}]
    }
    try:
        with anyio.fail_after(timeout):
            while left:
                for namespace, name in sorted(left):
                    try:
                        found = await anyio.to_thread.run_sync(
                            api.get, "endpoints", namespace, name
                        )
                    except errors.NotFound:
                        continue
                    ready = endpoint_addresses(found)
                    if not ready:
                        waiting(f"service/{name}", "no ready endpoint")
                    else:
                        waiting(f"service/{name}", None)
                        count = len(ready)
                        out.print(
                            f"service/{escape(name)} ready: {count} "
                            f"{'endpoint' if count == 1 else 'endpoints'}"
                        )
                        left.discard((namespace, name))
                if left:
                    await anyio.sleep(0.2)
    except TimeoutError:
        names = ", ".join(f"service/{n}" for _, n in sorted(left))
        raise errors.PodError(
            f"timed out after {timeout:g}s waiting for ready endpoints: {names} (no ready pod "
            "matches the selector; see `asynckubelet describe service NAME`)"
        ) from None


async def wait_applied(
    pods: list[Pod],
    workloads: list[dict[str, Any]],
    services: list[dict[str, Any]],
    api: NodeAPI,
    node: NodeRef,
    timeout: float,
    config_timeout: float,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
) -> None:
    """Wait for the pods (their applied spec hashes confirmed on the engine the daemon
    drives: the daemon's status says Ready a moment before a changed container has been
    replaced), the workloads' readiness and the Services' endpoints, together."""
    import anyio

    from asynckubelet.cli.progress import WaitDisplay

    display = WaitDisplay(console=made(err), live=err.is_terminal)
    pending: dict[str, str] = {}

    def waiting(key: str, why: str | None) -> None:
        if why is None:
            pending.pop(key, None)
        else:
            pending[key] = why
        display.update(dict(pending))

    with display:
        async with anyio.create_task_group() as tg:
            if pods:
                tg.start_soon(
                    _wait_pods, pods, api, node, (timeout, config_timeout, max_restarts), waiting
                )
            if workloads:
                tg.start_soon(
                    _wait_workloads,
                    workloads,
                    api,
                    (timeout, config_timeout, max_restarts),
                    waiting,
                )
            if services:
                tg.start_soon(_wait_services, services, api, timeout, waiting)


async def _last_line(api: NodeAPI, namespace: str, name: str, container: str) -> str | None:
    """The last line a crash-looping container wrote (its instance that died), if any."""
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.node.operations import PodLogOptions

    options = PodLogOptions(
        container=container, previous=True, tail_lines=1, limit_bytes=LOG_LINE_BYTES
    )

    def read() -> str | None:
        try:
            data = b"".join(api.log(namespace, name, options))
        except errors.AsyncKubeletError:
            return None
        lines = data.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else None

    return await anyio.to_thread.run_sync(read)


Limits = tuple[float, float, int]
"""``(timeout, config_timeout, max_restarts)`` of a wait."""


async def _wait_pods(
    pods: list[Pod],
    api: NodeAPI,
    node: NodeRef,
    limits: Limits,
    waiting: Any,
) -> None:
    import anyio.to_thread

    from asynckubelet.node.daemon import socket_answers, socket_path
    from asynckubelet.node.operations import PodKey, wait_until_ready
    from asynckubelet.node.printpod import kubectl_status
    from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

    info = await anyio.to_thread.run_sync(api.node)
    seen: set[str] = set()

    def ready(pod: Pod) -> None:
        assert pod.metadata is not None and pod.status is not None  # noqa: S101  (type narrowing: a reported pod has metadata and status)
        waiting(f"pod/{pod.metadata.name}", None)
        out.print(
            f"pod/{escape(pod.metadata.name or '')} {escape(kubectl_status(pod, pod.status))}"
        )

    def still(reasons: Mapping[PodKey, str]) -> None:
        for (_, name), reason in reasons.items():
            seen.add(name)
            waiting(f"pod/{name}", reason)

    async def read_pods() -> list[Pod]:
        found = await anyio.to_thread.run_sync(api.list, "pods", None)
        return [as_pod(p) for p in found]

    config = RuntimeConfig(
        node_name=str(info.get("node_name") or node.name),
        docker_url=node.docker_host or str(info.get("docker_host") or "") or None,
    )
    timeout, config_timeout, max_restarts = limits

    async def last_line(key: PodKey, container: str) -> str | None:
        return await _last_line(api, key[0], key[1], container)

    async with RuntimeManager(config) as rm:
        await wait_until_ready(
            rm,
            pods=pods,
            read_pods=read_pods,
            node_running=lambda: socket_answers(socket_path(node.state)),
            timeout=timeout,
            config_timeout=config_timeout,
            max_restarts=max_restarts,
            last_line=last_line,
            on_ready=ready,
            on_waiting=still,
        )


WorkloadKey = tuple[str, str, str]
"""``(kind, namespace, name)``."""


async def _read_workloads(
    api: NodeAPI, left: Mapping[WorkloadKey, str]
) -> dict[WorkloadKey, dict[str, Any]]:
    """Each workload's object as the daemon has it now; a deleted one is an error."""
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.kubectl import resources

    bodies: dict[WorkloadKey, dict[str, Any]] = {}
    for key, shown in left.items():
        kind, namespace, name = key
        found = resources.lookup(kind)
        if found is None:
            raise errors.PodError(f"{shown}: unknown kind {kind}")
        try:
            bodies[key] = await anyio.to_thread.run_sync(api.get, found.plural, namespace, name)
        except errors.DaemonError as e:
            if e.reason != "NotFound":
                raise
            raise errors.PodError(f"{shown} was deleted while waiting") from None
    return bodies


def _live_pods_of(
    key: WorkloadKey, pods: list[dict[str, Any]], owners: Mapping[str, WorkloadKey]
) -> Iterator[dict[str, Any]]:
    """The pods that ``key`` controls (through its ReplicaSets too), neither deleted nor
    finished, and those the node rejected (what they say holds the workload back)."""
    from asynckubelet.node.status import REJECTED_MESSAGE_PREFIX, TERMINAL_PHASES
    from asynckubelet.workloads.pods import controller_of

    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = controller_of(meta)
        status = pod.get("status") or {}
        if owner is None or owners.get(owner.uid) != key:
            continue
        rejected = str(status.get("message") or "").startswith(REJECTED_MESSAGE_PREFIX)
        if meta.get("deletionTimestamp") or (
            status.get("phase") in TERMINAL_PHASES and not rejected
        ):
            continue
        yield pod


async def _wait_workloads(
    items: list[dict[str, Any]],
    api: NodeAPI,
    limits: Limits,
    waiting: Any,
) -> None:
    """Poll the daemon until every workload is ready, naming the pod and container that
    hold each back; fail on the first that failed, or whose pods wait for what will not
    come."""
    import anyio
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.node.failures import FailureWatch, holding_back
    from asynckubelet.workloads.readiness import readiness

    timeout, config_timeout, max_restarts = limits
    left = {(str(i["kind"]), str(i["namespace"]), str(i["name"])): item_name(i) for i in items}
    watches: dict[str, FailureWatch] = {}
    last: dict[str, str] = {}
    with anyio.move_on_after(timeout) as scope:
        while left:
            bodies = await _read_workloads(api, left)
            pods = await anyio.to_thread.run_sync(api.list, "pods", None)
            owners = _owner_chain(bodies, await _replicasets(api, bodies))
            for key, body in bodies.items():
                shown = left[key]
                verdict = readiness(key[0], body)
                if verdict.state == "failed":
                    raise errors.PodError(f"{shown} failed: {verdict.message}")
                if verdict.state == "ready":
                    waiting(shown, None)
                    out.print(f"{escape(shown)} {escape(verdict.message)}")
                    del left[key]
                    continue
                mine = [as_pod(pod) for pod in _live_pods_of(key, pods, owners)]
                for pod in mine:
                    assert pod.metadata is not None and pod.status is not None  # noqa: S101  (type narrowing: a listed pod has metadata and status)
                    watch = watches.setdefault(
                        str(pod.metadata.uid),
                        FailureWatch(
                            pull_timeout=None,
                            config_timeout=config_timeout,
                            max_restarts=max_restarts,
                        ),
                    )
                    failure = watch.observe(pod.status, now=anyio.current_time())
                    if failure is None:
                        continue
                    name = pod.metadata.name or ""
                    if failure.wants_log_line:
                        namespace = pod.metadata.namespace or "default"
                        text = await _last_line(api, namespace, name, failure.container)
                        failure = failure.with_log_line(text)
                    raise errors.PodError(f"{shown}: {failure.line(name)}")
                held = holding_back(mine, max_restarts=None)
                why = verdict.message + (f"; {held[1].line(held[0])}" if held else "")
                last[shown] = why
                waiting(shown, why)
            if left:
                await anyio.sleep(POLL)
    if scope.cancelled_caught:
        reasons = "; ".join(f"{shown}: {last.get(shown, 'not ready')}" for shown in left.values())
        raise errors.PodError(f"timed out after {timeout:g}s waiting for {reasons}")


async def _replicasets(
    api: NodeAPI, bodies: Mapping[tuple[str, str, str], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    import anyio.to_thread

    spaces = {ns for kind, ns, _ in bodies if kind == "Deployment"}
    found: list[dict[str, Any]] = []
    for namespace in spaces:
        found += await anyio.to_thread.run_sync(api.list, "replicasets", namespace)
    return found


def _owner_chain(
    bodies: Mapping[tuple[str, str, str], Mapping[str, Any]],
    replicasets: list[dict[str, Any]],
) -> dict[str, tuple[str, str, str]]:
    """Owner UID -> the workload waited for whose pods it owns (a Deployment's through
    its current ReplicaSet: an old one's pods, on their way out, hold no rollout back)."""
    from asynckubelet.workloads.deployment import REVISION
    from asynckubelet.workloads.pods import controller_of

    owners: dict[str, tuple[str, str, str]] = {}
    revisions: dict[str, object] = {}
    for key, body in bodies.items():
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        owners[uid] = key
        revisions[uid] = (meta.get("annotations") or {}).get(REVISION)
    for rs in replicasets:
        meta = rs.get("metadata") or {}
        owner = controller_of(meta)
        if owner is None or owner.uid not in owners:
            continue
        wanted = revisions.get(owner.uid)
        if wanted is not None and (meta.get("annotations") or {}).get(REVISION) != wanted:
            continue
        owners[str(meta.get("uid"))] = owners[owner.uid]
    return owners
