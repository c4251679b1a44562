"""The node agent admits a pod new to it as the kubelet does: a pod it cannot take gets no
worker, only a ``Failed`` status with the kubelet's reason and message and a Warning
event, and stays listed until its source drops it."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.admission import NodeInfo, NodeResources, parse_node_resources
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def _node(capacity: str = "cpu=2,memory=4Gi,pods=10") -> NodeInfo:
    return NodeInfo(
        name="n1",
        allocatable=parse_node_resources(capacity, base=NodeResources(cpu_millis=0, memory=0)),
    )


def _pod(name: str, container: str) -> Pod:
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - {container}
"""
    return load_manifests_text(text, node_name="n1", pod_security="privileged").pods[0]


def _kubelet(tmp_path: Path, node: NodeInfo) -> Kubelet:
    config = KubeletConfig(
        node_name="n1",
        state_dir=tmp_path,
        pause_image="pause",
        pod_security="privileged",
        node=node,
        check_host_ports=False,
    )
    return Kubelet(config, docker=FakeDocker(images=["pause", "busybox"]))


async def test_a_pod_asking_for_an_extended_resource_the_node_lacks_is_rejected(
    tmp_path: Path,
) -> None:
    pod = _pod(
        "dongle",
        "{name: app, image: busybox, resources: {limits: {example.com/dongle: 1}}}",
    )
    async with _kubelet(tmp_path, _node()) as node:
        await node.apply(pod)
        got = node.get("default", "dongle")
        events = node.recorder.list()
    assert got is not None
    assert got.status is not None
    assert (got.status.phase, got.status.reason) == ("Failed", "OutOfexample.com/dongle")
    assert got.status.message == (
        "Pod was rejected: Node didn't have enough resource: example.com/dongle, "
        "requested: 1, used: 0, capacity: 0"
    )
    assert [(e.type, e.reason) for e in events] == [("Warning", "OutOfexample.com/dongle")]


async def test_a_pod_asking_for_more_cpu_than_the_capacity_is_out_of_cpu(tmp_path: Path) -> None:
    pod = _pod("big", "{name: app, image: busybox, resources: {requests: {cpu: '2'}}}")
    async with _kubelet(tmp_path, _node("cpu=1")) as node:
        await node.apply(pod)
        got = node.get("default", "big")
    assert got is not None
    assert got.status is not None
    assert got.status.reason == "OutOfcpu"
    assert got.status.message == (
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, "
        "capacity: 1000"
    )


async def test_a_host_port_another_pod_holds_is_refused_and_the_first_pod_runs(
    tmp_path: Path,
) -> None:
    port = "{name: app, image: busybox, ports: [{containerPort: 80, hostPort: 18080}]}"
    async with _kubelet(tmp_path, _node()) as node:
        await node.apply(_pod("first", port))
        await node.apply(_pod("second", port))
        second = node.get("default", "second")
        assert second is not None
        assert second.status is not None
        assert second.status.reason == "NodePorts"
        assert second.status.message == (
            "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for "
            "the requested pod ports"
        )
        first = node.get("default", "first")
        assert first is None or first.status is None or first.status.phase != "Failed"


async def test_a_rejected_pod_stays_listed_until_it_is_deleted(tmp_path: Path) -> None:
    pod = _pod("big", "{name: app, image: busybox, resources: {requests: {cpu: '3'}}}")
    async with _kubelet(tmp_path, _node()) as node:
        await node.apply(pod)
        assert [p.metadata.name for p in node.list() if p.metadata] == ["big"]
        assert await node.delete("default", "big") is True
        assert node.list() == []
