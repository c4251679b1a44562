"""``Kubelet.list_events`` (the library's read) lists a pod's events as the node's API
does: those that happened before the pod was created, an earlier pod's of the same name
and so the same uid, are not the pod's own and are left out."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import containers as ctr
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

POD = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: busybox}
"""


def _kubelet(tmp_path: Path) -> Kubelet:
    config = KubeletConfig(
        node_name="n1",
        state_dir=tmp_path,
        pause_image="pause",
        pod_security="privileged",
        check_host_ports=False,
        housekeeping_period=3600,
    )
    return Kubelet(config, docker=FakeDocker(images=["pause", "busybox"]))


def _event(uid: str, reason: str, at: timedelta, node: Kubelet) -> PodEvent:
    stored = node.objects.get("Pod", "default", "web")
    assert stored is not None
    created = stored.created()
    assert created is not None
    return PodEvent(
        namespace="default",
        pod="web",
        uid=uid,
        type="Normal",
        reason=reason,
        message="Stopping container app",
        first_timestamp=created + at - timedelta(minutes=5),
        last_timestamp=created + at,
        count=2,
        container="app",
    )


async def _loaded(node: Kubelet, *events: PodEvent) -> None:
    assert node.recorder.path is not None
    with node.recorder.path.open("a") as f:
        for event in events:
            f.write(json.dumps(event.to_json()) + "\n")
    assert node.recorder.load() == len(events)


async def test_a_pods_events_from_before_its_creation_are_not_listed(tmp_path: Path) -> None:
    pod = load_manifests_text(POD, node_name="n1", pod_security="privileged").pods[0]
    async with _kubelet(
        tmp_path,
    ) as node:
        await node.apply(pod)
        await node.wait("default", "web", "Running", timeout=10)
        uid = ctr.pod_identity(pod)[2]
        before = _event(uid, "Killing", -timedelta(seconds=1), node)
        after = _event(uid, "BackOff", timedelta(seconds=1), node)
        await _loaded(node, before, after)
        assert before in node.recorder.list(uid=uid)
        for listed in (
            node.list_events(),
            node.list_events(namespace="default"),
            node.list_events(namespace="default", name="web"),
        ):
            reasons = {e.reason for e in listed}
            assert "Killing" not in reasons
            assert "BackOff" in reasons


async def test_events_of_a_pod_the_node_does_not_run_are_all_listed(tmp_path: Path) -> None:
    async with _kubelet(tmp_path) as node:
        node.recorder.record(
            namespace="default",
            name="gone",
            uid="u-gone",
            type="Normal",
            reason="Killing",
            message="m",
        )
        assert [e.reason for e in node.list_events(namespace="default", name="gone")] == ["Killing"]


async def test_the_library_and_the_local_api_filter_with_one_rule(tmp_path: Path) -> None:
    pod = load_manifests_text(POD, node_name="n1", pod_security="privileged").pods[0]
    async with _kubelet(tmp_path) as node:
        await node.apply(pod)
        await node.wait("default", "web", "Running", timeout=10)
        uid = ctr.pod_identity(pod)[2]
        before = _event(uid, "Killing", -timedelta(seconds=1), node)
        await _loaded(node, before)
        everything = node.recorder.list()
        assert node.own_events(everything) == node.list_events()
        assert before not in node.own_events(everything)
