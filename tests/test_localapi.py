"""The daemon's local API on a node over a fake engine: Kubernetes-shaped answers and
errors, admission with the daemon's level, objects shared by a whole namespace, pods
that start once what they wait for is applied, and a socket only its user may use."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer
from daemon_helpers import IMAGES
from localapi_helpers import Client, apply, plain, serving
from polling import until
from remote_helpers import delete_remotely

from asynckubelet import errors
from asynckubelet.api.localapi import create_local_app, serve_local
from asynckubelet.kubectl.tables import TABLE_ACCEPT
from asynckubelet.node import daemon
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

LOCAL = "/apis/local.asynckubelet/v1"
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox:1.35
    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: settings, key: mode}}}]
"""
CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: VALUE}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: hunter2-do-not-print}
"""
MOUNTED = """\
apiVersion: v1
kind: Pod
metadata: {name: mounted}
spec:
  volumes: [{name: cfg, configMap: {name: settings}}]
  containers:
  - {name: app, image: busybox:1.35, volumeMounts: [{name: cfg, mountPath: /etc/cfg}]}
"""


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet]]:
    async with serving(tmp_path) as pair:
        yield pair


def verdicts(body: dict[str, Any]) -> list[str]:
    return [f"{i['kind'].lower()}/{i['name']} {i['verdict']}" for i in body["items"]]


async def test_a_missing_pod_is_a_kubernetes_not_found_status(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    response = await client.get("/api/v1/namespaces/default/pods/nope")
    assert response.status == 404
    body = await response.json()
    assert {k: body[k] for k in ("kind", "status", "reason", "message", "code")} == {
        "kind": "Status",
        "status": "Failure",
        "reason": "NotFound",
        "message": 'pods "nope" not found',
        "code": 404,
    }


async def test_apply_answers_each_objects_verdict_as_kubectl_words_it(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    first = verdicts((await apply(client, CONFIG.replace("VALUE", "a"), SECRET))[1])
    again = verdicts((await apply(client, CONFIG.replace("VALUE", "a"), SECRET))[1])
    changed = verdicts((await apply(client, CONFIG.replace("VALUE", "b")))[1])
    assert first == ["configmap/settings created", "secret/db created"]
    assert again == ["configmap/settings unchanged", "secret/db unchanged"]
    assert changed == ["configmap/settings configured"]


async def test_apply_answers_in_the_order_the_files_hold_the_objects(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    team = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    in_team = CONFIG.replace("VALUE", "a").replace(
        "{name: settings}", "{name: s2, namespace: team}"
    )
    code, body = await apply(
        client, f"{POD}---\n{SECRET}", f"{in_team}---\n{CONFIG.replace('VALUE', 'a')}", team
    )
    assert code == 201, body
    assert verdicts(body) == [
        "pod/web created",
        "secret/db created",
        "configmap/s2 created",
        "configmap/settings created",
        "namespace/team created",
    ]


async def test_a_rejected_file_is_a_422_with_every_error_and_nothing_is_applied(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    bad = POD.replace("name: web", "name: Web_1").replace("name: app", "name: App")
    code, body = await apply(client, SECRET, bad)
    assert (code, body["reason"]) == (422, "Invalid")
    fields = sorted(c["field"] for c in body["details"]["causes"])
    assert fields == ["metadata.name", "spec.containers[0].name"]
    assert node.objects.list("Secret") == []
    assert node.list() == []


async def test_admission_is_the_daemons_pod_security_level(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    host = POD.replace("spec:\n", "spec:\n  hostNetwork: true\n")
    code, body = await apply(client, host)
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"].startswith(
        'error when creating "f0.yaml": pods "web" is forbidden: '
        'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)'
    )
    assert body["details"] == {"name": "web", "kind": "pods"}


async def test_a_stored_namespace_label_applies_to_pods_applied_later(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    namespace = (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: locked\n"
        "  labels: {pod-security.kubernetes.io/enforce: restricted}\n"
    )
    assert (await apply(client, namespace))[0] == 201
    code, body = await apply(client, POD.replace("{name: web}", "{name: web, namespace: locked}"))
    assert code == 403
    assert 'pods "web" is forbidden: violates PodSecurity "restricted:latest"' in body["message"]


async def test_secrets_are_listed_and_read_without_their_values(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    await apply(client, SECRET)
    listed = await (await client.get("/api/v1/namespaces/default/secrets")).text()
    one = await (await client.get("/api/v1/namespaces/default/secrets/db")).text()
    everywhere = await (await client.get("/api/v1/secrets")).text()
    for text in (listed, one, everywhere):
        assert '"db"' in text
        assert "hunter2" not in text
        assert "aHVudGVyMi" not in text


async def test_a_pod_waiting_for_a_configmap_starts_once_it_is_applied(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, POD)
    waiting = await node.wait(
        "default",
        "web",
        lambda p: "CreateContainerConfigError" in str(p and p.status),
        timeout=10,
    )
    assert waiting is not None
    await apply(client, CONFIG.replace("VALUE", "fast"))
    with anyio.fail_after(10):
        await node.wait("default", "web", "Running")


async def test_a_mounted_configmap_volume_gets_the_new_data(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, CONFIG.replace("VALUE", "fast"), MOUNTED)
    pod = await node.wait("default", "mounted", "Running", timeout=10)
    assert pod is not None
    assert pod.metadata is not None
    volumes = node.runtime.volumes
    assert volumes is not None
    mode = volumes.volume_dir(pod.metadata.uid or "", "configMap", "cfg") / "mode"  # type: ignore[attr-defined]
    assert mode.read_text() == "fast"
    await apply(client, CONFIG.replace("VALUE", "slow"))
    await until(lambda: mode.read_text() == "slow", interval=0.05)


async def test_the_server_prints_the_pod_table_kubectl_asks_for(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, CONFIG.replace("VALUE", "fast"), POD)
    await node.wait("default", "web", "Running", timeout=10)
    response = await client.get("/api/v1/pods", headers={"Accept": TABLE_ACCEPT})
    table = await response.json()
    assert table["kind"] == "Table"
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    [row] = table["rows"]
    assert row["cells"][:4] == ["web", "1/1", "Running", "0"]
    assert row["cells"][-3:] == ["n1", "<none>", "<none>"]
    assert row["object"]["metadata"] == {"name": "web", "namespace": "default"}


async def test_pods_are_answered_bound_to_the_daemons_node(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, CONFIG.replace("VALUE", "fast"), POD)
    await node.wait("default", "web", "Running", timeout=10)
    pod = await (await client.get("/api/v1/namespaces/default/pods/web")).json()
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["status"]["phase"] == "Running"


async def test_delete_answers_what_it_deleted_once_the_pods_are_gone(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, CONFIG.replace("VALUE", "fast"), POD)
    await node.wait("default", "web", "Running", timeout=10)
    objects = [
        {"kind": "Pod", "namespace": "default", "name": "web"},
        {"kind": "ConfigMap", "namespace": "default", "name": "settings"},
        {"kind": "Secret", "namespace": "default", "name": "absent"},
    ]
    items = await delete_remotely(client, objects, grace_period=0, timeout=30)
    assert [i["status"] for i in items] == ["deleted", "deleted", "notfound"]
    assert node.get("default", "web") is None
    assert node.objects.list("ConfigMap") == node.objects.list("Pod") == []


async def test_events_are_selected_by_the_pods_uid(served: tuple[Client, Kubelet]) -> None:
    client, node = served
    await apply(client, POD)
    pod = await node.wait(
        "default", "web", lambda p: "CreateContainerConfigError" in str(p and p.status), timeout=10
    )
    assert pod is not None
    assert pod.metadata is not None
    path = f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid={pod.metadata.uid}"
    events = (await (await client.get(path)).json())["items"]
    assert events
    assert {e["involvedObject"]["name"] for e in events} == {"web"}
    assert {e["source"]["host"] for e in events} == {"n1"}
    none = await client.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid=x")
    assert (await none.json())["items"] == []


async def test_the_socket_is_0600_and_a_stale_one_is_replaced(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(daemon.socket_path(state)))
    stale.close()
    path = daemon.claim_socket(state)
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(images=IMAGES),
    )
    async with node, anyio.create_task_group() as tg:
        await tg.start(
            lambda task_status: serve_local(node, path=str(path), task_status=task_status)
        )
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        assert daemon.socket_answers(path)
        with pytest.raises(errors.DaemonError, match="another `asynckubelet serve` answers"):
            daemon.claim_socket(state)
        tg.cancel_scope.cancel()


async def test_deleting_a_namespace_deletes_everything_in_it(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    inside = CONFIG.replace("VALUE", "fast").replace(
        "{name: settings}", "{name: settings, namespace: team}"
    )
    pod = POD.replace("{name: web}", "{name: web, namespace: team}")
    assert (await apply(client, namespace, inside, pod))[0] == 201
    await node.wait("team", "web", "Running", timeout=10)
    objects = [{"kind": "Namespace", "name": "team"}]
    items = await delete_remotely(client, objects, timeout=30)
    assert [i["status"] for i in items] == ["deleted"]
    await node.wait("team", "web", "Deleted", timeout=30)
    assert not any(node.objects.list(k) for k in ("Namespace", "ConfigMap", "Pod"))


async def test_a_file_holding_a_namespace_and_its_objects_deletes_them_all(
    served: tuple[Client, Kubelet],
) -> None:
    """``delete -f`` of a file whose Namespace comes first: every object is ``deleted``,
    in the file's order (the namespace goes last, so its objects are still there)."""
    client, node = served
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    inside = CONFIG.replace("VALUE", "fast").replace(
        "{name: settings}", "{name: settings, namespace: team}"
    )
    assert (await apply(client, namespace, inside))[0] == 201
    objects = [
        {"kind": "Namespace", "name": "team"},
        {"kind": "ConfigMap", "namespace": "team", "name": "settings"},
    ]
    items = await delete_remotely(client, objects, timeout=30)
    assert [(i["kind"], i["status"]) for i in items] == [
        ("Namespace", "deleted"),
        ("ConfigMap", "deleted"),
    ]
    assert not any(node.objects.list(k) for k in ("Namespace", "ConfigMap"))


