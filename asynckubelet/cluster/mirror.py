"""Mirror pods: the node's static pods, shown in the API server.

Static pods come from the node's manifest directory, not from the API server; as the
kubelet's mirror client does (``pkg/kubelet/pod/mirror_client.go``), the node makes a
*mirror pod* for each, so that ``kubectl get pods`` lists it and the scheduler counts it:
a pod named ``<name>-<node>`` (the name the kubelet's file source gives a static pod)
bound to this node, owned by its Node, with the annotations ``kubernetes.io/config.mirror``
and ``kubernetes.io/config.hash`` (the static pod's UID here) and
``kubernetes.io/config.source: file``. Its status is the static pod's, sent by the status
reporter; events about the static pod refer to it. A mirror pod that is stale (its static
pod changed or is gone) or that someone deleted is deleted for good (grace 0, its UID as
precondition), and made again while the static pod runs.

The NodeRestriction admission plugin lets a node create only such pods, and only when
they name no Secret, ConfigMap, service account or claim: a static pod that does is run
but gets no mirror (a warning says why, once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.reporter import PodStatusReporter
from asynckubelet.cluster.retry import call
from asynckubelet.cluster.source import MIRROR_ANNOTATION, is_mirror, pod_key
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.status_manager import PodRecord

HASH_ANNOTATION = "kubernetes.io/config.hash"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
SEEN_ANNOTATION = "kubernetes.io/config.seen"
RECONCILE = 10.0


def mirror_name(name: str, node: str) -> str:
    return f"{name}-{node}"


def mirror_of(static: Pod, *, node_name: str, node_uid: str | None) -> Pod:
    """The mirror pod of a static pod."""
    body: dict[str, Any] = static.to_dict()
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    spec["nodeName"] = node_name
    for field_name in ("serviceAccountName", "serviceAccount", "automountServiceAccountToken"):
        spec.pop(field_name, None)
    uid = meta.get("uid") or ""
    annotations = dict(meta.get("annotations") or {})
    annotations.update(
        {
            MIRROR_ANNOTATION: uid,
            HASH_ANNOTATION: uid,
            SOURCE_ANNOTATION: "file",
            SEEN_ANNOTATION: datetime.now(UTC).isoformat(),
        }
    )
    new_meta: dict[str, Any] = {
        "name": mirror_name(meta.get("name") or "", node_name),
        "namespace": meta.get("namespace") or "default",
        "labels": meta.get("labels") or {},
        "annotations": annotations,
    }
    if node_uid:
        new_meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
            }
        ]
    return cast(
        Pod, Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": new_meta, "spec": spec})
    )


def mirror_static_uid(pod: Pod) -> str:
    return str(((pod.metadata.annotations if pod.metadata else None) or {}).get(MIRROR_ANNOTATION))


class MirrorPods:
    """Keeps one mirror pod per static pod of the node."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        kubelet: Kubelet,
        reporter: PodStatusReporter,
        cluster_pods: Callable[[], Mapping[str, Pod]],
        is_cluster_pod: Callable[[str], bool],
        node_uid: Callable[[], str | None],
        period: float = RECONCILE,
    ) -> None:
        self.api = api
        self.kubelet = kubelet
        self.reporter = reporter
        self.cluster_pods = cluster_pods
        self.is_cluster_pod = is_cluster_pod
        self.node_uid = node_uid
        self.period = period
        self._wake = anyio.Event()
        self._refused: set[str] = set()
        self.mirrors: dict[str, str] = {}
        """static pod uid -> mirror pod uid, for those made or found."""

    def poke(self) -> None:
        self._wake.set()

    def attach(self) -> Callable[[], None]:
        def changed(record: PodRecord | None, uid: str) -> None:
            if not self.is_cluster_pod(uid):
                self.poke()

        return self.kubelet.status.subscribe(changed)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            try:
                await self.reconcile()
            except errors.ClusterError as e:
                logger.warning("mirror pods not reconciled: {}", e)
            with anyio.move_on_after(self.period):
                await self._wake.wait()
            self._wake = anyio.Event()

    def _statics(self) -> dict[str, PodRecord]:
        return {
            record.uid: record
            for record in self.kubelet.status.list()
            if not self.is_cluster_pod(record.uid)
        }

    async def reconcile(self) -> None:
        node = self.kubelet.node_name
        statics = self._statics()
        found: dict[str, Pod] = {}
        for pod in self.cluster_pods().values():
            if not is_mirror(pod):
                continue
            owner = mirror_static_uid(pod)
            meta = pod.metadata
            assert meta is not None  # noqa: S101  (type narrowing: an API object has metadata)
            record = statics.get(owner)
            expected = mirror_name(ctr_name(record.pod), node) if record is not None else None
            if record is None or meta.deletionTimestamp is not None or meta.name != expected:
                await self._delete(pod)
                continue
            found[owner] = pod
        for uid, record in statics.items():
            mirror = found.get(uid)
            if mirror is None:
                mirror = await self._create(uid, record.pod)
                if mirror is None:
                    continue
            assert mirror.metadata is not None  # noqa: S101  (type narrowing: an API object has metadata)
            self.mirrors[uid] = mirror.metadata.uid or ""
            self.reporter.track(uid, mirror, api_uid=mirror.metadata.uid)
            self.reporter.observe(uid, mirror)
            self.reporter.want(uid, record.status)
        for uid in [u for u in self.mirrors if u not in statics]:
            del self.mirrors[uid]
            self.reporter.forget(uid)

    async def _create(self, uid: str, static: Pod) -> Pod | None:
        mirror = mirror_of(static, node_name=self.kubelet.node_name, node_uid=self.node_uid())
        try:
            created = await call(lambda: self.api.create_pod(mirror))
        except errors.ClusterAPIError as e:
            if e.conflict:
                return None
            if uid not in self._refused:
                self._refused.add(uid)
                logger.warning("no mirror pod for static pod {}: {}", ctr_name(static), e)
            return None
        logger.bind(pod=pod_key(mirror)).info("mirror pod created for static pod {}", uid)
        return created

    async def _delete(self, pod: Pod) -> None:
        meta = pod.metadata
        assert meta is not None  # noqa: S101  (type narrowing: an API object has metadata)
        try:
            await call(
                lambda: self.api.delete_pod(
                    meta.namespace or "default", meta.name or "", uid=meta.uid, grace_period=0
                )
            )
        except errors.ClusterAPIError as e:
            if not (e.not_found or e.conflict):
                raise


def ctr_name(pod: Pod) -> str:
    return (pod.metadata.name if pod.metadata else None) or ""


__all__ = ["MirrorPods", "mirror_name", "mirror_of"]
