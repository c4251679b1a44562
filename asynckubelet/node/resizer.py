"""The kubelet's side of in-place resize over its pod workers.

A new spec of a pod the node runs goes through :class:`~asynckubelet.node.resizes.Allocations`:
a resize that fits is the worker's new pod, one that does not keeps the resources allocated
and is pending. A ``Deferred`` resize (one that does not fit beside the other pods) is tried
again, as the kubelet's allocation manager retries pending resizes, whenever room may have
been made: a pod left the node, a pod ended (``Succeeded`` or ``Failed``), or another pod's
resize was taken on (a pod made smaller). They are tried in the order they were deferred.

A restarted node starts from the allocation its pods' status files recorded: it admits a
pod it runs already by the resources allocated to it, and a resize still pending stays
pending rather than being carried out unchecked.
"""

from __future__ import annotations

from lightkube.models.core_v1 import Pod

from asynckubelet._logging import logger
from asynckubelet.node.admission import NodeAdmitter
from asynckubelet.node.foreground import WorkerEntry
from asynckubelet.node.resizes import Allocations, allocated_of, is_resize
from asynckubelet.runtime import containers as ctr


class Resizer:
    """Resizes taken on, left pending and retried, over the kubelet's pod workers."""

    admitter: NodeAdmitter
    resizes: Allocations
    _entries: dict[str, WorkerEntry]
    _saved: dict[str, Pod]

    def _admitted(self) -> list[Pod]:
        raise NotImplementedError

    def _allocated(self, pod: Pod) -> Pod:
        """``pod`` with the resources the node had allocated to it before it restarted
        (:func:`~asynckubelet.node.resizes.allocated_of`): what admission counts, as the
        kubelet admits a pod it runs already by its checkpointed allocation."""
        saved = self._saved.get(ctr.pod_identity(pod)[2])
        return (allocated_of(pod, saved) if saved is not None else None) or pod

    def _give(self, uid: str, entry: WorkerEntry, wanted: Pod) -> bool:
        """Give ``entry``'s worker the pod ``wanted``, or ``wanted`` with the resources it
        has while its resize is pending; whether a resize was taken on."""
        running = entry.worker.pod
        others = [p for p in self._admitted() if ctr.pod_identity(p)[2] != uid]
        pod = self.resizes.take(uid, entry.worker, wanted, node=self.admitter.node, others=others)
        if (running.spec, running.metadata) != (pod.spec, pod.metadata):
            name, ns, _ = ctr.pod_identity(pod)
            logger.bind(pod=f"{ns}/{name}").info("pod spec changed; syncing to the new spec")
            entry.worker.update(pod)
        else:
            entry.worker.poke()
        return entry.worker.resize_pending is None and is_resize(running, pod)

    def _resize(self, uid: str, entry: WorkerEntry, wanted: Pod) -> None:
        """:meth:`_give`, then the deferred resizes tried again if one was taken on."""
        if self._give(uid, entry, wanted):
            self._retry_deferred()

    def _retry_deferred(self) -> None:
        """Try every deferred resize again, once each, oldest first."""
        for uid in self.resizes.deferred():
            entry = self._entries.get(uid)
            wanted = entry.worker.desired if entry is not None else None
            if entry is None or entry.deleting or wanted is None:
                self.resizes.forget(uid)
                continue
            if self._give(uid, entry, wanted):
                name, ns, _ = ctr.pod_identity(wanted)
                logger.bind(pod=f"{ns}/{name}").info("deferred resize taken on")


__all__ = ["Resizer"]