TEAM = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"


async def running_in_team(client: Client, node: Kubelet) -> None:
    """Apply the namespace ``team`` and its pod ``web``, wait until the pod runs."""
    assert (await apply(client, TEAM, plain("web", "team")))[0] == 201
    await node.wait("team", "web", "Running", timeout=10)


async def test_a_deleted_namespace_takes_nothing_new_until_its_pods_are_gone(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await running_in_team(client, node)
    docker = node.runtime.docker
    assert isinstance(docker, FakeDocker)
    (app,) = [
        c for c in docker.containers.values() if c.labels.get(naming.LABEL_CONTAINER_NAME) == "app"
    ]
    app.ignores_stop_signal = True
    objects = [{"kind": "Namespace", "name": "team"}]
    answer = await delete_remotely(client, objects, grace_period=30, timeout=0.2)
    items = [(i["kind"], i["name"], i["status"]) for i in answer]
    assert items == [("Namespace", "team", "deleted"), ("Pod", "web", "timeout")]
    code, body = await apply(client, TEAM, plain("other", "team"))
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'pods "other" is forbidden: unable to create new content in namespace team because '
        "it is being terminated"
    )
    assert (await apply(client, plain("elsewhere")))[0] == 201
    docker.exit(app.id, exit_code=0)
    await node.wait("team", "web", "Deleted", timeout=10)
    assert (await apply(client, TEAM, plain("other", "team")))[0] == 201


