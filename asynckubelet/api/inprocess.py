"""The node API's in-process side: a node with no daemon, read and acted on directly.

State lives in Docker and the state dir, so any process can rebuild a node's view
(:func:`~asynckubelet.node.access.read_pods`): the pods from their containers and the
status files, the events from the events file, the other objects from what the daemon
stored. Answers take the shapes the local API gives (:mod:`asynckubelet.api.rows` for
tables), so a command prints the same whichever side answered. What only a running node
can do (watch, workloads' pods, admission) is refused, naming the daemon it needs.

The engine's client is async; the API's methods block. The runtime runs in a portal (an
event loop in a thread of its own), opened on the first call that needs Docker and closed
with :meth:`InProcessNode.close`, shielded and bounded so a command stopped by a signal
still ends promptly.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from asynckubelet import errors
from asynckubelet.api.protocol import ExecTarget, PodLogOptions, daemon_needed

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal
    from lightkube.models.core_v1 import Pod

    from asynckubelet.docker import DockerAPI
    from asynckubelet.node.objects import StoredObject
    from asynckubelet.runtime.manager import RuntimeManager

CLOSE_TIMEOUT = 10.0
"""Seconds the runtime's connection may take to close, also after a signal."""
NAME_LABEL = "kubernetes.io/metadata.name"


@contextlib.asynccontextmanager
async def node_runtime(
    *, node_name: str, docker_host: str | None, docker: DockerAPI | None = None
) -> AsyncIterator[RuntimeManager]:
    """The node's runtime on its engine (``docker``: that client instead of one for
    ``docker_host``); closed shielded from cancellation, within :data:`CLOSE_TIMEOUT`."""
    from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

    config = RuntimeConfig(node_name=node_name, docker_url=docker_host)
    rm = RuntimeManager(config, docker=docker)
    await rm.__aenter__()
    try:
        yield rm
    finally:
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await rm.__aexit__(None, None, None)


async def node_pods(rm: RuntimeManager, state: Path) -> list[Pod]:
    """Every pod of the node with its status; a clear error when the engine is down."""
    from asynckubelet.node.access import read_pods

    if not await rm.docker.ping():
        raise errors.RuntimeUnavailable(
            f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
        )
    return await read_pods(rm, state=state)


