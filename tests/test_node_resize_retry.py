"""Deferred resizes tried again, as the kubelet's allocation manager retries them, when room
may have been made: a pod left the node, a pod ended, or another pod was made smaller."""

from __future__ import annotations

from dataclasses import dataclass, field

import builders
from lightkube.models.core_v1 import Pod

from asynckubelet.node.admission import NodeAdmitter, NodeInfo, NodeResources
from asynckubelet.node.foreground import WorkerEntry
from asynckubelet.node.resizer import Resizer
from asynckubelet.node.resizes import Allocations, Pending

NODE = NodeInfo(name="n", allocatable=NodeResources(cpu_millis=2000, memory=4 * 2**30))


def pod(name: str, cpu: str) -> Pod:
    both = {"cpu": cpu, "memory": "64Mi"}
    res = {"requests": dict(both), "limits": dict(both)}
    return builders.pod(name, uid=name, containers=[builders.container(resources=res)])


@dataclass
class Worker:
    """The parts of a pod worker a resize touches."""

    pod: Pod
    resize_pending: Pending | None = None
    desired: Pod | None = None
    updates: list[Pod] = field(default_factory=list)

    def update(self, pod: Pod) -> None:
        self.pod = pod
        self.updates.append(pod)

    def poke(self) -> None:
        pass


class Node(Resizer):
    def __init__(self, *pods: Pod) -> None:
        self.admitter = NodeAdmitter(node=NODE)
        self.resizes = Allocations()
        self._entries = {}
        for p in pods:
            self.add(p)

    def add(self, p: Pod) -> None:
        uid = p.metadata.uid if p.metadata is not None and p.metadata.uid else ""
        self._entries[uid] = WorkerEntry(
            worker=Worker(p),  # type: ignore[arg-type]
            source="api",
            stop=None,  # type: ignore[arg-type]
            done=None,  # type: ignore[arg-type]
            seen=0.0,
        )

    def _admitted(self) -> list[Pod]:
        return [e.worker.pod for e in self._entries.values() if not e.deleting]

    def want(self, p: Pod) -> None:
        uid = p.metadata.uid if p.metadata is not None and p.metadata.uid else ""
        self._resize(uid, self._entries[uid], p)

    def cpu(self, uid: str) -> str:
        spec = self._entries[uid].worker.pod.spec
        assert spec is not None
        resources = spec.containers[0].resources
        assert resources is not None
        assert resources.limits is not None
        return str(resources.limits["cpu"])

    def pending(self, uid: str) -> str | None:
        found = self._entries[uid].worker.resize_pending
        return None if found is None else found.reason


def test_a_resize_that_does_not_fit_is_deferred_with_the_resources_kept() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "1"))
    assert (node.pending("a"), node.cpu("a")) == ("Deferred", "500m")
    assert node.resizes.deferred() == ["a"]


def test_a_deferred_resize_is_taken_on_once_a_pod_leaves_the_node() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "1"))
    del node._entries["hog"]
    node._retry_deferred()
    assert (node.pending("a"), node.cpu("a")) == (None, "1")
    assert node.resizes.deferred() == []


def test_a_deferred_resize_is_taken_on_once_another_pod_is_made_smaller() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "1"))
    node.want(pod("hog", "900m"))
    assert (node.pending("hog"), node.cpu("hog")) == (None, "900m")
    assert (node.pending("a"), node.cpu("a")) == (None, "1")


def test_a_deferred_resize_that_still_does_not_fit_stays_deferred() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "1"))
    node.want(pod("hog", "1300m"))
    assert (node.pending("a"), node.cpu("a")) == ("Deferred", "500m")


def test_deferred_resizes_are_tried_oldest_first_and_the_first_that_fits_wins() -> None:
    node = Node(pod("a", "200m"), pod("b", "200m"), pod("hog", "1500m"))
    node.want(pod("b", "500m"))
    node.want(pod("a", "500m"))
    assert node.resizes.deferred() == ["b", "a"]
    node.want(pod("hog", "1200m"))
    assert (node.pending("b"), node.cpu("b")) == (None, "500m")
    assert (node.pending("a"), node.cpu("a")) == ("Deferred", "200m")


def test_an_infeasible_resize_is_not_retried() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "3"))
    del node._entries["hog"]
    node._retry_deferred()
    assert (node.pending("a"), node.cpu("a")) == ("Infeasible", "500m")


def test_a_deferred_pod_that_is_being_deleted_is_forgotten() -> None:
    node = Node(pod("a", "500m"), pod("hog", "1400m"))
    node.want(pod("a", "1"))
    node._entries["a"].deleting = True
    del node._entries["hog"]
    node._retry_deferred()
    assert node.resizes.deferred() == []
    assert node.cpu("a") == "500m"