def stubborn_app(node: Kubelet) -> Any:
    """The container ``app`` of the node's one pod, made to ignore its stop signal."""
    docker = node.runtime.docker
    assert isinstance(docker, FakeDocker)
    (app,) = [
        c for c in docker.containers.values() if c.labels.get(naming.LABEL_CONTAINER_NAME) == "app"
    ]
    app.ignores_stop_signal = True
    return app


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(3600, 1, id="a-shorter-one-cuts-the-stop-short"),
        pytest.param(1, 3600, id="a-longer-one-leaves-the-shorter"),
    ],
)
async def test_a_second_delete_keeps_the_shorter_grace_period(
    served: tuple[Client, Kubelet], first: int, second: int
) -> None:
    client, node = served
    assert (await apply(client, plain("web")))[0] == 201
    await node.wait("default", "web", "Running", timeout=10)
    app = stubborn_app(node)
    assert await node.delete("default", "web", grace_period=first, wait=False)
    pod = await (await client.get("/api/v1/namespaces/default/pods/web")).json()
    assert pod["metadata"]["deletionGracePeriodSeconds"] == first
    assert await node.delete("default", "web", grace_period=second, wait=False)
    pod = await (await client.get("/api/v1/namespaces/default/pods/web")).json()
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 1
    with anyio.fail_after(30):
        await node.wait("default", "web", "Deleted", timeout=30)
    assert app.exit_code == 137


