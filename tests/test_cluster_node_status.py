"""The Node and its status as the kubelet makes them (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from lightkube.models.core_v1 import Node, NodeCondition, NodeStatus

from asynckubelet.cluster import nodestatus
from asynckubelet.cluster.nodestatus import HostSample, NodeFacts, Readiness, Thresholds
from asynckubelet.node.admission import Taint

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
GI = 1024**3
ROOMY = HostSample(
    memory_available=4 * GI,
    nodefs_available=50 * GI,
    nodefs_capacity=100 * GI,
    nodefs_inodes_free=900,
    nodefs_inodes=1000,
    imagefs_available=50 * GI,
    imagefs_capacity=100 * GI,
    pids_max=4096,
    pids_running=100,
)
FACTS = NodeFacts(
    name="n1",
    addresses=(("InternalIP", "10.0.0.5"), ("Hostname", "n1")),
    capacity={"cpu": "2", "memory": "4096", "pods": "110", "ephemeral-storage": "100"},
    allocatable={"cpu": "2", "memory": "4096", "pods": "110", "ephemeral-storage": "100"},
    info={
        "machineID": "m",
        "systemUUID": "s",
        "bootID": "b",
        "kernelVersion": "6.1",
        "osImage": "Debian",
        "containerRuntimeVersion": "docker://20.10.24",
        "kubeletVersion": "v1.20.2",
        "kubeProxyVersion": "v1.20.2",
        "operatingSystem": "linux",
        "architecture": "amd64",
    },
    kubelet_port=10250,
)


def _by_type(conditions: list[NodeCondition]) -> dict[str, NodeCondition]:
    return {c.type: c for c in conditions}


def test_a_roomy_ready_node_reports_the_four_conditions_in_the_kubelets_order_and_words() -> None:
    conditions = nodestatus.node_conditions(
        sample=ROOMY, readiness=Readiness(), previous=[], now=T0
    )
    assert [(c.type, c.status, c.reason, c.message) for c in conditions] == [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    assert all(c.lastHeartbeatTime == T0 and c.lastTransitionTime == T0 for c in conditions)


@pytest.mark.parametrize(
    ("sample", "pressed"),
    [
        (HostSample(memory_available=99 * 1024**2), "MemoryPressure"),
        (HostSample(nodefs_available=9, nodefs_capacity=100), "DiskPressure"),
        (HostSample(nodefs_inodes_free=4, nodefs_inodes=100), "DiskPressure"),
        (HostSample(imagefs_available=14, imagefs_capacity=100), "DiskPressure"),
        (HostSample(pids_max=1000, pids_running=960), "PIDPressure"),
    ],
)
def test_a_host_under_an_eviction_threshold_reports_that_pressure(
    sample: HostSample, pressed: str
) -> None:
    conditions = _by_type(
        nodestatus.node_conditions(sample=sample, readiness=Readiness(), previous=[], now=T0)
    )
    assert [kind for kind, c in conditions.items() if c.status == "True"] == [pressed, "Ready"]
    assert conditions[pressed].reason in (
        "KubeletHasInsufficientMemory",
        "KubeletHasDiskPressure",
        "KubeletHasInsufficientPID",
    )


def test_what_cannot_be_read_is_no_pressure() -> None:
    memory, disk, pid = nodestatus.pressures(HostSample(), Thresholds())
    assert (memory, disk, pid) == (False, False, False)


def test_a_node_without_runtime_or_network_is_not_ready_and_says_why() -> None:
    ready = _by_type(
        nodestatus.node_conditions(
            sample=ROOMY,
            readiness=Readiness(runtime="container runtime is down", network="no pod CIDR"),
            previous=[],
            now=T0,
        )
    )["Ready"]
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "KubeletNotReady",
        "container runtime is down, no pod CIDR",
    )


def test_a_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    first = nodestatus.node_conditions(sample=ROOMY, readiness=Readiness(), previous=[], now=T0)
    later = T0 + timedelta(seconds=30)
    second = _by_type(
        nodestatus.node_conditions(
            sample=ROOMY, readiness=Readiness(network="down"), previous=first, now=later
        )
    )
    assert second["MemoryPressure"].lastTransitionTime == T0
    assert second["MemoryPressure"].lastHeartbeatTime == later
    assert second["Ready"].lastTransitionTime == later


def test_a_new_node_registers_with_the_default_and_configured_labels_and_taints() -> None:
    node = nodestatus.registration(
        FACTS,
        labels={"example.com/pool": "edge"},
        taints=(Taint(key="dedicated", value="edge", effect="NoSchedule"),),
        arch="amd64",
    )
    assert node.metadata is not None
    assert node.spec is not None
    assert node.metadata.labels == {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": "n1",
        "kubernetes.io/os": "linux",
        "example.com/pool": "edge",
    }
    assert [(t.key, t.value, t.effect) for t in node.spec.taints or []] == [
        ("dedicated", "edge", "NoSchedule")
    ]


def test_the_status_carries_addresses_capacity_node_info_and_the_kubelet_port() -> None:
    fields = nodestatus.status_fields(FACTS, [])
    assert fields["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.5"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert fields["capacity"]["pods"] == "110"
    assert fields["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert fields["nodeInfo"]["containerRuntimeVersion"] == "docker://20.10.24"


def test_labels_in_the_kubernetes_namespaces_a_kubelet_may_not_set_are_named() -> None:
    assert nodestatus.unknown_node_labels(
        {
            "node-role.kubernetes.io/worker": "",
            "kubernetes.io/hostname": "x",
            "node.kubernetes.io/pool": "a",
            "example.com/x": "y",
            "k8s.io/other": "z",
        }
    ) == ["k8s.io/other", "node-role.kubernetes.io/worker"]


def test_an_adopted_node_gets_only_the_labels_it_lacks() -> None:
    node = cast(
        Node,
        Node.from_dict(
            {
                "metadata": {
                    "name": "n1",
                    "labels": {
                        **nodestatus.default_labels("n1", arch="amd64"),
                        "kubernetes.io/os": "windows",
                    },
                }
            }
        ),
    )
    assert nodestatus.label_patch(node, labels={"a": "b"}, arch="amd64") == {
        "metadata": {"labels": {"a": "b", "kubernetes.io/os": "linux"}}
    }
    node.metadata.labels = {  # type: ignore[union-attr]
        **nodestatus.default_labels("n1", arch="amd64"),
        "a": "b",
    }
    assert nodestatus.label_patch(node, labels={"a": "b"}, arch="amd64") is None


def _api_status(fields: dict[str, object]) -> NodeStatus:
    return cast(NodeStatus, NodeStatus.from_dict(fields))


def test_the_status_is_not_sent_again_when_only_heartbeat_times_moved() -> None:
    first = nodestatus.node_conditions(sample=ROOMY, readiness=Readiness(), previous=[], now=T0)
    current = _api_status(nodestatus.status_fields(FACTS, first))
    later = nodestatus.node_conditions(
        sample=ROOMY, readiness=Readiness(), previous=first, now=T0 + timedelta(seconds=10)
    )
    fields = nodestatus.status_fields(FACTS, later)
    assert not nodestatus.needs_report(current=current, fields=fields, last_report=0.0, now=10.0)


def test_the_status_is_sent_at_least_every_report_frequency() -> None:
    first = nodestatus.node_conditions(sample=ROOMY, readiness=Readiness(), previous=[], now=T0)
    fields = nodestatus.status_fields(FACTS, first)
    current = _api_status(fields)
    assert nodestatus.needs_report(current=current, fields=fields, last_report=0.0, now=300.0)
    assert nodestatus.needs_report(current=current, fields=fields, last_report=None, now=1.0)


def test_a_ready_condition_the_lifecycle_controller_set_to_unknown_is_put_right_at_once() -> None:
    first = nodestatus.node_conditions(sample=ROOMY, readiness=Readiness(), previous=[], now=T0)
    fields = nodestatus.status_fields(FACTS, first)
    body = nodestatus.status_fields(FACTS, first)
    body["conditions"][-1].update(
        status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status."
    )
    assert nodestatus.needs_report(
        current=_api_status(body), fields=fields, last_report=0.0, now=1.0
    )


def test_a_change_of_a_condition_is_sent_at_once() -> None:
    first = nodestatus.node_conditions(sample=ROOMY, readiness=Readiness(), previous=[], now=T0)
    current = _api_status(nodestatus.status_fields(FACTS, first))
    pressed = nodestatus.node_conditions(
        sample=HostSample(memory_available=1), readiness=Readiness(), previous=first, now=T0
    )
    fields = nodestatus.status_fields(FACTS, pressed)
    assert nodestatus.needs_report(current=current, fields=fields, last_report=0.0, now=1.0)


def test_the_pod_cidr_is_the_spec_s_or_the_first_of_its_list() -> None:
    assert nodestatus.pod_cidr(None) is None
    assert nodestatus.pod_cidr(Node.from_dict({"spec": {}})) is None  # type: ignore[arg-type]
    assert (
        nodestatus.pod_cidr(Node.from_dict({"spec": {"podCIDR": "10.1.0.0/24"}}))  # type: ignore[arg-type]
        == "10.1.0.0/24"
    )
    assert (
        nodestatus.pod_cidr(Node.from_dict({"spec": {"podCIDRs": ["10.2.0.0/24"]}}))  # type: ignore[arg-type]
        == "10.2.0.0/24"
    )
