"""Pods from the API server, run by the node as the kubelet runs them.

The :class:`~asynckubelet.cluster.reflector.PodReflector` keeps the pods bound to this
node; this decides what becomes of each, as the kubelet's pod config and ``HandlePod*``
do, and hands the result to the node (:class:`~asynckubelet.node.kubelet.Kubelet`), one
source per pod (``apiserver:<uid>``) so that a change of one pod wakes only its worker:

* A new pod is checked as a manifest would be (defaulting, validation, Pod Security):
  one the API server holds but this node finds invalid gets phase ``Failed``, reason
  ``FailedValidation`` and the field errors as its message, and nothing is created. Then
  admission (:class:`~asynckubelet.node.admission.NodeAdmitter`) against the pods the node
  already runs, in creation order: a pod the node cannot take (``OutOfcpu``,
  ``NodeAffinity``, ``NodePorts``, ``TaintToleration``...) gets the kubelet's rejection
  status. A pod that already ran here (after a restart) is not admitted again; a pod whose
  phase is terminal is handed over as it is and never starts again.
* Before a pod is handed over, the ConfigMaps and Secrets it names are read (and then
  watched, :mod:`asynckubelet.cluster.objects`); a change of one is handed over again, and
  the node rewrites the pod's volumes with it.
* A pod with ``deletionTimestamp`` is stopped with its ``deletionGracePeriodSeconds``
  (preStop hooks run), and once its containers are gone it is deleted for good: grace 0
  and its UID as precondition, as the kubelet's status manager does when
  ``canBeDeleted``. A pod that vanished from the API server (a forced delete) is stopped
  with its own grace period.
* Mirror pods (``kubernetes.io/config.mirror``) are the API server's view of this node's
  static pods: they are never run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet import _trace, errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.objects import ObjectCache, pod_object_refs
from asynckubelet.cluster.reporter import PodStatusReporter
from asynckubelet.cluster.retry import call
from asynckubelet.manifests import Level, Manifests, inspect_manifests_text
from asynckubelet.node.admission import NodeAdmitter, NodeInfo
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.status import TERMINAL_PHASES, rejected_status

SOURCE_PREFIX = "apiserver:"
SOURCE_READY = "apiserver"
"""The name under which the node waits for the first list before housekeeping."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FAILED_VALIDATION = "FailedValidation"

State = Literal["running", "rejected", "terminating", "gone"]


def source_name(uid: str) -> str:
    return f"{SOURCE_PREFIX}{uid}"


def is_mirror(pod: Pod) -> bool:
    return bool(pod.metadata and MIRROR_ANNOTATION in (pod.metadata.annotations or {}))


def pod_key(pod: Pod) -> str:
    meta = pod.metadata
    return f"{(meta.namespace if meta else None) or 'default'}/{meta.name if meta else ''}"


@dataclass
class _Tracked:
    api: Pod
    state: State
    local: Pod | None = None
    """The validated pod handed to the node (defaults applied)."""
    spec_key: str = ""
    given: str = ""
    """What was last handed to the node (metadata, spec, object versions)."""


@dataclass(frozen=True)
class Validated:
    pod: Pod | None
    message: str = ""


def validate(pod: Pod, *, node_name: str, pod_security: Level) -> Validated:
    """The API pod checked as a manifest: the defaulted pod, or the field errors."""
    doc = pod.to_dict()
    doc.pop("status", None)
    doc["apiVersion"], doc["kind"] = "v1", "Pod"
    meta = doc.setdefault("metadata", {})
    for volatile in ("managedFields", "resourceVersion", "selfLink"):
        meta.pop(volatile, None)
    report = inspect_manifests_text(
        json.dumps(doc),
        source_name=f"pod {pod_key(pod)}",
        pod_security=pod_security,
        node_name=node_name,
        node_labels=True,
    )
    if report.errors or not report.manifests.pods:
        text = "; ".join(str(e) for e in report.errors) or "not accepted"
        return Validated(None, text)
    return Validated(report.manifests.pods[0])


def _spec_key(pod: Pod) -> str:
    return json.dumps(pod.spec.to_dict() if pod.spec else {}, sort_keys=True, default=str)