async def test_deleting_a_namespace_waits_until_its_pods_are_gone(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await running_in_team(client, node)
    objects = [{"kind": "Namespace", "name": "team"}]
    items = await delete_remotely(client, objects, timeout=30)
    assert [i["status"] for i in items] == ["deleted"]
    assert node.get("team", "web") is None


async def test_a_restarted_node_takes_back_the_pods_and_objects_it_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    docker = FakeDocker(images=IMAGES)

    def node() -> Kubelet:
        config = KubeletConfig(
            node_name="n1",
            state_dir=state,
            housekeeping_period=0.1,
            resync_period=0.2,
            leave_running=True,
        )
        objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
        return Kubelet(config, docker=docker, objects=objects)

    first = node()
    async with first, TestClient(TestServer(create_local_app(first, uids=()))) as client:
        await apply(client, CONFIG.replace("VALUE", "fast"), POD)
        await first.wait("default", "web", "Running", timeout=10)
    running = {c.id for c in docker.containers.values()}
    second = node()
    async with second:
        pod = await second.wait("default", "web", "Running", timeout=10)
        assert pod is not None
        assert await second.housekeeping() == []
        assert second.objects.view("default").configmaps == {"settings": {"mode": "fast"}}
    assert {c.id for c in docker.containers.values()} == running


async def test_served_pods_carry_creation_time_last_state_and_are_sorted(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, plain("b", "team"), plain("a", "team"), plain("z"))
    await node.wait("team", "a", "Running", timeout=10)
    body = await (await client.get("/api/v1/pods")).json()
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in body["items"]] == [
        ("default", "z"),
        ("team", "a"),
        ("team", "b"),
    ]
    pod = await (await client.get("/api/v1/namespaces/team/pods/a")).json()
    assert pod["metadata"]["creationTimestamp"]
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    statuses = pod["status"]["containerStatuses"]
    assert [cs["lastState"] for cs in statuses] == [{}]


async def test_serving_pods_leaves_the_node_s_shared_pods_as_they_were(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, plain("a"))
    await node.wait("default", "a", "Running", timeout=10)
    body = await (await client.get("/api/v1/pods")).json()
    assert body["items"][0]["spec"]["nodeName"] == node.node_name
    assert body["items"][0]["metadata"]["creationTimestamp"]
    (shared,) = node.views()
    assert shared.spec is not None
    assert shared.metadata is not None
    assert shared.spec.nodeName is None
    assert shared.metadata.creationTimestamp is None


async def test_the_local_api_serves_the_nodes_metrics(served: tuple[Client, Kubelet]) -> None:
    client, _ = served
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE" in await response.text()


