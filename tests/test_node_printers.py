"""kubectl's pod table and describe page, and the parsing of durations and addresses."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from lightkube.models.core_v1 import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodCondition,
    PodSchedulingGate,
    PodSpec,
    PodStatus,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.api.server import check_listen, parse_listen
from asynckubelet.kubectl.describe import describe_pod
from asynckubelet.kubectl.pods import pod_table, restarts
from asynckubelet.kubectl.times import parse_duration
from asynckubelet.node.events import PodEvent

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def running_pod(*, restart_count: int = 0, finished: datetime | None = None) -> Pod:
    last = ContainerState()
    if finished is not None:
        last = ContainerState(
            terminated=ContainerStateTerminated(exitCode=1, reason="Error", finishedAt=finished)
        )
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
        spec=PodSpec(containers=[Container(name="a", image="busybox")]),
        status=PodStatus(
            phase="Running",
            startTime=NOW - timedelta(minutes=5),
            podIP="10.0.0.5",
            conditions=[PodCondition(type="Ready", status="True")],
            containerStatuses=[
                ContainerStatus(
                    name="a",
                    image="busybox",
                    imageID="",
                    ready=True,
                    restartCount=restart_count,
                    state=ContainerState(running=ContainerStateRunning(startedAt=NOW)),
                    lastState=last,
                )
            ],
        ),
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5), ("2m", 120), ("1h", 3600), ("2m30s", 150), ("500ms", 0.5), ("1.5h", 5400)],
)
def test_durations_are_parsed_as_go_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "s", "5x", "5s garbage", "-5s"])
def test_a_malformed_duration_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 30s"):
        parse_duration(text)


def test_the_table_has_kubectls_columns_and_values() -> None:
    header, row = pod_table([running_pod()], node_name="n1", now=NOW).splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split() == ["web", "1/1", "Running", "0", "5m"]


def test_wide_adds_ip_and_node_and_all_namespaces_adds_namespace() -> None:
    header, row = pod_table(
        [running_pod()], node_name="n1", now=NOW, wide=True, all_namespaces=True
    ).splitlines()
    assert header.split()[0] == "NAMESPACE"
    assert row.split()[-4:] == ["10.0.0.5", "n1", "<none>", "<none>"]


def test_restarts_show_the_age_of_the_last_one() -> None:
    pod = running_pod(restart_count=2, finished=NOW - timedelta(seconds=7))
    assert restarts(pod, now=NOW) == "2 (7s ago)"


def test_describe_ends_with_the_events_repeats_counted() -> None:
    event = PodEvent(
        namespace="default",
        pod="web",
        uid="u1",
        type="Warning",
        reason="BackOff",
        message="Back-off restarting failed container a",
        first_timestamp=NOW - timedelta(minutes=3),
        last_timestamp=NOW - timedelta(seconds=10),
        count=4,
        container="a",
    )
    text = describe_pod(running_pod(), [event], node_name="n1", now=NOW)
    last = text.splitlines()[-1].split(None, 6)
    assert last[:2] == ["Warning", "BackOff"]
    assert "10s (x4 over 3m)" in text.splitlines()[-1]


def test_describe_without_events_says_none() -> None:
    text = describe_pod(running_pod(), [], node_name="n1", now=NOW)
    assert text.splitlines()[-1] == "Events:            <none>"


def gated_pod() -> Pod:
    return Pod(
        metadata=ObjectMeta(name="test-pod", namespace="default", uid="u2"),
        spec=PodSpec(
            containers=[Container(name="pause", image="pause")],
            schedulingGates=[
                PodSchedulingGate(name="example.com/foo"),
                PodSchedulingGate(name="example.com/bar"),
            ],
        ),
        status=PodStatus(
            phase="Pending",
            conditions=[
                PodCondition(type="PodScheduled", status="False", reason="SchedulingGated")
            ],
        ),
    )


def describe_field(text: str, label: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(label + ":"):
            return line[len(label) + 1 :].strip()
    return None


@pytest.mark.parametrize(
    ("pod", "node", "start_time"),
    [
        (running_pod(), "n1", "Thu, 01 Jan 2026 11:55:00 +0000"),
        (gated_pod(), "<none>", None),
    ],
    ids=["bound", "scheduling-gated"],
)
def test_describe_shows_the_node_and_start_time_only_of_a_bound_pod(
    pod: Pod, node: str, start_time: str | None
) -> None:
    text = describe_pod(pod, [], node_name="n1", now=NOW)
    assert describe_field(text, "Node") == node
    assert describe_field(text, "Start Time") == start_time


def test_describe_of_a_bound_pod_adds_the_host_ip_to_the_node() -> None:
    pod = running_pod()
    assert pod.status is not None
    pod.status.hostIP = "192.0.2.7"
    text = describe_pod(pod, [], node_name="n1", now=NOW)
    assert describe_field(text, "Node") == "n1/192.0.2.7"


def test_describe_of_a_gated_pod_shows_the_scheduled_condition_false() -> None:
    text = describe_pod(gated_pod(), [], node_name="n1", now=NOW)
    conditions = text[text.index("Conditions:") :].splitlines()
    assert conditions[1].split() == ["Type", "Status"]
    assert conditions[2].split() == ["PodScheduled", "False"]


def test_wide_shows_no_node_for_a_scheduling_gated_pod() -> None:
    _, row = pod_table([gated_pod()], node_name="n1", now=NOW, wide=True).splitlines()
    assert row.split()[-2:] == ["<none>", "<none>"]


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("127.0.0.1:10255", ("127.0.0.1", 10255)),
        ("[::1]:80", ("::1", 80)),
        (":9", ("127.0.0.1", 9)),
    ],
)
def test_listen_addresses_are_split_into_host_and_port(value: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(value) == parsed


@pytest.mark.parametrize("value", ["127.0.0.1", "host:port", "1.2.3.4:70000"])
def test_a_malformed_listen_address_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(value)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_only_loopback_is_allowed_without_the_explicit_flag(host: str, allowed: bool) -> None:
    if allowed:
        check_listen(host, allow_remote=False)
    else:
        with pytest.raises(ValueError, match="--allow-remote"):
            check_listen(host, allow_remote=False)
    check_listen(host, allow_remote=True)


PROBES = [
    (
        {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 3,
            "timeoutSeconds": 1,
            "periodSeconds": 3,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "http-get http://:8080/healthz delay=3s timeout=1s period=3s #success=1 #failure=3",
    ),
    (
        {
            "httpGet": {"host": "10.0.0.1", "path": "ready", "port": "http", "scheme": "HTTPS"},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "http-get https://10.0.0.1:http/ready delay=0s timeout=1s period=10s #success=1 #failure=3",
    ),
    (
        {
            "httpGet": {"host": "fd00::1", "path": "/", "port": 80},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "http-get http://[fd00::1]:80/ delay=0s timeout=1s period=10s #success=1 #failure=3",
    ),
    (
        {
            "tcpSocket": {"port": 80},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "tcp-socket :80 delay=0s timeout=1s period=10s #success=1 #failure=3",
    ),
    (
        {
            "exec": {"command": ["cat", "/tmp/ok"]},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 30,
        },
        "exec [cat /tmp/ok] delay=0s timeout=1s period=10s #success=1 #failure=30",
    ),
    (
        {
            "grpc": {"port": 9000, "service": ""},
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "grpc <pod>:9000  delay=0s timeout=1s period=10s #success=1 #failure=3",
    ),
]


@pytest.mark.parametrize(("probe", "shown"), PROBES)
def test_a_probe_is_described_as_kubectl_describes_it(probe: dict[str, object], shown: str) -> None:
    from lightkube.models.core_v1 import Probe

    from asynckubelet.kubectl.describe import describe_probe

    assert describe_probe(cast(Probe, Probe.from_dict(probe))) == shown


def test_describe_prints_each_containers_probes_after_its_resources() -> None:
    from lightkube.models.core_v1 import Probe, ResourceRequirements

    pod = running_pod()
    assert pod.spec is not None
    container = pod.spec.containers[0]
    container.livenessProbe = cast(Probe, Probe.from_dict(PROBES[0][0]))
    container.readinessProbe = cast(Probe, Probe.from_dict(PROBES[3][0]))
    container.startupProbe = cast(Probe, Probe.from_dict(PROBES[4][0]))
    container.resources = ResourceRequirements(limits={"memory": "128Mi", "cpu": "500m"})
    lines = describe_pod(pod, [], node_name="n1", now=NOW).splitlines()
    start = lines.index("    Restart Count:  0")
    assert lines[start + 1 : start + 7] == [
        "    Limits:",
        "      cpu:     500m",
        "      memory:  128Mi",
        f"    Liveness:       {PROBES[0][1]}",
        f"    Readiness:      {PROBES[3][1]}",
        f"    Startup:        {PROBES[4][1]}",
    ]


def test_several_ports_are_described_as_ports() -> None:
    from lightkube.models.core_v1 import ContainerPort

    pod = running_pod()
    assert pod.spec is not None
    pod.spec.containers[0].ports = [
        ContainerPort(containerPort=80, hostPort=8080, protocol="TCP"),
        ContainerPort(containerPort=53, protocol="UDP"),
    ]
    text = describe_pod(pod, [], node_name="n1", now=NOW)
    assert "    Ports:          80/TCP, 53/UDP\n" in text
    assert "    Host Ports:     8080/TCP, 0/UDP\n" in text


@pytest.mark.parametrize(
    ("gates", "conditions", "shown"),
    [
        ([], [], "<none>"),
        (["example.com/lb"], [], "0/1"),
        (["example.com/lb", "example.com/dns"], [("example.com/lb", "True")], "1/2"),
        (["example.com/lb"], [("example.com/lb", "False")], "0/1"),
    ],
)
def test_the_readiness_gates_column_counts_the_gates_whose_condition_is_true(
    gates: list[str], conditions: list[tuple[str, str]], shown: str
) -> None:
    from lightkube.models.core_v1 import PodReadinessGate

    from asynckubelet.kubectl.pods import readiness_gates

    pod = running_pod()
    assert pod.spec is not None
    assert pod.status is not None
    pod.spec.readinessGates = [PodReadinessGate(conditionType=g) for g in gates]
    pod.status.conditions = [PodCondition(type=t, status=s) for t, s in conditions]
    assert readiness_gates(pod) == shown


def test_the_wide_table_has_kubectls_columns() -> None:
    header, row = pod_table([running_pod()], node_name="n1", now=NOW, wide=True).splitlines()
    assert re.split(r"\s{2,}", header) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    assert row.split() == [
        "web",
        "1/1",
        "Running",
        "0",
        "5m",
        "10.0.0.5",
        "n1",
        "<none>",
        "<none>",
    ]


def test_a_pod_document_has_kind_and_each_container_status_a_last_state() -> None:
    from asynckubelet.kubectl.pods import pod_document

    document = pod_document(running_pod())
    assert (document["apiVersion"], document["kind"]) == ("v1", "Pod")
    assert [cs["lastState"] for cs in document["status"]["containerStatuses"]] == [{}]
    restarted = pod_document(running_pod(restart_count=1, finished=NOW))
    assert restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_a_pod_the_node_has_not_synced_is_pending_with_its_qos_class() -> None:
    from asynckubelet.kubectl.pods import pod_document

    fresh = Pod(
        metadata=ObjectMeta(name="new"),
        spec=PodSpec(containers=[Container(name="c", image="busybox:1")]),
    )
    assert pod_document(fresh)["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_a_stored_pod_not_synced_yet_answers_pending_with_its_qos_class() -> None:
    from asynckubelet.kubectl.pods import pending_status

    limited = {"cpu": "100m", "memory": "64Mi"}
    stored = {
        "metadata": {"name": "new"},
        "spec": {
            "containers": [
                {"name": "c", "image": "b:1", "resources": {"limits": limited, "requests": limited}}
            ]
        },
    }
    assert pending_status(stored) == {"phase": "Pending", "qosClass": "Guaranteed"}


VOLUMES_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: vols
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: "u9", controller: true}
spec:
  containers: [{name: a, image: busybox}]
  volumes:
  - {name: cache, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 64Mi}}
  - {name: cfg, configMap: {name: app-config}}
  - {name: sec, secret: {secretName: db, optional: true}}
  - {name: host, hostPath: {path: /data, type: Directory}}
  - {name: claim, persistentVolumeClaim: {claimName: data}}
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: cpu, resourceFieldRef: {containerName: a, resource: limits.cpu}}
  - name: api
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3607}
      - configMap: {name: kube-root-ca.crt}
      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}
"""


