"""ConfigMaps and Secrets of the API server, for the pods that use them.

A pod's environment (``env[].valueFrom``, ``envFrom``), its ``configMap``, ``secret`` and
``projected`` volumes and its ``imagePullSecrets`` name objects of its namespace. As the
kubelet's ``Watch`` change-detection strategy does (the default since 1.14), each object
that some pod on the node refers to is watched on its own (a list and watch by
``metadata.name``, which is all the Node authorizer lets a node read), for as long as a
pod that refers to it runs; an update reaches the pod (:attr:`ObjectCache.on_change`), and
the node rewrites the pod's volumes with it as a cluster's kubelet does. A pod is handed
to the node once each of its objects has been read once (or could not be, after a short
wait: a missing object is then the kubelet's ``CreateContainerConfigError`` or
``FailedMount``, until it appears).

Watches reconnect with back-off and list again when their version is too old; a refusal
(the Node authorizer learns of a new pod's objects a moment after the pod is bound) is
retried the same way. Secret values live only in memory, never in a log line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import ConfigMap, Pod, Secret

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI, ObjectKind, configmap_parts, secret_bytes
from asynckubelet.cluster.retry import Reconnect

FIRST_READ_WAIT = 5.0
"""Seconds a new pod waits for its objects' first read before it is handed over anyway."""


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: ObjectKind
    namespace: str
    name: str


def pod_object_refs(pod: Pod) -> set[ObjectRef]:  # noqa: C901  (mirrors upstream VisitPodConfigmapNames and VisitPodSecretNames)
    """Every ConfigMap and Secret the pod refers to."""
    ns = (pod.metadata.namespace if pod.metadata else None) or "default"
    spec = pod.spec
    if spec is None:
        return set()
    refs: set[ObjectRef] = set()

    def add(kind: ObjectKind, name: str | None) -> None:
        if name:
            refs.add(ObjectRef(kind, ns, name))

    for volume in spec.volumes or []:
        if volume.configMap is not None:
            add("ConfigMap", volume.configMap.name)
        if volume.secret is not None:
            add("Secret", volume.secret.secretName)
        if volume.projected is not None:
            for source in volume.projected.sources or []:
                if source.configMap is not None:
                    add("ConfigMap", source.configMap.name)
                if source.secret is not None:
                    add("Secret", source.secret.name)
    for container in [*(spec.initContainers or []), *spec.containers]:
        for env in container.env or []:
            ref = env.valueFrom
            if ref is not None and ref.configMapKeyRef is not None:
                add("ConfigMap", ref.configMapKeyRef.name)
            if ref is not None and ref.secretKeyRef is not None:
                add("Secret", ref.secretKeyRef.name)
        for env_from in container.envFrom or []:
            if env_from.configMapRef is not None:
                add("ConfigMap", env_from.configMapRef.name)
            if env_from.secretRef is not None:
                add("Secret", env_from.secretRef.name)
    for pull in spec.imagePullSecrets or []:
        add("Secret", pull.name)
    return refs