def _fingerprint(local: Pod, objects: list[Any]) -> str:
    meta = local.metadata.to_dict() if local.metadata is not None else {}
    spec = local.spec.to_dict() if local.spec is not None else {}
    versions = [
        (type(o).__name__, o.metadata.name, o.metadata.resourceVersion)
        for o in objects
        if o.metadata is not None
    ]
    return json.dumps([meta, spec, versions], sort_keys=True, default=str)


def _grace(pod: Pod) -> float | None:
    meta = pod.metadata
    if meta is not None and meta.deletionGracePeriodSeconds is not None:
        return float(meta.deletionGracePeriodSeconds)
    return None


def _created(pod: Pod) -> datetime:
    stamp = pod.metadata.creationTimestamp if pod.metadata else None
    return stamp if isinstance(stamp, datetime) else datetime.min.replace(tzinfo=UTC)


@dataclass
class ApiPodSource:
    """Drives the node from the API server's pods (see the module docstring)."""

    api: ClusterAPI
    kubelet: Kubelet
    objects: ObjectCache
    reporter: PodStatusReporter
    node_info: Callable[[], NodeInfo]
    host_port_in_use: Callable[[str, str, int], bool] | None = None
    pod_security: Level = "baseline"
    tracked: dict[str, _Tracked] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)
    _pods: Mapping[str, Pod] = field(default_factory=dict)
    _wake: anyio.Event = field(default_factory=anyio.Event)
    _tg: anyio.abc.TaskGroup | None = None
    synced: anyio.Event = field(default_factory=anyio.Event)
    """Set once the first list of pods has been acted on."""

    @property
    def node_name(self) -> str:
        return self.kubelet.node_name

    # -- input ---------------------------------------------------------------------------

    def on_change(self, pods: Mapping[str, Pod], changed: set[str]) -> None:
        """The reflector's callback: remember, and let :meth:`run` act."""
        self._pods = pods
        if _trace.enabled():
            for uid in changed - self.tracked.keys() - self._dirty:
                if uid in pods:
                    _trace.mark("bound", uid)
        self._dirty |= changed
        self._wake.set()

    def on_object_change(self, ref: Any) -> None:
        """A ConfigMap or Secret changed: hand its pods over again."""
        for uid, tracked in self.tracked.items():
            if tracked.state == "running" and ref in pod_object_refs(tracked.api):
                self._dirty.add(uid)
        self._wake.set()

    # -- the loop ------------------------------------------------------------------------

    async def run(
        self,
        *,
        first_list: anyio.Event,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Act on changes until cancelled; the node's housekeeping waits for the first
        list (``first_list``) to be acted on."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await first_list.wait()
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                dirty, self._dirty = self._dirty, set()
                for uid in self._order(dirty):
                    try:
                        await self.handle(uid)
                    except Exception:
                        logger.exception("handling pod {} failed", uid)
                if not self.synced.is_set():
                    self.synced.set()
                    self.kubelet.source_ready(SOURCE_READY)

    def _order(self, uids: set[str]) -> list[str]:
        def key(uid: str) -> tuple[datetime, str]:
            pod = self._pods.get(uid)
            return (_created(pod) if pod is not None else datetime.min.replace(tzinfo=UTC), uid)

        return sorted(uids, key=key)

    async def handle(self, uid: str) -> None:
        pod = self._pods.get(uid)
        tracked = self.tracked.get(uid)
        if pod is None:
            self._vanished(uid, tracked)
            return
        if is_mirror(pod):
            return
        self.reporter.observe(uid, pod)
        meta = pod.metadata
        assert meta is not None  # noqa: S101  (type narrowing: an API object has metadata)
        if meta.deletionTimestamp is not None:
            await self._deleting(uid, pod, tracked)
            return
        if tracked is None:
            await self._new(uid, pod)
            return
        tracked.api = pod
        if tracked.state == "running":
            await self._hand_over(uid, tracked)

    # -- cases ---------------------------------------------------------------------------

    async def _new(self, uid: str, pod: Pod) -> None:
        checked = validate(pod, node_name=self.node_name, pod_security=self.pod_security)
        if checked.pod is None:
            logger.bind(pod=pod_key(pod)).warning("pod refused: {}", checked.message)
            self.tracked[uid] = _Tracked(api=pod, state="rejected")
            self._reject(uid, pod, FAILED_VALIDATION, checked.message)
            return
        api_phase = pod.status.phase if pod.status is not None else None
        ran_here = api_phase == "Running" or self.kubelet.has_pod(uid)
        if api_phase not in TERMINAL_PHASES:
            admitter = NodeAdmitter(
                node=self.node_info(),
                host_port_in_use=self.host_port_in_use,
                ignore_unadvertised_extended=True,
            )
            rejection = admitter.admit(
                checked.pod, admitted=self.active_pods(), static=False, running=ran_here
            )
            if rejection is not None:
                logger.bind(pod=pod_key(pod)).warning(
                    "pod rejected: {}: {}", rejection.reason, rejection.message
                )
                self.tracked[uid] = _Tracked(api=pod, state="rejected")
                self._reject(uid, pod, rejection.reason, rejection.message)
                return
        tracked = _Tracked(api=pod, state="running", local=checked.pod, spec_key=_spec_key(pod))
        self.tracked[uid] = tracked
        await self._hand_over(uid, tracked)

    async def _hand_over(self, uid: str, tracked: _Tracked, *, wait: bool = True) -> None:
        """Give the node the pod as it is now, with its ConfigMaps and Secrets; a pod
        whose objects were never read is given once they are (in a task of its own, so
        that other pods do not wait), unless ``wait`` is False."""
        pod = tracked.api
        key = _spec_key(pod)
        if tracked.local is None or key != tracked.spec_key:
            checked = validate(pod, node_name=self.node_name, pod_security=self.pod_security)
            if checked.pod is None:
                logger.bind(pod=pod_key(pod)).warning("pod update refused: {}", checked.message)
                return
            tracked.local, tracked.spec_key = checked.pod, key
        self.reporter.track(uid, pod)
        pending = self.objects.hold(uid, pod_object_refs(tracked.local))
        if pending and wait:
            assert self._tg is not None  # noqa: S101  (type narrowing: set while the source runs)
            self._tg.start_soon(self._give_when_read, uid, tracked, pending)
            return
        self._give(uid, tracked)

    async def _give_when_read(
        self, uid: str, tracked: _Tracked, pending: list[anyio.Event]
    ) -> None:
        await self.objects.first_reads(pending)
        if self.tracked.get(uid) is tracked and tracked.state == "running":
            self._give(uid, tracked)

    def _give(self, uid: str, tracked: _Tracked) -> None:
        assert tracked.local is not None  # noqa: S101  (type narrowing: given only once checked)
        local = _with_api_state(tracked.local, tracked.api)
        configmaps, secrets, data = self.objects.pod_objects(local)
        given = _fingerprint(local, [*configmaps, *secrets])
        if given == tracked.given:
            return
        tracked.given = given
        self.kubelet.set_source(
            source_name(uid),
            Manifests(
                pods=(local,),
                configmaps=tuple(configmaps),
                secrets=tuple(secrets),
                secret_data=data,
            ),
        )

    async def _deleting(self, uid: str, pod: Pod, tracked: _Tracked | None) -> None:
        if tracked is not None and tracked.state == "terminating":
            if _grace(pod) is not None:
                self.kubelet.terminate(uid, grace_period=_grace(pod))
            tracked.api = pod
            return
        if tracked is None:
            checked = validate(pod, node_name=self.node_name, pod_security=self.pod_security)
            if checked.pod is not None:
                tracked = _Tracked(api=pod, state="running", local=checked.pod)
            else:
                tracked = _Tracked(api=pod, state="rejected")
            self.tracked[uid] = tracked
        tracked.api = pod
        if tracked.state == "running" and not self.kubelet.has_pod(uid):
            await self._hand_over(uid, tracked, wait=False)
        was_running = tracked.state == "running"
        tracked.state = "terminating"
        done = self.kubelet.terminate(uid, grace_period=_grace(pod)) if was_running else None
        logger.bind(pod=pod_key(pod)).info(
            "pod deleted on the API server; stopping it (grace {} s)", _grace(pod)
        )
        assert self._tg is not None  # noqa: S101  (type narrowing: set while the source runs)
        self._tg.start_soon(self._finish_delete, uid, done, name=f"delete {pod_key(pod)}")

    async def _finish_delete(self, uid: str, done: anyio.Event | None) -> None:
        if done is not None:
            await done.wait()
        tracked = self.tracked.get(uid)
        if tracked is None:
            return
        pod = tracked.api
        meta = pod.metadata
        assert meta is not None  # noqa: S101  (type narrowing: an API object has metadata)
        await self.reporter.flush(uid)
        try:
            await call(
                lambda: self.api.delete_pod(
                    meta.namespace or "default", meta.name or "", uid=uid, grace_period=0
                )
            )
            logger.bind(pod=pod_key(pod)).info("pod's containers are gone; deleted it")
        except errors.ClusterAPIError as e:
            if not (e.not_found or e.conflict):
                logger.bind(pod=pod_key(pod)).warning("deleting the pod failed: {}", e)
        except errors.ClusterError as e:
            logger.bind(pod=pod_key(pod)).warning("deleting the pod failed: {}", e)
        self._forget(uid)

    def _vanished(self, uid: str, tracked: _Tracked | None) -> None:
        if tracked is None or tracked.state == "terminating":
            return
        if tracked.state != "running":
            self._forget(uid)
            return
        logger.bind(pod=pod_key(tracked.api)).info("pod removed from the API server; stopping it")
        tracked.state = "terminating"
        done = self.kubelet.terminate(uid, grace_period=_grace(tracked.api))
        assert self._tg is not None  # noqa: S101  (type narrowing: set while the source runs)
        self._tg.start_soon(self._forget_when_done, uid, done, name=f"stop {pod_key(tracked.api)}")

    async def _forget_when_done(self, uid: str, done: anyio.Event | None) -> None:
        if done is not None:
            await done.wait()
        self._forget(uid)

    def _forget(self, uid: str) -> None:
        self.tracked.pop(uid, None)
        self.objects.release(uid)
        self.reporter.forget(uid)
        self.kubelet.set_source(source_name(uid), Manifests())

    def _reject(self, uid: str, pod: Pod, reason: str, message: str) -> None:
        if pod.status is not None and pod.status.phase in TERMINAL_PHASES:
            return
        status = rejected_status(pod, reason=reason, message=message, now=datetime.now(UTC))
        self.kubelet.recorder(pod, type="Warning", reason=reason, message=message)
        self.reporter.track(uid, pod)
        self.reporter.want(uid, status)

    # -- admission bookkeeping -----------------------------------------------------------

    def active_pods(self) -> list[Pod]:
        """Pods the node runs and that count at admission: cluster pods not finished,
        and the node's other (static) pods."""
        active: list[Pod] = []
        for uid, tracked in self.tracked.items():
            if tracked.state != "running" or tracked.local is None:
                continue
            if _finished(tracked.api.status) or _finished(self._local_status(uid)):
                continue
            active.append(tracked.local)
        for record in self.kubelet.status.list():
            if record.uid in self.tracked or _finished(record.status):
                continue
            active.append(record.pod)
        return active

    def _local_status(self, uid: str) -> PodStatus | None:
        record = self.kubelet.status.get(uid)
        return record.status if record is not None else None


def _finished(status: PodStatus | None) -> bool:
    return status is not None and status.phase in TERMINAL_PHASES


def _with_api_state(local: Pod, api: Pod) -> Pod:
    """The validated pod with the API pod's current metadata (volatile fields dropped)
    and status (:func:`_worth_keeping`), so that a relabel reaches the downward API and a
    restart keeps the start time and a terminal phase."""
    out = cast(Pod, Pod.from_dict(local.to_dict()))
    meta = cast(Pod, Pod.from_dict(api.to_dict())).metadata
    if meta is not None:
        meta.managedFields = None
        meta.resourceVersion = None
        out.metadata = meta
    out.status = _worth_keeping(api.status)
    return out


def _worth_keeping(status: PodStatus | None) -> PodStatus | None:
    """What of the API server's status the node's pod worker starts from: the start time,
    transition times and container states; a reason and message only with a terminal
    phase (a ``FailedSync`` the node once reported must not outlive the failure)."""
    if status is None:
        return None
    kept = cast(PodStatus, PodStatus.from_dict(status.to_dict()))
    if kept.phase not in TERMINAL_PHASES:
        kept.reason = kept.message = None
    return kept


__all__ = [
    "FAILED_VALIDATION",
    "MIRROR_ANNOTATION",
    "SOURCE_READY",
    "ApiPodSource",
    "Validated",
    "is_mirror",
    "source_name",
    "validate",
]
