"""Node admission: the kubelet's admit rules as tables, worded as the kubelet words them.

Reasons and messages come from ``pkg/kubelet/lifecycle/predicate.go`` (``OutOfcpu``,
``Node didn't have enough resource: ...``, ``Predicate NodePorts failed: ...``) and the
scheduler plugins it runs (``noderesources``, ``nodeaffinity``, ``nodename``,
``nodeports``, ``tainttoleration``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.node import admission
from asynckubelet.node.admission import (
    NodeAdmitter,
    NodeInfo,
    NodeResources,
    Rejection,
    Taint,
    admit,
    host_port_in_use,
    parse_labels,
    parse_node_resources,
    parse_taints,
    pod_requests,
)

GI = 1024**3
RESOURCES = NodeResources(
    cpu_millis=2000,
    memory=4 * GI,
    pods=110,
    ephemeral_storage=10 * GI,
    scalars=MappingProxyType({"example.com/dongle": 2, "hugepages-2Mi": 512 * 1024**2}),
)
NODE = NodeInfo(name="node-a", allocatable=RESOURCES)
LABELS = {"disktype": "ssd", "zone": "a", "cores": "8", "kubernetes.io/hostname": "node-a"}
LABELLED = NodeInfo(name="node-a", allocatable=RESOURCES, labels=LABELS)


def container(name: str = "app", **extra: Any) -> dict[str, Any]:
    return builders.container(name, "busybox:1", **extra)


def requests(**values: str) -> dict[str, Any]:
    return {"resources": {"requests": {k.replace("_", "-"): v for k, v in values.items()}}}


def make_pod(
    *containers: dict[str, Any],
    inits: tuple[dict[str, Any], ...] = (),
    name: str = "web",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> Pod:
    if inits:
        spec["initContainers"] = list(inits)
    return builders.pod(
        name, labels=labels or {}, containers=list(containers) or [container()], **spec
    )


def port(host_port: int, *, protocol: str = "TCP", ip: str = "") -> dict[str, Any]:
    p: dict[str, Any] = {"containerPort": 80, "hostPort": host_port, "protocol": protocol}
    if ip:
        p["hostIP"] = ip
    return p


def with_ports(*ports: dict[str, Any], name: str = "web") -> Pod:
    return make_pod(container(ports=list(ports)), name=name)


@dataclass(frozen=True)
class Case:
    id: str
    pod: Pod
    expected: tuple[str, str] | None
    node: NodeInfo = NODE
    admitted: tuple[Pod, ...] = ()
    static: bool = True
    ignore_unadvertised: bool = False
    bound: frozenset[tuple[str, str, int]] = field(default_factory=frozenset)


def short(name: str, requested: int, used: int, capacity: int) -> tuple[str, str]:
    return (
        f"OutOf{name}",
        f"Node didn't have enough resource: {name}, requested: {requested}, used: {used},"
        f" capacity: {capacity}",
    )


def predicate(name: str, reason: str) -> tuple[str, str]:
    return (name, f"Predicate {name} failed: {reason}")


NODE_PORTS = predicate("NodePorts", "node(s) didn't have free ports for the requested pod ports")
NODE_AFFINITY = predicate("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
NODE_NAME = predicate("NodeName", "node(s) didn't match the requested node name")
TAINTS = predicate("TaintToleration", "node(s) had taints that the pod didn't tolerate")


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        r["values"] = list(values)
    return {"matchExpressions": [r]}


CPU_1500 = make_pod(container(**requests(cpu="1500m")), name="busy")
TWO_PODS = (make_pod(name="one"), make_pod(name="two"))
SMALL = NodeInfo(name="node-a", allocatable=NodeResources(cpu_millis=2000, memory=GI, pods=2))

RESOURCE_CASES = [
    Case(
        "a pod that fits is admitted", make_pod(container(**requests(cpu="1", memory="1Gi"))), None
    ),
    Case("a pod that asks for nothing is admitted", make_pod(), None),
    Case(
        "more cpu than allocatable: OutOfcpu in millicores",
        make_pod(container(**requests(cpu="8"))),
        short("cpu", 8000, 0, 2000),
    ),
    Case(
        "cpu the admitted pods already use counts",
        make_pod(container(**requests(cpu="1"))),
        short("cpu", 1000, 1500, 2000),
        admitted=(CPU_1500,),
    ),
    Case(
        "more memory than allocatable: OutOfmemory in bytes",
        make_pod(container(**requests(memory="8Gi"))),
        short("memory", 8 * GI, 0, 4 * GI),
    ),
    Case(
        "more ephemeral storage than allocatable",
        make_pod(container(**requests(ephemeral_storage="20Gi"))),
        short("ephemeral-storage", 20 * GI, 0, 10 * GI),
    ),
    Case(
        "more of an advertised extended resource than allocatable",
        make_pod(container(resources={"requests": {"example.com/dongle": "3"}})),
        short("example.com/dongle", 3, 0, 2),
    ),
    Case(
        "an extended resource the node does not advertise",
        make_pod(container(resources={"limits": {"example.com/widget": "1"}})),
        short("example.com/widget", 1, 0, 0),
    ),
    Case(
        "in cluster mode an unadvertised extended resource is left to the cluster",
        make_pod(container(resources={"limits": {"example.com/widget": "1"}})),
        None,
        ignore_unadvertised=True,
    ),
    Case(
        "in cluster mode an advertised extended resource still counts",
        make_pod(container(resources={"requests": {"example.com/dongle": "3"}})),
        short("example.com/dongle", 3, 0, 2),
        ignore_unadvertised=True,
    ),
    Case(
        "hugepages count like any other resource",
        make_pod(container(resources={"requests": {"hugepages-2Mi": "1Gi"}})),
        short("hugepages-2Mi", GI, 0, 512 * 1024**2),
    ),
    Case(
        "a node running as many pods as it may: OutOfpods",
        make_pod(),
        short("pods", 1, 2, 2),
        node=SMALL,
        admitted=TWO_PODS,
    ),
    Case(
        "too many pods is reported before too little cpu",
        make_pod(container(**requests(cpu="8"))),
        short("pods", 1, 2, 2),
        node=SMALL,
        admitted=TWO_PODS,
    ),
    Case(
        "cpu is reported before memory",
        make_pod(container(**requests(cpu="8", memory="8Gi"))),
        short("cpu", 8000, 0, 2000),
    ),
    Case(
        "requests default to limits",
        make_pod(container(resources={"limits": {"cpu": "3"}})),
        short("cpu", 3000, 0, 2000),
    ),
    Case(
        "an init container asking for more than the containers sets the pod's request",
        make_pod(
            container(**requests(cpu="500m")),
            inits=(container("init", **requests(cpu="3")),),
        ),
        short("cpu", 3000, 0, 2000),
    ),
    Case(
        "regular containers add up",
        make_pod(container("a", **requests(cpu="1")), container("b", **requests(cpu="1500m"))),
        short("cpu", 2500, 0, 2000),
    ),
    Case(
        "a sidecar adds to the containers it runs beside",
        make_pod(
            container(**requests(cpu="1")),
            inits=(container("side", restartPolicy="Always", **requests(cpu="1500m")),),
        ),
        short("cpu", 2500, 0, 2000),
    ),
    Case(
        "an init container after a sidecar runs beside it",
        make_pod(
            container(**requests(cpu="100m")),
            inits=(
                container("side", restartPolicy="Always", **requests(cpu="1")),
                container("init", **requests(cpu="1500m")),
            ),
        ),
        short("cpu", 2500, 0, 2000),
    ),
    Case(
        "pod-level requests replace the containers' sum",
        make_pod(container(**requests(cpu="3")), resources={"requests": {"cpu": "1"}}),
        None,
    ),
    Case(
        "the pod overhead is added",
        make_pod(container(**requests(cpu="1800m")), overhead={"cpu": "250m"}),
        short("cpu", 2050, 0, 2000),
    ),
]

OS_CASES = [
    Case(
        "a pod labelled for another OS",
        make_pod(labels={"kubernetes.io/os": "windows"}),
        (
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ),
    ),
    Case("a pod labelled for linux", make_pod(labels={"kubernetes.io/os": "linux"}), None),
    Case(
        "a pod whose os field names another OS",
        make_pod(os={"name": "windows"}),
        ("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"),
    ),
    Case(
        "a pod asking for the Strict supplemental groups policy Docker cannot apply",
        make_pod(securityContext={"supplementalGroupsPolicy": "Strict"}),
        (
            "SupplementalGroupsPolicyNotSupported",
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        ),
    ),
    Case(
        "the Merge supplemental groups policy is admitted",
        make_pod(securityContext={"supplementalGroupsPolicy": "Merge"}),
        None,
    ),
    Case(
        "the Strict policy on a node whose runtime applies it",
        make_pod(securityContext={"supplementalGroupsPolicy": "Strict"}),
        None,
        node=NodeInfo(name="node-a", allocatable=RESOURCES, supplemental_groups_policy=True),
    ),
]

AFFINITY_CASES = [
    Case("a matching nodeSelector", make_pod(nodeSelector={"disktype": "ssd"}), None, LABELLED),
    Case(
        "a nodeSelector the node's labels do not match",
        make_pod(nodeSelector={"disktype": "hdd"}),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case(
        "a node that does not know its labels does not check selectors",
        make_pod(nodeSelector={"disktype": "hdd"}),
        None,
    ),
    Case("In", make_pod(affinity=affinity(expr("zone", "In", "a", "b"))), None, LABELLED),
    Case(
        "In, not listed",
        make_pod(affinity=affinity(expr("zone", "In", "b"))),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case("NotIn", make_pod(affinity=affinity(expr("zone", "NotIn", "b"))), None, LABELLED),
    Case(
        "NotIn matches a missing label",
        make_pod(affinity=affinity(expr("gpu", "NotIn", "yes"))),
        None,
        LABELLED,
    ),
    Case("Exists", make_pod(affinity=affinity(expr("zone", "Exists"))), None, LABELLED),
    Case(
        "DoesNotExist, present",
        make_pod(affinity=affinity(expr("zone", "DoesNotExist"))),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case("Gt", make_pod(affinity=affinity(expr("cores", "Gt", "4"))), None, LABELLED),
    Case(
        "Lt",
        make_pod(affinity=affinity(expr("cores", "Lt", "4"))),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case(
        "Gt on a label that is not a number",
        make_pod(affinity=affinity(expr("zone", "Gt", "4"))),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case(
        "terms are ORed",
        make_pod(affinity=affinity(expr("zone", "In", "b"), expr("disktype", "In", "ssd"))),
        None,
        LABELLED,
    ),
    Case("an empty term matches nothing", make_pod(affinity=affinity({})), NODE_AFFINITY, LABELLED),
    Case(
        "matchFields on the node's name",
        make_pod(
            affinity=affinity(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
            )
        ),
        None,
        LABELLED,
    ),
    Case(
        "matchFields naming another node",
        make_pod(
            affinity=affinity(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}
            )
        ),
        NODE_AFFINITY,
        LABELLED,
    ),
    Case(
        "a nodeSelector and an affinity must both match",
        make_pod(nodeSelector={"disktype": "hdd"}, affinity=affinity(expr("zone", "In", "a"))),
        NODE_AFFINITY,
        LABELLED,
    ),
]

NODE_NAME_CASES = [
    Case(
        "a pod from the API server bound to another node",
        make_pod(nodeName="node-b"),
        NODE_NAME,
        static=False,
    ),
    Case(
        "a pod from the API server bound to this node",
        make_pod(nodeName="node-a"),
        None,
        static=False,
    ),
    Case("a static pod naming another node runs here", make_pod(nodeName="node-b"), None),
]

PORT_CASES = [
    Case(
        "a host port an admitted pod holds",
        with_ports(port(8080)),
        NODE_PORTS,
        admitted=(with_ports(port(8080), name="other"),),
    ),
    Case(
        "the same port for another protocol",
        with_ports(port(8080, protocol="UDP")),
        None,
        admitted=(with_ports(port(8080), name="other"),),
    ),
    Case(
        "the same port on two specific addresses",
        with_ports(port(8080, ip="127.0.0.1")),
        None,
        admitted=(with_ports(port(8080, ip="127.0.0.2"), name="other"),),
    ),
    Case(
        "all addresses wanted, one taken",
        with_ports(port(8080)),
        NODE_PORTS,
        admitted=(with_ports(port(8080, ip="127.0.0.2"), name="other"),),
    ),
    Case(
        "one address wanted, all taken",
        with_ports(port(8080, ip="127.0.0.1")),
        NODE_PORTS,
        admitted=(with_ports(port(8080), name="other"),),
    ),
    Case(
        "a sidecar's host port counts",
        with_ports(port(9090)),
        NODE_PORTS,
        admitted=(
            make_pod(
                inits=(container("side", restartPolicy="Always", ports=[port(9090)]),), name="o"
            ),
        ),
    ),
    Case(
        "a finished init container's host port does not",
        with_ports(port(9090)),
        None,
        admitted=(make_pod(inits=(container("init", ports=[port(9090)]),), name="o"),),
    ),
    Case(
        "a port bound on the host by a process that is not a pod",
        with_ports(port(8080)),
        (
            "HostPortConflict",
            "cannot start the pod due to host port conflict: 0.0.0.0:8080/TCP is already in use"
            " on the node by a process that is not one of its pods",
        ),
        bound=frozenset({("TCP", "0.0.0.0", 8080)}),
    ),
    Case(
        "a bound port for another protocol",
        with_ports(port(8080, protocol="UDP")),
        None,
        bound=frozenset({("TCP", "0.0.0.0", 8080)}),
    ),
]

TAINT_CASES = [
    Case(
        "an untolerated NoExecute taint refuses a pod from the API server",
        make_pod(),
        TAINTS,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
        static=False,
    ),
    Case(
        "a static pod is not checked against taints",
        make_pod(),
        None,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
    ),
    Case(
        "a NoSchedule taint is the scheduler's business",
        make_pod(),
        None,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoSchedule", "db"),)
        ),
        static=False,
    ),
    Case(
        "a toleration with the taint's key and value",
        make_pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "db"}]),
        None,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
        static=False,
    ),
    Case(
        "a toleration with another value",
        make_pod(tolerations=[{"key": "dedicated", "value": "web"}]),
        TAINTS,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
        static=False,
    ),
    Case(
        "an Exists toleration without a key tolerates everything",
        make_pod(tolerations=[{"operator": "Exists"}]),
        None,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
        static=False,
    ),
    Case(
        "a toleration for another effect",
        make_pod(tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]),
        TAINTS,
        node=NodeInfo(
            name="node-a", allocatable=RESOURCES, taints=(Taint("dedicated", "NoExecute", "db"),)
        ),
        static=False,
    ),
]


def run(case: Case) -> tuple[str, str] | None:
    asked: list[tuple[str, str, int]] = []

    def probe(protocol: str, ip: str, host_port: int) -> bool:
        asked.append((protocol, ip, host_port))
        return (protocol, ip, host_port) in case.bound

    result = admit(
        case.pod,
        node=case.node,
        admitted=case.admitted,
        host_port_in_use=probe,
        static=case.static,
        ignore_unadvertised_extended=case.ignore_unadvertised,
    )
    return None if result is None else (result.reason, result.message)


@pytest.mark.parametrize("case", RESOURCE_CASES, ids=lambda c: c.id)
def test_resources(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", OS_CASES, ids=lambda c: c.id)
def test_os_and_runtime_features(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", AFFINITY_CASES, ids=lambda c: c.id)
def test_node_selector_and_affinity(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", NODE_NAME_CASES, ids=lambda c: c.id)
def test_node_name(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", PORT_CASES, ids=lambda c: c.id)
def test_host_ports(case: Case) -> None:
    assert run(case) == case.expected


@pytest.mark.parametrize("case", TAINT_CASES, ids=lambda c: c.id)
def test_taints(case: Case) -> None:
    assert run(case) == case.expected


def test_a_port_an_admitted_pod_holds_is_not_probed() -> None:
    asked: list[tuple[str, str, int]] = []

    def in_use(protocol: str, host_ip: str, number: int) -> bool:
        asked.append((protocol, host_ip, number))
        return False

    admit(
        with_ports(port(8080)),
        node=NODE,
        admitted=(with_ports(port(8080), name="other"),),
        host_port_in_use=in_use,
    )
    assert asked == []


def test_a_pod_already_running_is_not_probed_for_its_own_ports() -> None:
    asked: list[tuple[str, str, int]] = []

    def in_use(protocol: str, host_ip: str, number: int) -> bool:
        asked.append((protocol, host_ip, number))
        return True

    admitter = NodeAdmitter(NODE, host_port_in_use=in_use)
    assert admitter.admit(with_ports(port(8080)), admitted=(), running=True) is None
    assert asked == []


def test_a_new_pod_is_probed_through_the_admitter() -> None:
    admitter = NodeAdmitter(NODE, host_port_in_use=lambda *key: True)
    rejection = admitter.admit(with_ports(port(8080)), admitted=())
    assert rejection is not None
    assert rejection.reason == "HostPortConflict"


def test_the_first_reason_is_reported_as_the_kubelet_does() -> None:
    pod = make_pod(container(**requests(cpu="8"), ports=[port(8080)]), nodeSelector={"x": "y"})
    rejection = admit(
        pod, node=LABELLED, admitted=(with_ports(port(8080), name="other"),), static=False
    )
    assert rejection == Rejection(*short("cpu", 8000, 0, 2000))


def test_pod_requests_are_in_the_kubelets_units() -> None:
    pod = make_pod(container(**requests(cpu="250m", memory="1Mi", ephemeral_storage="1k")))
    assert pod_requests(pod) == {"cpu": 250, "memory": 1024**2, "ephemeral-storage": 1000}


def test_pod_requests_round_up() -> None:
    assert pod_requests(make_pod(container(**requests(cpu="0.0001", memory="1.5")))) == {
        "cpu": 1,
        "memory": 2,
    }


# -- the real host-port probe ---------------------------------------------------------


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_the_probe_finds_a_tcp_port_a_process_listens_on(listening_port: int) -> None:
    assert host_port_in_use("TCP", "127.0.0.1", listening_port) is True


def test_the_probe_finds_a_listening_port_when_asked_for_every_address(
    listening_port: int,
) -> None:
    assert host_port_in_use("TCP", "", listening_port) is True


def test_the_probe_finds_a_free_tcp_port_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    assert host_port_in_use("TCP", "127.0.0.1", free) is False


def test_the_probe_finds_a_bound_udp_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        assert host_port_in_use("UDP", "127.0.0.1", sock.getsockname()[1]) is True


def test_the_probe_tells_protocols_apart(listening_port: int) -> None:
    assert host_port_in_use("UDP", "127.0.0.1", listening_port) is False


def test_the_probe_leaves_the_port_free_for_the_pod() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    host_port_in_use("TCP", "127.0.0.1", free)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.bind(("127.0.0.1", free))


def test_an_address_that_is_not_this_hosts_is_not_in_use() -> None:
    assert host_port_in_use("TCP", "192.0.2.1", 8080) is False


# -- configuration --------------------------------------------------------------------

BASE = NodeResources(cpu_millis=4000, memory=8 * GI, pods=110, ephemeral_storage=GI)


def test_capacity_replaces_only_the_named_resources() -> None:
    parsed = parse_node_resources("cpu=2.5,example.com/dongle=2,hugepages-2Mi=1Gi", base=BASE)
    assert (parsed.cpu_millis, parsed.memory, parsed.pods, dict(parsed.scalars)) == (
        2500,
        8 * GI,
        110,
        {"example.com/dongle": 2, "hugepages-2Mi": GI},
    )


def test_capacity_takes_memory_pods_and_ephemeral_storage() -> None:
    parsed = parse_node_resources(" memory=512Mi , pods=20, ephemeral-storage=1G ", base=BASE)
    assert (parsed.memory, parsed.pods, parsed.ephemeral_storage) == (512 * 1024**2, 20, 10**9)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cpu", "expected NAME=QUANTITY"),
        ("cpu=lots", "is not a quantity"),
        ("memory=-1Gi", "cannot be negative"),
        ("pods=1.5", "pods is a whole number"),
        ("gpu=1", "is not a resource this node can offer"),
        ("kubernetes.io/thing=1", "is not a resource this node can offer"),
    ],
)
def test_a_bad_capacity_is_named(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as raised:
        parse_node_resources(text, base=BASE)
    assert repr(text.split("=")[0]) in str(raised.value) or text in str(raised.value)


def test_host_resources_are_read_from_this_host() -> None:
    found = admission.host_resources()
    assert (
        found.cpu_millis >= 1000,
        found.memory > 0,
        found.pods,
        found.ephemeral_storage > 0,
    ) == (
        True,
        True,
        110,
        True,
    )


def test_the_allocatable_reads_as_node_quantities() -> None:
    assert RESOURCES.as_quantities()["cpu"] == "2"
    assert BASE.as_quantities()["memory"] == str(8 * GI)


def test_taints_parse_as_the_kubelets_register_with_taints() -> None:
    assert parse_taints("dedicated=db:NoExecute,spot:NoSchedule") == (
        Taint("dedicated", "NoExecute", "db"),
        Taint("spot", "NoSchedule", ""),
    )


@pytest.mark.parametrize("text", ["dedicated=db", "dedicated=db:Sometimes", ":NoExecute"])
def test_a_bad_taint_is_named(text: str) -> None:
    with pytest.raises(ValueError, match="expected KEY"):
        parse_taints(text)


def test_labels_parse_as_the_kubelets_node_labels() -> None:
    assert parse_labels("disktype=ssd,zone=a") == {"disktype": "ssd", "zone": "a"}


def test_a_bad_label_is_named() -> None:
    with pytest.raises(ValueError, match="'-bad=1'"):
        parse_labels("-bad=1")
