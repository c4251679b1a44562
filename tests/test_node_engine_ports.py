"""The node agent takes the host ports that running containers of pods it does not own
hold on the engine (``asynckubelet run``'s, another node's) as taken, as ``run`` does the
reverse: a pod asking for one is refused with the kubelet's ``NodePorts`` reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.admission import NodeInfo, NodeResources, admit, parse_node_resources
from asynckubelet.node.engine_ports import EnginePorts, port_holders
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

NODE = NodeInfo(
    name="n1",
    allocatable=parse_node_resources("cpu=2,memory=4Gi,pods=10", base=NodeResources(0, 0)),
)
REFUSED = (
    "Pod was rejected: Predicate NodePorts failed:"
    " node(s) didn't have free ports for the requested pod ports"
)


def _pod(name: str, host_port: int, *, host_ip: str = "", protocol: str = "TCP") -> Pod:
    ip = f", hostIP: {host_ip}" if host_ip else ""
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: app
    image: busybox
    ports: [{{containerPort: 80, hostPort: {host_port}, protocol: {protocol}{ip}}}]
"""
    return load_manifests_text(text, node_name="n1", pod_security="privileged").pods[0]


def _uid(pod: Pod) -> str:
    return ctr.pod_identity(pod)[2]


def _holder(
    docker: FakeDocker,
    *,
    node: str = "n1",
    owner: str = "run-1234",
    host_port: int = 8080,
    state: str = "running",
    uid: str = "u-run",
) -> None:
    labels = {
        **naming.pod_labels(node=node, pod="other", namespace="default", uid=uid, owner=owner),
        naming.LABEL_CONTAINER_NAME: "app",
        naming.LABEL_PORTS: json.dumps(
            [{"containerPort": 80, "hostPort": host_port, "protocol": "TCP"}]
        ),
    }
    docker.add_container(labels=labels, state=state)


def _kubelet(tmp_path: Path, docker: FakeDocker) -> Kubelet:
    config = KubeletConfig(
        node_name="n1",
        state_dir=tmp_path,
        pause_image="pause",
        pod_security="privileged",
        node=NODE,
        check_host_ports=False,
        housekeeping_period=3600,
    )
    return Kubelet(config, docker=docker)


def _docker() -> FakeDocker:
    return FakeDocker(images=["pause", "busybox"])


# -- admission, as data ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "wanted", "refused"),
    [
        (("TCP", "0.0.0.0", 8080), _pod("a", 8080), True),
        (("TCP", "0.0.0.0", 8080), _pod("a", 8081), False),
        (("UDP", "0.0.0.0", 8080), _pod("a", 8080), False),
        (("TCP", "127.0.0.1", 8080), _pod("a", 8080), True),
        (("TCP", "127.0.0.1", 8080), _pod("a", 8080, host_ip="127.0.0.2"), False),
        (("TCP", "0.0.0.0", 8080), _pod("a", 8080, host_ip="127.0.0.2"), True),
    ],
)
def test_held_ports_conflict_as_the_scheduler_host_port_info_says(
    held: tuple[str, str, int], wanted: Pod, refused: bool
) -> None:
    rejection = admit(wanted, node=NODE, held_ports=[held])
    assert (rejection is not None) == refused
    if rejection is not None:
        assert rejection.reason == "NodePorts"


def test_held_ports_do_not_count_as_pods_or_requests() -> None:
    node = NodeInfo(
        name="n1",
        allocatable=parse_node_resources("cpu=1,memory=1Gi,pods=1", base=NodeResources(0, 0)),
    )
    assert admit(_pod("a", 9000), node=node, held_ports=[("TCP", "0.0.0.0", 8080)] * 5) is None


# -- reading the engine --------------------------------------------------------------------


async def test_engine_ports_reads_other_owners_and_other_nodes_not_its_own() -> None:
    docker = _docker()
    _holder(docker, owner="run-1", host_port=8080, uid="u1")
    _holder(docker, node="other-node", owner="", host_port=8081, uid="u2")
    _holder(docker, owner="", host_port=8082, uid="u3")
    _holder(docker, owner="run-2", host_port=8083, state="exited", uid="u4")
    ports = EnginePorts(docker, node_name="n1")
    await ports.refresh()
    assert sorted(ports.ports) == [("TCP", "0.0.0.0", 8080), ("TCP", "0.0.0.0", 8081)]
    assert docker.count("list_containers") == 1