class InProcessNode:
    """:class:`~asynckubelet.api.protocol.NodeAPI` over Docker and the state dir."""

    def __init__(
        self,
        *,
        state: Path,
        node_name: str,
        docker_host: str | None,
        docker: DockerAPI | None = None,
    ) -> None:
        self.state = state
        self.node_name = node_name
        self.docker_host = docker_host
        self.docker = docker
        """The engine's client to use (tests: a fake); None: one for ``docker_host``."""
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._rm: RuntimeManager | None = None
        self._snapshot: builtins.list[Pod] | None = None

    @property
    def remote(self) -> bool:
        return False

    # -- the engine -----------------------------------------------------------------------

    def _runtime(self) -> tuple[BlockingPortal, RuntimeManager]:
        if self._portal is None or self._rm is None:
            from anyio.from_thread import start_blocking_portal

            portal = self._stack.enter_context(start_blocking_portal())
            runtime = node_runtime(
                node_name=self.node_name, docker_host=self.docker_host, docker=self.docker
            )
            self._rm = self._stack.enter_context(portal.wrap_async_context_manager(runtime))
            self._portal = portal
        return self._portal, self._rm

    def _call(self, function: Callable[[RuntimeManager], Coroutine[Any, Any, Any]]) -> Any:
        portal, rm = self._runtime()
        return portal.call(function, rm)

    def _pods(self) -> builtins.list[Pod]:
        from asynckubelet.kubectl.pods import bound_node
        from asynckubelet.runtime import containers as ctr

        pods = self.read_pods()
        for pod in pods:
            if pod.spec is not None and not pod.spec.nodeName:
                pod.spec.nodeName = bound_node(pod, node_name=self.node_name)
            pod.apiVersion, pod.kind = "v1", "Pod"
        return sorted(pods, key=lambda p: (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0]))

    def read_pods(self) -> builtins.list[Pod]:
        """Every pod of the node with its status, rebuilt from Docker and the state dir
        once (a command's snapshot of its node)."""
        if self._snapshot is None:
            self._snapshot = self._call(lambda rm: node_pods(rm, self.state))
        return list(self._snapshot)

    def close(self) -> None:
        self._portal = self._rm = None
        self._stack.close()

    # -- reading --------------------------------------------------------------------------

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        if resource == "pods":
            from asynckubelet.kubectl.pods import pod_document
            from asynckubelet.node.access import find_pod

            found = find_pod(self._pods(), namespace=namespace or "default", name=name)
            return pod_document(found)
        found_bodies = [b for b in self._bodies(resource, namespace, None) if _name(b) == name]
        if not found_bodies:
            raise _not_found(resource, name)
        return found_bodies[0]

    def list(
        self, resource: str, namespace: str | None, *, selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        from asynckubelet.kubectl.pods import pod_document

        wanted = _selector(resource, selector)
        if resource == "pods":
            return [pod_document(p) for p in self._selected_pods(namespace, wanted)]
        return self._bodies(resource, namespace, wanted)

    def table(
        self,
        resource: str,
        namespace: str | None,
        name: str | None = None,
        *,
        selector: str | None = None,
    ) -> dict[str, Any]:
        from asynckubelet.api import rows

        wanted = _selector(resource, selector)
        if resource == "pods":
            pods = self._selected_pods(namespace, wanted)
            if name is not None:
                pods = [p for p in pods if p.metadata is not None and p.metadata.name == name]
                if not pods:
                    raise _not_found(resource, name)
            return rows.pod_table(self.node_name, pods)
        bodies = self._bodies(resource, namespace, wanted)
        if name is not None:
            bodies = [b for b in bodies if _name(b) == name]
            if not bodies:
                raise _not_found(resource, name)
        if resource == "events":
            return rows.event_table(bodies)
        if resource == "namespaces":
            return rows.namespace_table(bodies)
        return rows.object_table(_kind(resource), [_stored(b) for b in bodies])

    def events(self, namespace: str, *, uid: str | None = None) -> builtins.list[dict[str, Any]]:
        """The events of ``namespace``; with ``uid``, a pod's own (those of an earlier pod
        of its name and uid left out), as the daemon lists them."""
        from asynckubelet.kubectl.objects import event_seen
        from asynckubelet.kubectl.times import now_utc
        from asynckubelet.node.access import StateDir
        from asynckubelet.node.events import read_pod_events
        from asynckubelet.runtime import containers as ctr

        if uid is None:
            return self._events(namespace)
        pod = next((p for p in self._pods() if ctr.pod_identity(p)[2] == uid), None)
        if pod is None:
            return [b for b in self._events(namespace) if _uid(b) == uid]
        found = read_pod_events(StateDir(self.state).events, pod, now=now_utc())
        return sorted((e.to_v1() for e in found if e.namespace == namespace), key=event_seen)

    def watch(
        self,
        namespace: str | None,
        *,
        name: str | None = None,
        table: bool = False,
        selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        raise daemon_needed(self.state, "get --watch")

    def _selected_pods(
        self, namespace: str | None, wanted: dict[str, Any] | None
    ) -> builtins.list[Pod]:
        from asynckubelet.manifests.selectors import selector_matches
        from asynckubelet.runtime import containers as ctr

        pods = self._pods()
        if namespace is not None:
            pods = [p for p in pods if ctr.pod_identity(p)[1] == namespace]
        if wanted is not None:
            pods = [
                p
                for p in pods
                if selector_matches(wanted, (p.metadata.labels if p.metadata else None) or {})
            ]
        return pods

    def _bodies(
        self, resource: str, namespace: str | None, wanted: dict[str, Any] | None
    ) -> builtins.list[dict[str, Any]]:
        """Events or the objects the daemon kept, of ``namespace`` (None: of all), by
        namespace and name (events: by when they were last seen)."""
        from asynckubelet.manifests.selectors import selector_matches

        if resource == "endpoints":
            raise errors.DaemonError(
                "endpoints follow the pods of a running node daemon; start `asynckubelet serve`"
            )
        if resource == "events":
            bodies = self._events(namespace)
        else:
            bodies = self._kept(resource, namespace)
        return [
            b
            for b in bodies
            if wanted is None
            or selector_matches(wanted, (b.get("metadata") or {}).get("labels") or {})
        ]

    def _events(self, namespace: str | None) -> builtins.list[dict[str, Any]]:
        """The events the node recorded in its state dir (an hour's, as the daemon serves
        them), oldest first, as v1 Events."""
        from asynckubelet.kubectl.objects import event_seen
        from asynckubelet.kubectl.times import now_utc
        from asynckubelet.node.access import StateDir
        from asynckubelet.node.events import read_events

        bodies = [
            e.to_v1()
            for e in read_events(StateDir(self.state).events, now=now_utc())
            if namespace is None or e.namespace == namespace
        ]
        return sorted(bodies, key=event_seen)

    def _kept(self, resource: str, namespace: str | None) -> builtins.list[dict[str, Any]]:
        from asynckubelet.node.objects import (
            OBJECTS_DIR,
            object_key,
            read_persisted,
            secret_summary,
        )
        from asynckubelet.workloads import WORKLOADS_SOURCE

        kind = _kind(resource)
        kept = self.state / OBJECTS_DIR
        bodies = [*read_persisted(kept), *read_persisted(kept / WORKLOADS_SOURCE)]
        if kind == "Namespace":
            namespace = None
            bodies = _with_default_namespace(bodies)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for body in bodies:
            meta = body.get("metadata") or {}
            key = object_key(str(body.get("kind")), meta.get("namespace"), str(meta.get("name")))
            if key[0] != kind or (namespace is not None and key[1] != namespace):
                continue
            found[(key[1], key[2])] = secret_summary(body) if kind == "Secret" else dict(body)
        return [found[k] for k in sorted(found)]

    # -- acting ---------------------------------------------------------------------------

    def node(self) -> dict[str, Any]:
        return {"node_name": self.node_name, "docker_host": self.docker_host}

    def apply(
        self,
        files: Sequence[tuple[str, str]],
        *,
        prune_selector: str | None = None,
        prune_all: bool = False,
    ) -> dict[str, Any]:
        raise daemon_needed(self.state, "apply")

    def restart(
        self, namespace: str, name: str, containers: Sequence[str], *, grace_period: int
    ) -> builtins.list[str]:
        raise daemon_needed(self.state, "a restart in place")

    def delete(
        self,
        objects: Sequence[Mapping[str, str]],
        *,
        grace_period: float | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> builtins.list[dict[str, str]]:
        """Pods are stopped and removed on Docker; every object is also dropped from those
        the daemon kept in the state dir, so the next ``serve`` does not bring it back.
        This process does the stopping itself, so it returns once the pods are gone
        whatever ``wait`` says."""
        from asynckubelet.node.objects import OBJECTS_DIR, forget_persisted
        from asynckubelet.node.operations import pod_key

        kept = self.state / OBJECTS_DIR
        results = [
            {"kind": o["kind"], "namespace": o["namespace"], "name": o["name"]} for o in objects
        ]
        pods = {(r["namespace"], r["name"]) for r in results if r["kind"] == "Pod"}
        forgotten = {
            (r["kind"], r["namespace"], r["name"])
            for r in results
            if forget_persisted(kept, r["kind"], r["namespace"], r["name"])
        }
        present: set[tuple[str, str]] = set()
        left: set[tuple[str, str]] = set()
        if pods:
            present = {pod_key(p) for p in self.read_pods()} & pods
            left = self._call(lambda rm: _delete_pods(rm, present, grace_period, timeout))
        present |= {(ns, name) for kind, ns, name in forgotten if kind == "Pod"}
        for result in results:
            key = (result["namespace"], result["name"])
            if result["kind"] == "Pod":
                gone = key in present and key not in left
                result["status"] = "timeout" if key in left else "deleted" if gone else "notfound"
            else:
                found = (result["kind"], *key) in forgotten
                result["status"] = "deleted" if found else "notfound"
        return results

    # -- pod subresources -----------------------------------------------------------------

    def log(self, namespace: str, name: str, options: PodLogOptions) -> Iterator[bytes]:
        """The container's output from Docker; with ``follow``, on across its restarts
        until the pod will not start it again."""
        pods = self.read_pods()
        portal, rm = self._runtime()
        send, receive = anyio.create_memory_object_stream[bytes](16)

        async def pump() -> None:
            async with send:
                pieces = _log_pieces(rm, pods, namespace, name, options)
                try:
                    async for piece in pieces:
                        await send.send(piece)
                finally:
                    await pieces.aclose()

        future = portal.start_task_soon(pump)
        try:
            while True:
                try:
                    yield portal.call(receive.receive)
                except anyio.EndOfStream:
                    break
            future.result()
        finally:
            if not future.done():
                future.cancel()
            portal.call(receive.aclose)

    def exec_target(self, namespace: str, name: str, container: str | None) -> ExecTarget:
        from asynckubelet.node.operations import find_container

        pods = self.read_pods()

        async def find(rm: RuntimeManager) -> str:
            target = await find_container(
                rm,
                pods,
                namespace=namespace,
                name=name,
                container=container,
            )
            return target.container_id

        container_id: str = self._call(find)
        return ExecTarget(
            container_id=container_id, docker_host=self.docker_host, node_name=self.node_name
        )


async def _delete_pods(
    rm: RuntimeManager,
    present: set[tuple[str, str]],
    grace_period: float | None,
    timeout: float | None,
) -> set[tuple[str, str]]:
    from asynckubelet.node.operations import delete_pods

    if not present:
        return set()
    return await delete_pods(
        rm, pods=present, daemon_running=False, grace_period=grace_period, timeout=timeout
    )


async def _log_pieces(
    rm: RuntimeManager, pods: list[Pod], namespace: str, name: str, options: PodLogOptions
) -> AsyncGenerator[bytes, None]:
    from asynckubelet.node.operations import container_log, find_container

    target = await find_container(
        rm,
        pods,
        namespace=namespace,
        name=name,
        container=options.container,
        previous=options.previous,
    )
    pieces = container_log(rm, target, options)
    try:
        async for piece in pieces:
            yield piece
    finally:
        await pieces.aclose()


def _uid(body: dict[str, Any]) -> str | None:
    return (body.get("involvedObject") or {}).get("uid")


def _name(body: dict[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name"))


def _kind(resource: str) -> str:
    from asynckubelet.kubectl import resources

    found = resources.by_plural(resource)
    if found is None:
        raise errors.DaemonError(f'the server doesn\'t have a resource type "{resource}"')
    return found.kind


def _not_found(resource: str, name: str) -> errors.DaemonError:
    """kubectl's NotFound, naming the resource with its group (``cronjobs.batch``)."""
    from asynckubelet.kubectl.resources import by_plural

    known = by_plural(resource)
    shown = known.qualified_plural if known is not None else resource
    return errors.DaemonError(f'{shown} "{name}" not found', status=404, reason="NotFound")


def _selector(resource: str, selector: str | None) -> dict[str, Any] | None:
    """``selector`` parsed as the daemon parses it; refused as the daemon refuses it."""
    if not selector:
        return None
    from asynckubelet.manifests.selectors import parse_label_selector

    try:
        return parse_label_selector(selector)
    except ValueError as e:
        raise errors.DaemonError(str(e), status=400, reason="BadRequest") from None


def _stored(body: dict[str, Any]) -> StoredObject:
    from asynckubelet.node.objects import StoredObject, object_key

    meta = body.get("metadata") or {}
    kind, namespace, name = object_key(
        str(body.get("kind")), meta.get("namespace"), str(meta.get("name"))
    )
    return StoredObject(kind=kind, namespace=namespace, name=name, body=body, source="")


def _with_default_namespace(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects kept, with the ``default`` Namespace (always there) and every
    Namespace labelled with its name, as the API server serves them."""
    stored = {
        str((b.get("metadata") or {}).get("name")) for b in bodies if b.get("kind") == "Namespace"
    }
    if "default" not in stored:
        bodies = [
            *bodies,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        ]
    for body in bodies:
        if body.get("kind") == "Namespace":
            meta = body.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: str(meta.get("name"))}
    return bodies
