"""A container restarted in place by its pod's worker (``sync+restart``): the same
container stopped and started again, with no sync of the pod seeing it stopped, and the
refusals of what cannot be restarted, on the node and through its API (FakeDocker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import builders
import pytest
from aiohttp.test_utils import TestClient, TestServer
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.api.localapi import create_local_app
from asynckubelet.node.inplace import InPlaceRestarts
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"
RESTARTS = "/apis/local.asynckubelet/v1/restarts"


def web() -> Pod:
    return builders.pod(
        "web", containers=[builders.container("app", BUSYBOX), builders.container("side", BUSYBOX)]
    )


def app_containers(docker: FakeDocker) -> dict[str, str]:
    """Container name -> ID of every app container there is."""
    return {
        c.labels[naming.LABEL_CONTAINER_NAME]: cid
        for cid, c in docker.containers.items()
        if c.labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER
    }


@pytest.fixture
async def node() -> AsyncIterator[tuple[Kubelet, FakeDocker]]:
    docker = FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
    config = KubeletConfig(node_name="n1", pause_image=PAUSE, docker_url="tcp://fake:2375")
    async with Kubelet(config, docker=docker) as kubelet:
        await kubelet.apply(web())
        with anyio.fail_after(10):
            await kubelet.wait("default", "web", "Running")
        yield kubelet, docker


async def test_the_same_container_is_restarted_and_no_sync_sees_it_stopped(
    node: tuple[Kubelet, FakeDocker],
) -> None:
    kubelet, docker = node
    before = app_containers(docker)
    created = docker.count("create_container")
    started = docker.containers[before["app"]].started_at
    held = docker.hold("start_container", target=before["app"])
    restarted: list[str] = []

    async def restart() -> None:
        restarted.extend(await kubelet.restart_in_place("default", "web", ["app"], grace_period=1))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(restart)
            while docker.containers[before["app"]].status != "exited":  # noqa: ASYNC110
                await anyio.sleep(0.01)
            # The engine reports the container dead; a sync now would replace it.
            for _ in range(20):
                for entry in kubelet._entries.values():
                    entry.worker.poke()
                await anyio.sleep(0.01)
            assert docker.count("create_container") == created
            held.set()
    assert restarted == [before["app"]]
    assert app_containers(docker) == before
    assert docker.containers[before["app"]].status == "running"
    assert docker.containers[before["app"]].started_at != started
    assert docker.targets("stop_container").count(before["side"]) == 0
    assert docker.count("create_container") == created
    events = [(e.reason, e.message) for e in kubelet.list_events(name="web")]
    assert events[-2:] == [
        ("Killing", "Stopping container app to restart it in place"),
        ("Started", "Started container app"),
    ]


async def test_what_cannot_be_restarted_is_refused_naming_it(
    node: tuple[Kubelet, FakeDocker],
) -> None:
    kubelet, docker = node
    with pytest.raises(errors.PodNotFound, match='pods "nope" not found'):
        await kubelet.restart_in_place("default", "nope", ["app"], grace_period=1)
    with pytest.raises(errors.PodNotFound, match='pods "web" not found'):
        await kubelet.restart_in_place("other", "web", ["app"], grace_period=1)
    with pytest.raises(
        errors.ContainerNotValid,
        match=r"container db is not valid for pod web: choose one of: \[app side\]",
    ):
        await kubelet.restart_in_place("default", "web", ["db"], grace_period=1)
    assert docker.count("stop_container") == 0


async def test_a_pod_that_is_stopping_takes_no_restart() -> None:
    restarts = InPlaceRestarts()
    pending = restarts.ask(["app"], grace_period=1)
    restarts.close('pod "web" is being stopped')
    assert pending.done.is_set()
    assert isinstance(pending.error, errors.PodConflict)
    late = restarts.ask(["app"], grace_period=1)
    assert late.done.is_set()
    assert str(late.error) == 'pod "web" is being stopped'


@pytest.fixture
async def api(node: tuple[Kubelet, FakeDocker]) -> AsyncIterator[TestClient[Any, Any]]:
    kubelet, _ = node
    async with TestClient(TestServer(create_local_app(kubelet, uids=()))) as client:
        yield client


def restart_body(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "local.asynckubelet/v1", "kind": "Restart", "spec": spec}


async def test_a_restart_through_the_api_answers_each_containers_id(
    node: tuple[Kubelet, FakeDocker], api: TestClient[Any, Any]
) -> None:
    _, docker = node
    before = app_containers(docker)
    body = restart_body(pod="web", containers=["side", "app"], gracePeriodSeconds=0)
    response = await api.post(RESTARTS, json=body)
    assert response.status == 201, await response.text()
    answer = await response.json()
    assert answer["status"]["containers"] == [
        {"name": "side", "containerID": f"docker://{before['side']}"},
        {"name": "app", "containerID": f"docker://{before['app']}"},
    ]
    assert app_containers(docker) == before


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"kind": "Apply", "apiVersion": "local.asynckubelet/v1"}, 400, "must be a Restart"),
        (restart_body(pod="web"), 400, "spec.containers must be a list of 1 to 64"),
        (restart_body(pod="web", containers=[]), 400, "spec.containers must be a list"),
        (restart_body(pod="web", containers=["app", "app"]), 400, "must not name a container"),
        (restart_body(pod="web", containers=[7]), 400, "spec.containers must be a list"),
        (restart_body(pod="", containers=["app"]), 400, "spec.pod must be a name"),
        (restart_body(pod="web", namespace=3, containers=["app"]), 400, "spec.namespace"),
        (
            restart_body(pod="web", containers=["app"], gracePeriodSeconds=-1),
            400,
            "spec.gracePeriodSeconds must be a whole number from 0 to 300",
        ),
        (
            restart_body(pod="web", containers=["app"], gracePeriodSeconds=10**9),
            400,
            "spec.gracePeriodSeconds",
        ),
        (restart_body(pod="web", containers=["x" * 10] * 65), 400, "1 to 64"),
        (restart_body(pod="web", containers=["db"]), 400, "container db is not valid"),
        (restart_body(pod="nope", containers=["app"]), 404, 'pods "nope" not found'),
    ],
)
async def test_a_bad_restart_is_refused_with_the_api_servers_status(
    node: tuple[Kubelet, FakeDocker],
    api: TestClient[Any, Any],
    body: dict[str, Any],
    code: int,
    message: str,
) -> None:
    _, docker = node
    response = await api.post(RESTARTS, json=body)
    answer = await response.json()
    assert (response.status, answer["kind"], answer["code"]) == (code, "Status", code)
    assert message in answer["message"]
    assert docker.count("stop_container") == 0


async def test_a_container_that_is_not_running_is_a_conflict(
    node: tuple[Kubelet, FakeDocker], api: TestClient[Any, Any]
) -> None:
    _, docker = node
    held = docker.hold("create_container")
    docker.exit(app_containers(docker)["app"], exit_code=1)
    response = await api.post(RESTARTS, json=restart_body(pod="web", containers=["app"]))
    answer = await response.json()
    held.set()
    assert (response.status, answer["reason"]) == (409, "Conflict")
    assert answer["message"] == 'container "app" of pod "web" is not running'
