"""Pods that start together or not at all (a foreground run's) are admitted as one: each
over the pods the node already runs and those of the group taken before it, and every pod
refused is told, with the kubelet's reason, so none starts."""

from __future__ import annotations

from types import MappingProxyType

import builders
from lightkube.models.core_v1 import Pod

from asynckubelet.node.admission import (
    NodeAdmitter,
    NodeInfo,
    NodeResources,
    Rejection,
    admit_together,
)

NODE = NodeInfo(
    name="node-a",
    allocatable=NodeResources(
        cpu_millis=2000, memory=4 * 1024**3, pods=110, scalars=MappingProxyType({})
    ),
)
NODE_PORTS = "NodePorts"


def _with_port(name: str, host_port: int) -> Pod:
    ports = [{"containerPort": 80, "hostPort": host_port, "protocol": "TCP"}]
    return builders.pod(name, containers=[builders.container("app", "busybox:1", ports=ports)])


def _asking_cpu(name: str, cpu: str) -> Pod:
    resources = {"requests": {"cpu": cpu}}
    return builders.pod(
        name, containers=[builders.container("app", "busybox:1", resources=resources)]
    )


def _names(refused: list[tuple[Pod, Rejection]]) -> list[str]:
    return [pod.metadata.name or "" for pod, _ in refused if pod.metadata is not None]


def test_pods_the_node_takes_together_are_all_admitted() -> None:
    pods = [_with_port("a", 8080), _with_port("b", 8081), _asking_cpu("c", "1")]
    assert admit_together(NodeAdmitter(NODE), pods) == []


def test_a_pod_is_admitted_over_the_pods_of_the_group_before_it() -> None:
    pods = [_with_port("first", 8080), _with_port("second", 8080)]
    refused = admit_together(NodeAdmitter(NODE), pods)
    assert _names(refused) == ["second"]
    assert refused[0][1].reason == NODE_PORTS


def test_a_pod_is_admitted_over_the_pods_the_node_already_runs() -> None:
    running = [_with_port("daemons", 8080)]
    refused = admit_together(NodeAdmitter(NODE), [_with_port("mine", 8080)], admitted=running)
    assert _names(refused) == ["mine"]
    assert refused[0][1].reason == NODE_PORTS


def test_every_pod_refused_is_told_and_a_refused_pod_takes_nothing() -> None:
    pods = [_asking_cpu("big", "3"), _asking_cpu("fits", "2"), _asking_cpu("over", "1")]
    refused = admit_together(NodeAdmitter(NODE), pods)
    assert [(pod.metadata.name if pod.metadata else "", r.reason) for pod, r in refused] == [
        ("big", "OutOfcpu"),
        ("over", "OutOfcpu"),
    ]


def test_the_host_probe_is_asked_through_the_admitter() -> None:
    admitter = NodeAdmitter(NODE, host_port_in_use=lambda *key: True)
    refused = admit_together(admitter, [_with_port("porty", 8080)])
    assert [r.reason for _, r in refused] == ["HostPortConflict"]