async def running_web(client: Client, node: Kubelet) -> str:
    """Apply the pod ``web`` and its config map, wait until it runs: its UID."""
    await apply(client, CONFIG.replace("VALUE", "fast"), POD)
    pod = await node.wait("default", "web", "Running", timeout=10)
    assert pod is not None
    assert pod.metadata is not None
    return str(pod.metadata.uid)


async def pod_events(client: Client, uid: str) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid={uid}"
    return list((await (await client.get(path)).json())["items"])


async def test_a_re_created_pod_does_not_show_the_events_of_the_one_before(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    uid = await running_web(client, node)
    assert await pod_events(client, uid)
    deleted = [{"kind": "Pod", "namespace": "default", "name": "web"}]
    items = await delete_remotely(client, deleted, grace_period=0, timeout=30)
    assert [i["status"] for i in items] == ["deleted"]
    # A deleted pod's events stay listed, as the API server keeps them, until a pod is
    # made anew under its UID.
    assert "Killing" in {e.reason for e in node.recorder.list(uid=uid)}
    assert await running_web(client, node) == uid
    events = await pod_events(client, uid)
    assert {e["reason"] for e in events} >= {"Created", "Started"}
    assert "Killing" not in {e["reason"] for e in events}
    assert {e["count"] for e in events} == {1}


async def test_events_from_before_a_pods_creation_are_not_listed_for_it(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    uid = await running_web(client, node)
    stored = node.objects.get("Pod", "default", "web")
    assert stored is not None
    created = stored.created()
    assert created is not None
    earlier = created - timedelta(seconds=1)
    old = PodEvent(
        namespace="default",
        pod="web",
        uid=uid,
        type="Normal",
        reason="Killing",
        message="Stopping container app",
        first_timestamp=earlier - timedelta(minutes=5),
        last_timestamp=earlier,
        count=2,
        container="app",
    )
    assert node.recorder.path is not None
    with node.recorder.path.open("a") as f:
        f.write(json.dumps(old.to_json()) + "\n")
    assert node.recorder.load() == 1
    assert old in node.recorder.list(uid=uid)
    for path in (
        f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid={uid}",
        "/api/v1/namespaces/default/events",
        "/api/v1/events",
    ):
        events = (await (await client.get(path)).json())["items"]
        assert events
        assert "Killing" not in {e["reason"] for e in events}


async def test_a_restarted_node_lists_the_events_of_its_last_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600)
    docker = FakeDocker(images=IMAGES)
    async with Kubelet(config, docker=docker) as node:
        node.recorder.record(
            namespace="default", name="web", uid="u1", type="Normal", reason="Pulled", message="m"
        )
    async with Kubelet(config, docker=docker) as node:
        assert [(e.pod, e.reason) for e in node.recorder.list()] == [("web", "Pulled")]
        node.recorder.record(
            namespace="default", name="web", uid="u1", type="Normal", reason="Pulled", message="m"
        )
        assert [e.count for e in node.recorder.list()] == [2]


async def test_a_deleted_static_pods_stopped_status_keeps_a_phase_that_is_not_terminal(
    tmp_path: Path,
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    config = KubeletConfig(
        node_name="n1",
        state_dir=tmp_path / "state",
        manifest_dir=manifests,
        housekeeping_period=3600,
        resync_period=0.2,
    )
    node = Kubelet(config, docker=FakeDocker(images=IMAGES))
    async with node:
        (manifests / "a.yaml").write_text(plain("a"))
        await node.wait("default", "a", "Ready", timeout=10)
        seen: list[tuple[str, str | None, list[bool]]] = []
        async with node.watch(initial=False) as changes:
            (manifests / "a.yaml").unlink()
            with anyio.fail_after(10):
                async for kind, pod in changes:
                    status = pod.status
                    assert status is not None
                    stopped = [
                        cs.state is not None and cs.state.terminated is not None
                        for cs in status.containerStatuses or []
                    ]
                    seen.append((kind, status.phase, stopped))
                    if kind == "DELETED":
                        break
    assert seen[-1] == ("DELETED", "Running", [True])
    assert ("MODIFIED", "Running", [True]) in seen