@dataclass(eq=False)
class _Watched:
    ref: ObjectRef
    owners: set[str] = field(default_factory=set)
    value: Any = None
    """The object, or None when it does not exist (or was never read)."""
    read: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class ObjectCache:
    """The ConfigMaps and Secrets that pods on the node refer to, kept current."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        on_change: Callable[[ObjectRef], None] = lambda ref: None,
        first_read_wait: float = FIRST_READ_WAIT,
    ) -> None:
        self.api = api
        self.on_change = on_change
        self.first_read_wait = first_read_wait
        self._watched: dict[ObjectRef, _Watched] = {}
        self._tg: anyio.abc.TaskGroup | None = None

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

    def watched(self) -> list[ObjectRef]:
        return sorted(self._watched)

    def hold(self, owner: str, refs: Iterable[ObjectRef]) -> list[anyio.Event]:
        """Make ``owner`` (a pod UID) hold ``refs`` (and only those): new ones are
        watched, ones it no longer names are let go. Returns the events of those not read
        yet (see :meth:`first_reads`)."""
        assert self._tg is not None, "ObjectCache.run() is not running"  # noqa: S101  (a programming error, not input: used before run())
        wanted = set(refs)
        for ref, held in list(self._watched.items()):
            if owner in held.owners and ref not in wanted:
                self._drop(owner, ref)
        pending = []
        for ref in wanted:
            watched = self._watched.get(ref)
            if watched is None:
                watched = _Watched(ref)
                self._watched[ref] = watched
                self._tg.start_soon(self._watch, watched, name=f"watch {ref.kind} {ref.name}")
            watched.owners.add(owner)
            if not watched.read.is_set():
                pending.append(watched.read)
        return pending

    async def first_reads(self, pending: Iterable[anyio.Event]) -> None:
        """Wait until each object has been read once, ``first_read_wait`` s at most."""
        with anyio.move_on_after(self.first_read_wait):
            for read in pending:
                await read.wait()

    async def acquire(self, owner: str, refs: Iterable[ObjectRef]) -> None:
        """:meth:`hold`, then wait for the first reads."""
        await self.first_reads(self.hold(owner, refs))

    def release(self, owner: str) -> None:
        """``owner`` is gone: objects no other pod holds are no longer watched."""
        for ref, watched in list(self._watched.items()):
            if owner in watched.owners:
                self._drop(owner, ref)

    def _drop(self, owner: str, ref: ObjectRef) -> None:
        watched = self._watched[ref]
        watched.owners.discard(owner)
        if not watched.owners:
            watched.scope.cancel()
            del self._watched[ref]

    def get(self, ref: ObjectRef) -> Any:
        watched = self._watched.get(ref)
        return watched.value if watched is not None else None

    def _set(self, watched: _Watched, value: Any) -> None:
        changed = _content(watched.value) != _content(value)
        watched.value = value
        first = not watched.read.is_set()
        watched.read.set()
        if changed and not first:
            self.on_change(watched.ref)

    async def _watch(self, watched: _Watched) -> None:
        ref = watched.ref
        reconnect = Reconnect()
        with watched.scope:
            version: str | None = None
            while True:
                try:
                    if version is None:
                        listed = await self.api.list_object(ref.kind, ref.namespace, ref.name)
                        self._set(watched, listed.items[0] if listed.items else None)
                        version = listed.resource_version
                    async for kind, obj in self.api.watch_object(
                        ref.kind, ref.namespace, ref.name, resource_version=version
                    ):
                        reconnect.succeeded()
                        if obj.metadata is not None and obj.metadata.resourceVersion:
                            version = obj.metadata.resourceVersion
                        self._set(watched, None if kind == "DELETED" else obj)
                    reconnect.succeeded()
                except errors.ClusterAPIError as e:
                    if e.gone:
                        version = None
                        continue
                    _log_failure(ref, e, reconnect.failures)
                    await reconnect.failed()
                except errors.ClusterError as e:
                    _log_failure(ref, e, reconnect.failures)
                    await reconnect.failed()

    # -- what a pod gets -----------------------------------------------------------------

    def configmaps(self, namespace: str) -> Iterator[ConfigMap]:
        for ref, watched in self._watched.items():
            if ref.kind == "ConfigMap" and ref.namespace == namespace and watched.value:
                yield watched.value

    def secrets(self, namespace: str) -> Iterator[Secret]:
        for ref, watched in self._watched.items():
            if ref.kind == "Secret" and ref.namespace == namespace and watched.value:
                yield watched.value

    def pod_objects(
        self, pod: Pod
    ) -> tuple[list[ConfigMap], list[Secret], dict[tuple[str, str], dict[str, bytes]]]:
        """The pod's ConfigMaps and Secrets as they are now, and the Secrets' decoded data
        keyed by ``(namespace, name)`` (the shape :class:`~asynckubelet.manifests.Manifests`
        holds)."""
        configmaps: list[ConfigMap] = []
        secrets: list[Secret] = []
        data: dict[tuple[str, str], dict[str, bytes]] = {}
        for ref in sorted(pod_object_refs(pod)):
            value = self.get(ref)
            if value is None:
                continue
            if ref.kind == "ConfigMap":
                configmaps.append(value)
            else:
                secrets.append(value)
                data[(ref.namespace, ref.name)] = secret_bytes(value)
        return configmaps, secrets, data


def _content(obj: Any) -> Any:
    if obj is None:
        return None
    if isinstance(obj, ConfigMap):
        return ("ConfigMap", configmap_parts(obj))
    if isinstance(obj, Secret):
        return ("Secret", obj.type, secret_bytes(obj))
    return obj


def _log_failure(ref: ObjectRef, error: Exception, failures: int) -> None:
    log = logger.warning if failures == 0 else logger.debug
    log("watching {} {}/{} failed; retrying: {}", ref.kind, ref.namespace, ref.name, error)


__all__ = ["FIRST_READ_WAIT", "ObjectCache", "ObjectRef", "pod_object_refs"]
