"""Container logs are rotated as the kubelet's ``containerLogMaxSize`` and
``containerLogMaxFiles`` say, through the engine's log driver: the limits are read as the
kubelet reads them (a quantity, at least two files), every container of a pod (the
sandbox too) is created with them in the engine's default driver when it rotates files,
other drivers are left alone with one line saying so, no container is made while the
engine cannot say its driver, and containers made before the limits are not restarted for
them (FakeDocker)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from daemon_helpers import IMAGES

from asynckubelet import errors
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.logrotation import LogRotation, check_max_files, parse_max_size
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - {name: a, image: busybox:1.35}
"""


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("10Mi", 10 * 1024 * 1024),
        ("1Ki", 1024),
        ("1.5Ki", 1536),
        ("1G", 10**9),
        ("2048", 2048),
        ("1e3", 1000),
        ("-1", -1),
    ],
)
def test_the_max_size_is_a_kubernetes_quantity_of_bytes(text: str, size: int) -> None:
    assert parse_max_size(text) == size


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ten", "not a quantity"),
        ("10MB", "not a quantity"),
        ("", "not a quantity"),
        ("100m", "must be a whole number of bytes"),
        ("0", "must be more than 0 bytes"),
        ("0Ki", "must be more than 0 bytes"),
        ("10Ei", "must be less than 8Ei"),
    ],
)
def test_a_bad_max_size_is_refused_naming_the_flag_and_the_value(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^--container-log-max-size '{text}': {why}"):
        parse_max_size(text)


@pytest.mark.parametrize("files", [1, 0, -3])
def test_fewer_than_two_files_are_refused_as_the_kubelet_refuses_them(files: int) -> None:
    with pytest.raises(ValueError, match=f"^--container-log-max-files {files}: must be greater"):
        check_max_files(files)
    assert check_max_files(2) == 2


def test_the_runtime_configuration_names_the_field_that_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"^container_log_max_size 'lots': not a quantity"):
        RuntimeConfig(container_log_max_size="lots")
    with pytest.raises(ValueError, match=r"^container_log_max_files 1: must be greater than 1"):
        RuntimeConfig(container_log_max_files=1)


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        ("json-file", {"Type": "json-file", "Config": {"max-size": "1024", "max-file": "2"}}),
        ("local", {"Type": "local", "Config": {"max-size": "1024", "max-file": "2"}}),
        ("journald", None),
        ("syslog", None),
        ("fluentd", None),
        ("none", None),
        ("", None),
    ],
)
def test_the_log_config_is_the_limits_in_a_driver_that_rotates_files(
    driver: str, expected: dict[str, Any] | None
) -> None:
    assert LogRotation.parse("1Ki", 2).log_config(driver) == expected


def test_no_rotation_asked_leaves_every_driver_alone() -> None:
    assert LogRotation.parse("-1", 5).log_config("json-file") is None


def _log_configs(docker: FakeDocker) -> list[Any]:
    return [c.inspect()["HostConfig"].get("LogConfig") for c in docker.containers.values()]


async def _sync(docker: FakeDocker, config: RuntimeConfig, *names: str) -> None:
    async with RuntimeManager(config, docker=docker) as rm:
        for name in names:
            pod = load_manifests_text(POD.replace("NAME", name), node_name="n1").pods[0]
            uid = str(pod.metadata.uid if pod.metadata else "")
            status = await rm.get_pod_status(uid=uid, name=name, namespace="default")
            await rm.sync_pod(pod, status)


@pytest.fixture
def logged() -> Iterator[list[str]]:
    from loguru import logger as loguru_logger

    lines: list[str] = []
    loguru_logger.enable("asynckubelet")
    sink = loguru_logger.add(
        lambda m: lines.append(str(m).strip()), level="INFO", format="{message}"
    )
    try:
        yield lines
    finally:
        loguru_logger.remove(sink)


async def test_the_sandbox_and_the_containers_get_the_limits_by_default() -> None:
    docker = FakeDocker(images=IMAGES)
    await _sync(docker, RuntimeConfig(node_name="n1"), "p1")
    default = {"Type": "json-file", "Config": {"max-size": "10485760", "max-file": "5"}}
    assert _log_configs(docker) == [default, default]
    assert docker.count("info") == 1


async def test_an_engine_whose_driver_keeps_no_files_is_left_alone_and_said_so_once(
    logged: list[str],
) -> None:
    docker = FakeDocker(images=IMAGES)
    docker.info_data["LoggingDriver"] = "syslog"
    await _sync(docker, RuntimeConfig(node_name="n1"), "p1", "p2")
    assert _log_configs(docker) == [None] * 4
    said = [line for line in logged if "not rotated" in line]
    assert said == [
        "the engine's log driver is syslog: container logs are not rotated by this node"
        " (the driver keeps them)"
    ]


async def test_containers_made_without_limits_are_not_restarted_by_a_node_with_them() -> None:
    docker = FakeDocker(images=IMAGES)
    await _sync(docker, RuntimeConfig(node_name="n1", container_log_max_size="-1"), "p1")
    before = {
        cid: c.inspect()["HostConfig"].get("LogConfig") for cid, c in docker.containers.items()
    }
    docker.calls.clear()
    await _sync(docker, RuntimeConfig(node_name="n1", container_log_max_size="1Ki"), "p1")
    assert set(before.values()) == {None}
    assert docker.count("create_container") == 0
    assert docker.count("stop_container") == 0
    assert {cid: c.status for cid, c in docker.containers.items()} == dict.fromkeys(
        before, "running"
    )


async def test_no_container_is_made_without_the_limits_while_the_driver_is_unknown() -> None:
    docker = FakeDocker(images=IMAGES)
    docker.fail("info", errors.RuntimeUnavailable("engine gone"))
    pod = load_manifests_text(POD.replace("NAME", "p1"), node_name="n1").pods[0]
    uid = str(pod.metadata.uid if pod.metadata else "")
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        failed = await rm.sync_pod(pod)
        made = dict(docker.containers)
        status = await rm.get_pod_status(uid=uid, name="p1", namespace="default")
        await rm.sync_pod(pod, status)
    default = {"Type": "json-file", "Config": {"max-size": "10485760", "max-file": "5"}}
    assert [e.message for e in failed.errors] == ["Failed to create pod sandbox: engine gone"]
    assert made == {}
    assert _log_configs(docker) == [default, default]