async def test_a_node_with_an_owner_takes_the_agents_pods_ports_as_held() -> None:
    docker = _docker()
    _holder(docker, owner="", host_port=8082)
    _holder(docker, owner="run-1", host_port=8080, uid="u1")
    ports = EnginePorts(docker, node_name="n1", owner="run-1")
    await ports.refresh()
    assert ports.ports == (("TCP", "0.0.0.0", 8082),)


async def test_an_engine_that_does_not_answer_leaves_the_last_reading() -> None:
    from asynckubelet import errors

    docker = _docker()
    _holder(docker, host_port=8080)
    ports = EnginePorts(docker, node_name="n1")
    await ports.refresh()
    docker.fail("list_containers", errors.RuntimeUnavailable("down"))
    await ports.refresh()
    assert ports.ports == (("TCP", "0.0.0.0", 8080),)


def test_port_holders_group_containers_by_pod_and_skip_malformed_labels() -> None:
    def row(cid: str, uid: str, ports: str) -> dict[str, object]:
        return {
            "Id": cid,
            "Labels": {naming.LABEL_POD_UID: uid, naming.LABEL_PORTS: ports},
        }

    good = json.dumps([{"containerPort": 80, "hostPort": 80}, {"containerPort": 81}])
    rows = [row("a", "u1", good), row("b", "u1", good), row("c", "u2", "not json")]
    rows.append(row("d", "u3", json.dumps({"hostPort": 80})))
    pods = port_holders(rows)  # type: ignore[arg-type]
    assert [p.metadata.uid for p in pods if p.metadata] == ["u1"]
    assert pods[0].spec is not None
    assert [len(c.ports or []) for c in pods[0].spec.containers] == [1, 1]


# -- the node agent ------------------------------------------------------------------------


async def test_the_node_refuses_a_pod_asking_for_a_host_port_a_run_holds(tmp_path: Path) -> None:
    docker = _docker()
    _holder(docker, host_port=8080)
    async with _kubelet(tmp_path, docker) as node:
        await node.apply(_pod("web", 8080))
        got = node.get("default", "web")
        events = node.recorder.list()
    assert got is not None
    assert got.status is not None
    assert (got.status.phase, got.status.reason) == ("Failed", "NodePorts")
    assert got.status.message == REFUSED
    assert [(e.type, e.reason) for e in events] == [("Warning", "NodePorts")]


async def test_a_run_started_after_the_node_is_seen_at_the_next_apply(tmp_path: Path) -> None:
    docker = _docker()
    async with _kubelet(tmp_path, docker) as node:
        _holder(docker, host_port=8080)
        before = docker.count("list_containers")
        web, api = _pod("web", 8080), _pod("api", 8080, protocol="UDP")
        await node.apply([web, api])
        assert docker.count("list_containers") - before >= 1
        refused = node.get("default", "web")
        assert node.has_pod(_uid(api))
        assert not node.has_pod(_uid(web))
    assert refused is not None
    assert refused.status is not None
    assert refused.status.reason == "NodePorts"


async def test_an_apply_without_host_ports_reads_nothing_more(tmp_path: Path) -> None:
    docker = _docker()
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\n"
        "spec:\n  containers:\n  - {name: app, image: busybox}\n"
    )
    pod = load_manifests_text(text, node_name="n1", pod_security="privileged").pods[0]
    async with _kubelet(tmp_path, docker) as node:
        listed = docker.count("list_containers")
        await node.apply(pod)
        assert docker.count("list_containers") == listed


async def test_the_nodes_own_pods_ports_are_not_held_against_it(tmp_path: Path) -> None:
    docker = _docker()
    _holder(docker, owner="", host_port=8080, uid="u-own")
    async with _kubelet(tmp_path, docker) as node:
        assert node.engine_ports.ports == ()
        pod = _pod("web", 8080)
        await node.apply(pod)
        assert node.has_pod(_uid(pod))


async def test_a_node_taking_a_pod_whose_port_a_run_freed_admits_it(tmp_path: Path) -> None:
    docker = _docker()
    _holder(docker, host_port=8080)
    async with _kubelet(tmp_path, docker) as node:
        for container in list(docker.containers.values()):
            docker.exit(container.id)
        pod = _pod("web", 8080)
        await node.apply(pod)
        assert node.has_pod(_uid(pod))
