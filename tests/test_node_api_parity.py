"""The node API's two sides answer alike: the same node, asked through its daemon's local
API (the remote side) and read in this process from its engine and state dir (the
in-process side), gives the same objects, tables, logs and refusals.

One node runs on :class:`~asynckubelet.testing.FakeDocker` behind the real local API
(:func:`daemon_helpers.running_daemon`); the in-process side reads the same fake engine
and the same state dir. Ages and times are left out of the comparison: each side reads
the clock when it answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import Daemon, running_daemon

from asynckubelet import errors
from asynckubelet.api.client import NodeClient
from asynckubelet.api.inprocess import InProcessNode
from asynckubelet.api.protocol import NodeAPI, PodLogOptions
from asynckubelet.api.remote import RemoteNode
from asynckubelet.docker import LogLine
from asynckubelet.node.locate import SOCKET_NAME

MANIFESTS = """\
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers: [{name: c, image: "busybox:1.35", command: [sleep, "1000"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: db, labels: {app: db}}
spec:
  containers: [{name: c, image: "busybox:1.35", command: [sleep, "1000"]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web}}
data: {mode: fast, level: "3"}
---
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: front}
spec:
  replicas: 0
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front}}
    spec:
      containers: [{name: c, image: "busybox:1.35"}]
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    state = tmp_path_factory.mktemp("parity") / "state"
    with running_daemon(state, node_name="n1") as d:
        client = NodeClient(str(state / SOCKET_NAME))
        client.apply([("all.yaml", MANIFESTS)])
        d.portal.call(lambda: d.node.wait("default", "web", "Running", timeout=10))
        d.portal.call(lambda: d.node.wait("default", "db", "Running", timeout=10))
        web = next(
            c
            for c in d.portal.call(d.docker.list_containers)
            if "_c_web_" in str((c.get("Names") or [""])[0])
        )
        d.docker.log_lines[web["Id"]] = [
            LogLine(stream="stdout", text="first"),
            LogLine(stream="stderr", text="second"),
            LogLine(stream="stdout", text="third"),
        ]
        yield d


@pytest.fixture(scope="module")
def sides(node: Daemon) -> Iterator[tuple[NodeAPI, NodeAPI]]:
    remote = RemoteNode(NodeClient(str(node.state / SOCKET_NAME)))
    local = InProcessNode(state=node.state, node_name="n1", docker_host=None, docker=node.docker)
    try:
        yield remote, local
    finally:
        local.close()


def _timeless(table: dict[str, Any]) -> list[list[Any]]:
    """A table's cells, the AGE column (a clock reading) left out."""
    names = [c["name"] for c in table["columnDefinitions"]]
    keep = [i for i, name in enumerate(names) if name not in ("Age", "Last Seen")]
    return [[row["cells"][i] for i in keep] for row in table["rows"]]


def _pod_view(pod: dict[str, Any]) -> tuple[Any, ...]:
    status = pod.get("status") or {}
    return (
        pod.get("apiVersion"),
        pod.get("kind"),
        pod["metadata"]["name"],
        pod["metadata"].get("namespace"),
        pod["metadata"].get("labels"),
        pod["spec"].get("nodeName"),
        [c["name"] for c in pod["spec"]["containers"]],
        status.get("phase"),
        [
            (c["name"], c.get("ready"), c.get("containerID"))
            for c in status.get("containerStatuses") or []
        ],
    )


def _object_view(body: dict[str, Any]) -> tuple[Any, ...]:
    meta = body["metadata"]
    return (
        body.get("kind"),
        meta["name"],
        meta.get("namespace"),
        meta.get("labels"),
        body.get("data"),
        body.get("spec"),
    )


Ask = Callable[[NodeAPI], Any]

