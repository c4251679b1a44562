"""The node's controllers: Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets
kept in step with their pods, CronJobs with their Jobs, and what their owners left behind
removed, and every namespace's ``default`` ServiceAccount made
(:mod:`~asynckubelet.workloads.serviceaccounts`).

A cluster's controller manager watches the API server; here the objects are in the
node's store and the pods' statuses in its status manager, so one loop reconciles every
workload whenever either changes (and again when a decision needs time to pass: a pod to
become available, a Job's back-off, a deadline). It is level-triggered: each pass reads
the whole state, asks the pure decision functions (:mod:`~asynckubelet.workloads.
deployment`, :mod:`~asynckubelet.workloads.replicaset`, :mod:`~asynckubelet.workloads.
statefulset`, :mod:`~asynckubelet.workloads.job`, :mod:`~asynckubelet.workloads.daemonset`,
:mod:`~asynckubelet.workloads.cronjob`) what to do, and does it, so a missed
wake-up, a restart or a crash in the middle only delays what the next pass does anyway.

The pods it makes are handed to the node as any source's (:meth:`~asynckubelet.node.
kubelet.Kubelet.want`, source :data:`WORKLOADS_SOURCE`) and run by the same pod workers
and ``sync_pod``; they and the ReplicaSets carry a controller owner reference, and the
garbage collector removes objects whose owner is gone (a deleted Deployment takes its
ReplicaSets, and they their pods; a deleted CronJob its Jobs; a deleted DaemonSet or
StatefulSet its ControllerRevisions, :mod:`~asynckubelet.workloads.revisions`). The
controllers' clock is given (``clock=``), so a test can move a CronJob's time on.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.manifests import jobs as job_manifests
from asynckubelet.manifests import kinds
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.objects import StoredObject
from asynckubelet.node.status_manager import PodRecord
from asynckubelet.workloads import cronjob as crons
from asynckubelet.workloads import daemonset as daemons
from asynckubelet.workloads import deployment as deploy
from asynckubelet.workloads import job as jobs
from asynckubelet.workloads import replicaset as rsets
from asynckubelet.workloads import revisions as history
from asynckubelet.workloads import serviceaccounts as accounts
from asynckubelet.workloads import statefulset as sets
from asynckubelet.workloads.pods import (
    PodView,
    controller_of,
    generate_name,
    make_pod,
    owner_reference,
)

__all__ = ["WORKLOADS_SOURCE", "Controllers"]

WORKLOADS_SOURCE = "workloads"
"""The node source of the pods and ReplicaSets the controllers make."""
OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "CronJob")
"""Kinds whose objects own others (the garbage collector follows only these)."""
COMPONENTS = {
    "Deployment": "deployment-controller",
    "ReplicaSet": "replicaset-controller",
    "StatefulSet": "statefulset-controller",
    "Job": "job-controller",
    "DaemonSet": "daemonset-controller",
    "CronJob": "cronjob-controller",
}


def _now() -> datetime:
    return datetime.now(UTC)


class Controllers:
    """The controllers of ``node``: ``await tg.start(Controllers(node).run)``."""

    def __init__(self, node: Kubelet, *, clock: Callable[[], datetime] = _now) -> None:
        self.node = node
        self._clock = clock
        self._wake = anyio.Event()
        self._counted: dict[str, set[str]] = defaultdict(set)
        """Job UID -> UIDs of its pods counted whose object is already gone."""
        self.passes = 0
        """Reconcile passes so far (for tests and metrics)."""

    def poke(self) -> None:
        """Look again soon (something changed)."""
        self._wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reconcile until cancelled."""
        stop = self.node.objects.observe(lambda _key: self.poke())
        try:
            async with anyio.create_task_group() as tg:
                watching = anyio.Event()
                tg.start_soon(self._watch_pods, watching, name="workloads: pod statuses")
                await watching.wait()
                task_status.started()
                while True:
                    self._wake = anyio.Event()
                    try:
                        requeue = await self.reconcile()
                    except Exception:
                        logger.exception("a workload reconcile pass failed; trying again in 1 s")
                        requeue = 1.0
                    with anyio.move_on_after(requeue):
                        await self._wake.wait()
        finally:
            stop()

    async def _watch_pods(self, watching: anyio.Event) -> None:
        while True:
            try:
                async with self.node.watch(initial=False) as changes:
                    watching.set()
                    async for _ in changes:
                        self.poke()
            except errors.ResyncNeeded:
                self.poke()

    # -- one pass ---------------------------------------------------------------------------

    async def reconcile(self) -> float | None:
        """One pass over every workload; seconds until the next is needed without a
        change (None: none)."""
        self.passes += 1
        now = self._clock()
        requeues: list[float] = []
        owned = self._pods()
        for obj in self._live("Deployment"):
            requeues.append(self._deployment(obj, owned, now) or -1)
        for obj in self._live("ReplicaSet"):
            requeues.append(await self._replicaset(obj, owned, now) or -1)
        for obj in self._live("StatefulSet"):
            requeues.append(await self._statefulset(obj, owned, now) or -1)
        for obj in self._live("CronJob"):
            requeues.append(await self._cronjob(obj, now) or -1)
        for obj in self._live("Job"):
            requeues.append(await self._job(obj, owned, now) or -1)
        for obj in self._live("DaemonSet"):
            requeues.append(await self._daemonset(obj, owned, now) or -1)
        await self._collect_garbage()
        self._service_accounts()
        waits = [r for r in requeues if r > 0]
        return min(waits) if waits else None

    def _live(self, kind: str) -> list[StoredObject]:
        """The objects of ``kind`` not being deleted (one deleted in the foreground is left
        to the garbage collector, as upstream's controllers leave it)."""
        found = self.node.objects.list(kind)
        return [o for o in found if not (o.body.get("metadata") or {}).get("deletionTimestamp")]

    def _pods(self) -> dict[str, list[PodView]]:
        """Owner UID -> the pods it controls: those the node stores, with their latest
        status, and those already deleted that the node is still stopping."""
        records: dict[str, PodRecord] = {r.uid: r for r in self.node.status.list()}
        owned: dict[str, list[PodView]] = defaultdict(list)
        seen: set[str] = set()
        for obj in self.node.objects.list("Pod"):
            owner = controller_of(obj.body.get("metadata"))
            if owner is None:
                continue
            pod = cast(Pod, Pod.from_dict(copy.deepcopy(dict(obj.body))))
            record = records.get(obj.uid)
            if record is not None:
                pod.status = record.status
                if record.pod.metadata is not None and pod.metadata is not None:
                    pod.metadata.deletionTimestamp = record.pod.metadata.deletionTimestamp
            owned[owner.uid].append(PodView(pod=pod))
            seen.add(obj.uid)
        for uid, record in records.items():
            if uid in seen or record.pod.metadata is None:
                continue
            owner = controller_of(record.pod.metadata.to_dict())
            if owner is None or record.pod.metadata.deletionTimestamp is None:
                continue
            owned[owner.uid].append(PodView(pod=record.api_object(), stored=False))
        return owned

    def _event(self, obj: StoredObject, type_: str, reason: str, message: str) -> None:
        self.node.recorder.record(
            namespace=obj.namespace,
            name=obj.name,
            uid=obj.uid,
            type=type_,
            reason=reason,
            message=message,
            kind=obj.kind,
            component=COMPONENTS.get(obj.kind, "controller-manager"),
        )

    def _make_pods(
        self,
        owner: StoredObject,
        template: Mapping[str, Any],
        names: Sequence[str],
        extra: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        found = kinds.KINDS[owner.kind]
        ref = owner_reference(
            api_version=found.api_version, kind=owner.kind, name=owner.name, uid=owner.uid
        )
        pods = [
            make_pod(
                template=template,
                namespace=owner.namespace,
                name=name,
                owner=ref,
                **((extra or {}).get(name) or {}),
            )
            for name in names
        ]
        self.node.want(pods, source=WORKLOADS_SOURCE)
        for pod in pods:
            assert pod.metadata is not None  # noqa: S101  (type narrowing: new_pod sets metadata)
            self._event(owner, "Normal", "SuccessfulCreate", f"Created pod: {pod.metadata.name}")

    async def _delete_pods(self, owner: StoredObject, names: Sequence[str]) -> None:
        for name in names:
            if await self.node.delete(owner.namespace, name, wait=False):
                self._event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")

    def _write(
        self,
        obj: StoredObject,
        status: Mapping[str, Any] | None,
        *,
        annotations: Mapping[str, str | None] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> None:
        self.node.objects.update_status(
            obj.kind, obj.namespace, obj.name, status, annotations=annotations, spec=spec
        )

    # -- Deployments --------------------------------------------------------------------------

    def _deployment(
        self, obj: StoredObject, owned: Mapping[str, list[PodView]], now: datetime
    ) -> float | None:
        views = []
        for rs in self.node.objects.list("ReplicaSet", obj.namespace):
            owner = controller_of(rs.body.get("metadata"))
            if owner is None or owner.uid != obj.uid:
                continue
            pods = owned.get(rs.uid, [])
            status = rsets.replicaset_status(
                pods=pods,
                selector_labels=_match_labels(rs.body),
                min_ready_seconds=int((rs.body.get("spec") or {}).get("minReadySeconds") or 0),
                generation=int(rs.body["metadata"].get("generation") or 1),
                now=now,
            )
            running = sum(1 for p in pods if not p.terminal)
            views.append(deploy.RSView(body=rs.body, status=status, old_pods_running=running))
        plan = deploy.reconcile_deployment(obj.body, views, now)
        if plan.create is not None:
            self.node.objects.put_object(plan.create, source=WORKLOADS_SOURCE)
        for name, replicas in plan.scale.items():
            target = self.node.objects.get("ReplicaSet", obj.namespace, name)
            if target is not None:
                desired = {
                    deploy.DESIRED_REPLICAS: str(deploy._replicas(obj.body)),
                    deploy.MAX_REPLICAS: str(
                        deploy._replicas(obj.body) + deploy.max_surge(obj.body)
                    ),
                }
                self._write(target, None, spec={"replicas": replicas}, annotations=desired)
        for name, added in plan.annotate.items():
            target = self.node.objects.get("ReplicaSet", obj.namespace, name)
            if target is not None:
                self._write(target, None, annotations=added)
        for name in plan.delete:
            self.node.objects.remove("ReplicaSet", obj.namespace, name)
        for type_, reason, message in plan.events:
            self._event(obj, type_, reason, message)
        self._write(obj, plan.status, annotations=plan.annotations or None)
        return plan.requeue_after

    # -- ReplicaSets ----------------------------------------------------------------------------

    async def _replicaset(
        self, obj: StoredObject, owned: Mapping[str, list[PodView]], now: datetime
    ) -> float | None:
        spec = obj.body.get("spec") or {}
        pods = owned.get(obj.uid, [])
        wanted = spec.get("replicas")
        plan = rsets.reconcile_replicaset(
            replicas=1 if wanted is None else int(wanted),
            pods=pods,
            selector_labels=_match_labels(obj.body),
            min_ready_seconds=int(spec.get("minReadySeconds") or 0),
            generation=int(obj.body["metadata"].get("generation") or 1),
            now=now,
        )
        template = dict(spec.get("template") or {})
        if plan.create:
            names = [generate_name(f"{obj.name}-") for _ in range(plan.create)]
            self._make_pods(obj, template, names)
        await self._delete_pods(obj, plan.delete)
        self._write(obj, plan.status)
        return plan.requeue_after

    # -- StatefulSets ---------------------------------------------------------------------------

    async def _statefulset(
        self, obj: StoredObject, owned: Mapping[str, list[PodView]], now: datetime
    ) -> float | None:
        spec = obj.body.get("spec") or {}
        pods = owned.get(obj.uid, [])
        revisions = self._revisions(obj, pods)
        body = _with_status(
            obj.body,
            currentRevision=revisions.current,
            collisionCount=revisions.collision_count,
        )
        plan = sets.reconcile_statefulset(body, pods, now, revision=revisions.update)
        await self._delete_pods(obj, plan.delete)
        if plan.create:
            revision = str(plan.status.get("updateRevision") or "")
            names = [f"{obj.name}-{ordinal}" for ordinal in plan.create]
            extra = {
                name: {
                    "labels": {
                        sets.REVISION_HASH: revision,
                        sets.POD_NAME: name,
                        sets.POD_INDEX: str(ordinal),
                    },
                    "hostname": name,
                    "subdomain": spec.get("serviceName") or None,
                }
                for name, ordinal in zip(names, plan.create, strict=True)
            }
            self._make_pods(obj, dict(spec.get("template") or {}), names, extra)
        self._write(obj, plan.status)
        return plan.requeue_after

    # -- Jobs -----------------------------------------------------------------------------------

    async def _job(
        self, obj: StoredObject, owned: Mapping[str, list[PodView]], now: datetime
    ) -> float | None:
        counted = self._counted[obj.uid]

        def tracked(pod: PodView) -> bool:
            if pod.stored:
                return jobs.TRACKING_FINALIZER in pod.finalizers
            return pod.uid not in counted

        pods = owned.get(obj.uid, [])
        plan = jobs.reconcile_job(obj.body, pods, now=now, tracked=tracked)
        if plan.expired:
            logger.bind(job=f"{obj.namespace}/{obj.name}").info(
                "job finished {}s ago: deleting it",
                (obj.body.get("spec") or {}).get("ttlSecondsAfterFinished"),
            )
            self.node.objects.remove("Job", obj.namespace, obj.name)
            return None
        if plan.interim is not None:
            self._write(obj, plan.interim)
            uncounted = plan.interim.get("uncountedTerminatedPods") or {}
            counted.update(uncounted.get("succeeded") or [])
            counted.update(uncounted.get("failed") or [])
        for name in plan.untrack:
            self._untrack(obj.namespace, name)
        await self._delete_pods(obj, plan.delete)
        if plan.create:
            template = dict((obj.body.get("spec") or {}).get("template") or {})
            names = [generate_name(f"{obj.name}-") for _ in range(plan.create)]
            tracking = {name: {"finalizers": [jobs.TRACKING_FINALIZER]} for name in names}
            self._make_pods(obj, template, names, tracking)
        for type_, reason, message in plan.events:
            self._event(obj, type_, reason, message)
        self._write(obj, plan.status)
        return plan.requeue_after

    def _untrack(self, namespace: str, name: str) -> None:
        """The pod's end is counted: its tracking finalizer goes."""
        pod = self.node.objects.get("Pod", namespace, name)
        if pod is None:
            return
        body = copy.deepcopy(dict(pod.body))
        meta = body.setdefault("metadata", {})
        left = [f for f in meta.get("finalizers") or [] if f != jobs.TRACKING_FINALIZER]
        if left:
            meta["finalizers"] = left
        else:
            meta.pop("finalizers", None)
        self.node.objects.put_object(body, source=pod.source)

    # -- DaemonSets ------------------------------------------------------------------------------

    def _this_node(self) -> daemons.NodeView:
        info = self.node.admitter.node
        labels = daemons.node_labels(info.name, info.labels)
        return daemons.NodeView(name=info.name, labels=labels, taints=info.taints)

    async def _daemonset(
        self, obj: StoredObject, owned: Mapping[str, list[PodView]], now: datetime
    ) -> float | None:
        spec = obj.body.get("spec") or {}
        node = self._this_node()
        pods = owned.get(obj.uid, [])
        revisions = self._revisions(obj, pods)
        body = _with_status(obj.body, collisionCount=revisions.collision_count)
        current = revisions.update_hash
        plan = daemons.reconcile_daemonset(body, pods, node, now, current=current)
        await self._delete_pods(obj, plan.delete)
        if plan.create:
            template = copy.deepcopy(dict(spec.get("template") or {}))
            pod_spec = template.setdefault("spec", {})
            pod_spec["tolerations"] = daemons.daemon_tolerations(pod_spec)
            pod_spec["affinity"] = daemons.daemon_affinity(pod_spec.get("affinity"), node.name)
            name = generate_name(f"{obj.name}-")
            labels = {
                daemons.REVISION_HASH: current,
                daemons.TEMPLATE_GENERATION: str(obj.body["metadata"].get("generation") or 1),
            }
            self._make_pods(obj, template, [name], {name: {"labels": labels}})
        self._write(obj, plan.status)
        return plan.requeue_after

    # -- revisions -------------------------------------------------------------------------------

    def _revisions(self, obj: StoredObject, pods: Sequence[PodView]) -> history.RevisionPlan:
        """The owner's ControllerRevisions brought in step with its template
        (:mod:`~asynckubelet.workloads.revisions`); what the pass goes on with."""
        store = self.node.objects
        stored = [history.Stored(r.body) for r in store.list(history.KIND, obj.namespace)]
        live = {p.labels.get(history.REVISION_HASH) or "" for p in pods} - {""}
        plan = history.plan_revisions(obj.body, stored, kind=obj.kind, live=live)
        if plan.create is not None:
            store.put_object(plan.create, source=WORKLOADS_SOURCE)
        for name, number in plan.renumber.items():
            found = store.get(history.KIND, obj.namespace, name)
            if found is not None:
                store.put_object({**found.body, "revision": number}, source=found.source)
        for name in plan.delete:
            store.remove(history.KIND, obj.namespace, name)
        return plan

    # -- CronJobs -------------------------------------------------------------------------------

    async def _cronjob(self, obj: StoredObject, now: datetime) -> float | None:
        children = [
            j.body
            for j in self.node.objects.list("Job", obj.namespace)
            if (owner := controller_of(j.body.get("metadata"))) is not None and owner.uid == obj.uid
        ]
        plan = crons.reconcile_cronjob(obj.body, children, now)
        for name in plan.delete:
            self.node.objects.remove("Job", obj.namespace, name)
        if plan.create is not None:
            job_manifests.default_job(plan.create)
            stored = self.node.objects.put_object(plan.create, source=WORKLOADS_SOURCE)
            for ref in plan.status.get("active") or []:
                if ref.get("name") == stored.name:
                    ref["uid"] = stored.uid
        for type_, reason, message in plan.events:
            self._event(obj, type_, reason, message)
        self._write(obj, plan.status)
        return plan.requeue_after

    # -- garbage collection ---------------------------------------------------------------------

    async def _collect_garbage(self) -> None:
        """Remove the ReplicaSets, ControllerRevisions and pods whose controller owner is
        gone (background propagation: the owner went first, its dependents follow)."""
        alive = {o.uid for kind in OWNER_KINDS for o in self.node.objects.list(kind)}
        for kind in ("Job", "ReplicaSet", history.KIND, "Pod"):
            for obj in self.node.objects.list(kind):
                owner = controller_of(obj.body.get("metadata"))
                if owner is None or owner.kind not in OWNER_KINDS or owner.uid in alive:
                    continue
                logger.bind(**{kind.lower(): f"{obj.namespace}/{obj.name}"}).info(
                    "its owner {} {} is gone: deleting it", owner.kind.lower(), owner.name
                )
                if kind == "Pod":
                    await self.node.delete(obj.namespace, obj.name, wait=False)
                else:
                    self.node.objects.remove(kind, obj.namespace, obj.name)
                    alive.discard(obj.uid)
            if kind != "Pod":
                alive = {o.uid for k in OWNER_KINDS for o in self.node.objects.list(k)}

    def _service_accounts(self) -> None:
        """Every namespace's ``default`` ServiceAccount made, and the made ones of
        namespaces gone removed (:mod:`~asynckubelet.workloads.serviceaccounts`)."""
        store = self.node.objects
        namespaces = [
            o.name
            for o in store.list("Namespace")
            if not accounts.terminating(o.body.get("metadata") or {})
        ]
        stored = [
            (o.namespace, o.name, o.source == WORKLOADS_SOURCE)
            for o in store.list("ServiceAccount")
        ]
        decided = accounts.decide(namespaces, stored)
        for made in decided.make:
            store.put_object(made, source=WORKLOADS_SOURCE)
        for namespace in decided.remove:
            store.remove("ServiceAccount", namespace, accounts.NAME)


def _with_status(body: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """``body`` with these status fields (those given as None left as they are)."""
    status = {
        **dict(body.get("status") or {}),
        **{k: v for k, v in fields.items() if v is not None},
    }
    return {**body, "status": status}


def _match_labels(body: Mapping[str, Any]) -> dict[str, str]:
    selector = (body.get("spec") or {}).get("selector") or {}
    return dict(selector.get("matchLabels") or {})