def test_each_volume_is_described_with_its_sources_fields_as_kubectl_describes_it() -> None:
    from asynckubelet.manifests import load_manifests_text

    pod = load_manifests_text(VOLUMES_POD, node_name="n1", pod_security="privileged").pods[0]
    text = describe_pod(pod, [], node_name="n1", now=NOW)
    lines = text.splitlines()
    start = lines.index("Volumes:")
    assert lines[start : lines.index("QoS Class:        BestEffort")] == [
        "Volumes:",
        "  cache:",
        "    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)",
        "    Medium:     ",
        "    SizeLimit:  <unset>",
        "  mem:",
        "    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)",
        "    Medium:     Memory",
        "    SizeLimit:  64Mi",
        "  cfg:",
        "    Type:      ConfigMap (a volume populated by a ConfigMap)",
        "    Name:      app-config",
        "    Optional:  false",
        "  sec:",
        "    Type:        Secret (a volume populated by a Secret)",
        "    SecretName:  db",
        "    Optional:    true",
        "  host:",
        "    Type:          HostPath (bare host directory volume)",
        "    Path:          /data",
        "    HostPathType:  Directory",
        "  claim:",
        "    Type:       PersistentVolumeClaim (a reference to a PersistentVolumeClaim in the "
        "same namespace)",
        "    ClaimName:  data",
        "    ReadOnly:   false",
        "  info:",
        "    Type:  DownwardAPI (a volume populated by information about the pod)",
        "    Items:",
        "      metadata.labels -> labels",
        "      limits.cpu -> cpu",
        "  api:",
        "    Type:                    Projected (a volume that contains injected data from "
        "multiple sources)",
        "    TokenExpirationSeconds:  3607",
        "    ConfigMapName:           kube-root-ca.crt",
        "    Optional:                false",
        "    DownwardAPI:             true",
    ]


def test_a_pod_with_a_controller_names_it_after_its_ips() -> None:
    from asynckubelet.manifests import load_manifests_text

    pod = load_manifests_text(VOLUMES_POD, node_name="n1", pod_security="privileged").pods[0]
    lines = describe_pod(pod, [], node_name="n1", now=NOW).splitlines()
    at = lines.index("Controlled By:    ReplicaSet/web-5d8f")
    assert lines[at - 1].startswith("IPs:")
    assert (
        describe_field(describe_pod(running_pod(), [], node_name="n1", now=NOW), "Controlled By")
        is None
    )