PARITY: list[tuple[str, Ask]] = [
    ("pods table", lambda api: _timeless(api.table("pods", "default"))),
    ("pods table of all namespaces", lambda api: _timeless(api.table("pods", None))),
    ("one pod's row", lambda api: _timeless(api.table("pods", "default", "web"))),
    (
        "pods a label selects",
        lambda api: [_pod_view(p) for p in api.list("pods", "default", selector="app=web")],
    ),
    ("one pod", lambda api: _pod_view(api.get("pods", "default", "db"))),
    ("configmaps table", lambda api: _timeless(api.table("configmaps", "default"))),
    ("configmaps", lambda api: [_object_view(b) for b in api.list("configmaps", "default")]),
    (
        "configmaps a label selects",
        lambda api: [_object_view(b) for b in api.list("configmaps", None, selector="app=web")],
    ),
    (
        "secrets without their values",
        lambda api: [_object_view(b) for b in api.list("secrets", None)],
    ),
    ("one secret", lambda api: _object_view(api.get("secrets", "default", "db"))),
    ("deployments table", lambda api: _timeless(api.table("deployments", "default"))),
    ("namespaces table", lambda api: _timeless(api.table("namespaces", None))),
    (
        "a container's log",
        lambda api: b"".join(api.log("default", "web", PodLogOptions(container="c"))),
    ),
    (
        "a container's log, its last line",
        lambda api: b"".join(api.log("default", "web", PodLogOptions(container="c", tail_lines=1))),
    ),
    (
        "a container's log, bounded",
        lambda api: b"".join(
            api.log("default", "web", PodLogOptions(container="c", limit_bytes=8))
        ),
    ),
    ("where exec lands", lambda api: api.exec_target("default", "web", None).container_id),
]


@pytest.mark.parametrize(("what", "ask"), PARITY, ids=[what for what, _ in PARITY])
def test_both_sides_answer_alike(what: str, ask: Ask, sides: tuple[NodeAPI, NodeAPI]) -> None:
    remote, local = sides
    assert remote.remote
    assert not local.remote
    answer = ask(remote)
    assert answer, f"{what}: the daemon answered nothing, so the comparison would check nothing"
    assert ask(local) == answer


REFUSALS: list[tuple[str, Ask]] = [
    ("a missing pod", lambda api: api.get("pods", "default", "nope")),
    ("a missing pod's row", lambda api: api.table("pods", "default", "nope")),
    ("a missing configmap", lambda api: api.get("configmaps", "default", "nope")),
    ("a label selector that does not parse", lambda api: api.list("pods", None, selector="-x=1")),
]


@pytest.mark.parametrize(("what", "ask"), REFUSALS, ids=[what for what, _ in REFUSALS])
def test_both_sides_refuse_alike(what: str, ask: Ask, sides: tuple[NodeAPI, NodeAPI]) -> None:
    said = []
    for api in sides:
        with pytest.raises(errors.AsyncKubeletError) as caught:
            ask(api)
        said.append(str(caught.value))
    assert said[0] == said[1]


def test_the_in_process_side_refuses_a_watch_naming_the_daemon_it_needs(
    sides: tuple[NodeAPI, NodeAPI], node: Daemon
) -> None:
    _, local = sides
    with pytest.raises(errors.DaemonError, match="get --watch needs one") as caught:
        next(iter(local.watch("default")))
    assert str(node.state) in str(caught.value)


def test_a_pod_the_daemon_deleted_is_gone_from_both_sides(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with running_daemon(state, node_name="n1") as d:
        client = NodeClient(str(state / SOCKET_NAME))
        client.apply([("pods.yaml", "---\n".join(MANIFESTS.split("---\n")[:2]))])
        d.portal.call(lambda: d.node.wait("default", "db", "Running", timeout=10))
        remote = RemoteNode(client)
        results = remote.delete(
            [{"kind": "Pod", "namespace": "default", "name": n} for n in ("db", "nope")],
            timeout=10,
        )
        assert [r["status"] for r in results] == ["deleted", "notfound"]
        local = InProcessNode(state=state, node_name="n1", docker_host=None, docker=d.docker)
        try:
            assert [p["metadata"]["name"] for p in local.list("pods", "default")] == ["web"]
            assert [p["metadata"]["name"] for p in remote.list("pods", "default")] == ["web"]
        finally:
            local.close()
