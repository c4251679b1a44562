"""Image pull policies, pull secrets and pull back-off against a registry on 127.0.0.1."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import builders
import pytest
import yaml

from asynckubelet.docker import DockerClient
from integration.harness import BUSYBOX_IMAGE
from integration.registry import Registry, registry
from integration.runtime_helpers import Driver, Recorder, container_status, manager, pod_from

__all__ = ["registry"]

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pushed(docker: DockerClient, registry: Registry) -> AsyncIterator[str]:
    """A fresh image in the registry, absent from the engine; removed from it afterwards."""
    repo = f"{registry.host}/akltest-{uuid.uuid4().hex[:8]}"
    ref = f"{repo}:1.0"
    await docker.tag_image(BUSYBOX_IMAGE, repo=repo, tag="1.0")
    await docker.push_image(ref, auth=registry.auth())
    await docker.remove_image(ref)
    try:
        yield ref
    finally:
        await docker.remove_image(ref, force=True)


def _pod(image: str, *, policy: str, secret: str | None = None) -> str:
    pull: dict[str, Any] = {"imagePullSecrets": [{"name": secret}]} if secret else {}
    app = builders.container("app", image, imagePullPolicy=policy, command=["true"])
    return yaml.safe_dump(
        builders.pod_doc("puller", containers=[app], restartPolicy="Never", **pull)
    )


def _waiting(driver: Driver) -> list[tuple[str, str]]:
    found = []
    for status in driver.history:
        waiting = container_status(status, "app").state.waiting
        if waiting is not None:
            found.append((waiting.reason, waiting.message or ""))
    return found


async def test_a_pull_secret_authorises_the_pull_from_a_private_registry(
    docker: DockerClient, node_name: str, registry: Registry, pushed: str
) -> None:
    pod = pod_from(_pod(pushed, policy="IfNotPresent", secret="regcred"), node=node_name)
    secret = (
        "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": registry.dockerconfigjson().encode()},
    )
    events = Recorder()
    async with manager(docker, node_name, events) as rm:
        driver = Driver(rm, pod)
        result = await rm.sync_pod(pod, pull_secrets=[secret])
        assert result.ok, result.errors
        status = await driver.until(lambda s: s.phase == "Succeeded")
        assert container_status(status, "app").imageID.startswith("docker-pullable://")
        reasons = events.reasons()
        assert reasons.index("Pulling") < reasons.index("Pulled")
        assert any(
            m.startswith(f'Successfully pulled image "{pushed}"')
            for _, r, m, _ in events.events
            if r == "Pulled"
        )


async def test_without_credentials_the_pull_fails_then_backs_off(
    docker: DockerClient, node_name: str, pushed: str
) -> None:
    pod = pod_from(_pod(pushed, policy="IfNotPresent"), node=node_name)
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        first = await driver.sync()
        assert [(e.target, str(e.error)) for e in first.errors] == [("app", "ErrImagePull")]
        assert (
            "no basic auth credentials" in first.errors[0].message
            or "unauthorized" in first.errors[0].message
        )
        second = await driver.sync()
        (error,) = second.errors
        assert str(error.error) == "ImagePullBackOff"
        assert error.message == f'Back-off pulling image "{pushed}"'
        status = await driver.refresh()
        waiting = container_status(status, "app").state.waiting
        assert waiting.reason == "ImagePullBackOff"


async def test_a_wrong_password_in_the_pull_secret_fails_the_pull(
    docker: DockerClient, node_name: str, registry: Registry, pushed: str
) -> None:
    pod = pod_from(_pod(pushed, policy="Always", secret="regcred"), node=node_name)
    bad = (
        "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": registry.dockerconfigjson(password="nope").encode()},
    )
    async with manager(docker, node_name) as rm:
        result = await rm.sync_pod(pod, pull_secrets=[bad])
        assert [str(e.error) for e in result.errors] == ["ErrImagePull"]


async def test_never_with_an_absent_image_waits_with_err_image_never_pull(
    docker: DockerClient, node_name: str, registry: Registry
) -> None:
    image = f"{registry.host}/akltest-absent:1.0"
    pod = pod_from(_pod(image, policy="Never"), node=node_name)
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        result = await driver.sync()
        (error,) = result.errors
        assert str(error.error) == "ErrImageNeverPull"
        assert (
            error.message == f'Container image "{image}" is not present with pull policy of Never'
        )
        status = await driver.refresh()
        assert container_status(status, "app").state.waiting.reason == "ErrImageNeverPull"


async def test_if_not_present_uses_a_present_image_without_pulling(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(_pod(BUSYBOX_IMAGE, policy="IfNotPresent"), node=node_name)
    events = Recorder()
    async with manager(docker, node_name, events) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: s.phase == "Succeeded")
        assert "Pulling" not in events.reasons()
        assert (
            "Normal",
            "Pulled",
            f'Container image "{BUSYBOX_IMAGE}" already present on machine',
            "app",
        ) in events.events


async def test_an_invalid_image_name_is_reported_as_invalid_image_name(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(_pod("Not//Valid:Image", policy="IfNotPresent"), node=node_name)
    async with manager(docker, node_name) as rm:
        result = await rm.sync_pod(pod)
        assert [str(e.error) for e in result.errors] == ["InvalidImageName"]


async def test_pods_pulling_the_same_image_share_one_pull(
    docker: DockerClient, node_name: str, registry: Registry, pushed: str
) -> None:
    import anyio

    secret = (
        "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": registry.dockerconfigjson().encode()},
    )
    pods = [
        pod_from(
            _pod(pushed, policy="IfNotPresent", secret="regcred").replace("puller", f"puller{i}"),
            node=node_name,
        )
        for i in range(3)
    ]
    async with manager(docker, node_name) as rm:
        calls: list[str] = []
        original = rm.docker.pull_image

        async def counting(ref: str, **kwargs: object) -> None:
            calls.append(ref)
            await original(ref, **kwargs)  # type: ignore[arg-type]

        rm.docker.pull_image = counting  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            for pod in pods:
                tg.start_soon(functools.partial(rm.sync_pod, pod, pull_secrets=[secret]))
        assert calls == [pushed]
