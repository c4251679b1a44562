"""Today's lifecycle fields on real Docker: sleep hooks, a container's stop signal, and the
``PodReadyToStartContainers`` condition.

Durations are checked only as lower bounds the behaviour guarantees (a hook that sleeps N
seconds delays what follows it by at least N), read from the container's own clock in whole
seconds, so no assertion depends on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import PodStatus

from asynckubelet.docker import DockerClient
from integration.harness import BUSYBOX_IMAGE, TEST_IMAGE_PREFIX, Engine
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl
from integration.run_helpers import node_containers, run_pod, write_manifest
from integration.serve_helpers import Daemon, manifest, wait_running
from integration.spec_helpers import run_manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

pytestmark = pytest.mark.anyio

USR1_IMAGE = f"{TEST_IMAGE_PREFIX}/stopsignal-usr1:1"

CONDITION_ORDER = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
]


@pytest.fixture(scope="module")
def usr1_image(docker_engine: Engine, test_images: dict[str, str]) -> Iterator[str]:
    """The test busybox with ``STOPSIGNAL SIGUSR1``, built from it on the engine."""
    dockerfile = f"FROM {BUSYBOX_IMAGE}\nSTOPSIGNAL SIGUSR1\n"
    env = {**os.environ, "DOCKER_HOST": docker_engine.url, "DOCKER_BUILDKIT": "0"}
    subprocess.run(
        ["docker", "build", "-q", "-t", USR1_IMAGE, "-"],
        input=dockerfile,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    yield USR1_IMAGE
    subprocess.run(["docker", "rmi", "-f", USR1_IMAGE], env=env, check=False, capture_output=True)


def _pod(name: str, host: Path, container: str, image: str = "BUSYBOX", **spec: Any) -> str:
    body = f"""
  volumes: [{{name: h, hostPath: {{path: {host}, type: DirectoryOrCreate}}}}]
  containers:
  - name: app
    image: {image}
    volumeMounts: [{{name: h, mountPath: /h}}]
{container}"""
    return builders.pod_yaml(
        name, body, restartPolicy="Always", terminationGracePeriodSeconds=5, **spec
    )


_TRAPS = (
    "trap 'echo TERM > /h/signal; date +%s > /h/stopped; exit 0' TERM; "
    "trap 'echo INT > /h/signal; date +%s > /h/stopped; exit 0' INT; "
    "trap 'echo USR1 > /h/signal; date +%s > /h/stopped; exit 0' USR1; "
    "echo up; while true; do sleep 0.1; done"
)


class ReadyClock:
    """The first moment a status shows the container ready, by the host's clock."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, status: PodStatus) -> bool:
        ready = bool(status.containerStatuses and status.containerStatuses[0].ready)
        if ready and self.at is None:
            self.at = time.time()
        return ready


async def _run_until_ready(
    docker: DockerClient, node_name: str, tmp_path: Path, text: str
) -> tuple[ReadyClock, list[PodStatus]]:
    clock = ReadyClock()
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path / "pods",
        pod_security="privileged",
        until=clock,
    )
    assert clock.at is not None
    return clock, run.statuses


async def test_a_pre_stop_sleep_delays_the_stop_signal_by_its_seconds(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    text = _pod(
        "presleep",
        host,
        f"""    command: [sh, -c, "{_TRAPS}"]
    lifecycle:
      preStop:
        sleep: {{seconds: 2}}
""",
    )
    clock, _ = await _run_until_ready(docker, node_name, tmp_path, text)
    assert clock.at is not None
    assert (host / "signal").read_text() == "TERM\n"
    assert int((host / "stopped").read_text()) >= int(clock.at) + 2


async def test_a_zero_second_pre_stop_sleep_stops_the_container_as_usual(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    text = _pod(
        "zerosleep",
        host,
        f"""    command: [sh, -c, "{_TRAPS}"]
    lifecycle:
      preStop:
        sleep: {{seconds: 0}}
""",
    )
    await _run_until_ready(docker, node_name, tmp_path, text)
    assert (host / "signal").read_text() == "TERM\n"


async def test_a_post_start_sleep_holds_the_container_back_from_ready(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    text = _pod(
        "postsleep",
        host,
        """    command: [sh, -c, "date +%s > /h/started; sleep 3600"]
    lifecycle:
      postStart:
        sleep: {seconds: 2}
""",
    )
    clock, statuses = await _run_until_ready(docker, node_name, tmp_path, text)
    assert clock.at is not None
    assert int(clock.at) >= int((host / "started").read_text()) + 2
    first_ready = next(
        i for i, st in enumerate(statuses) if st.containerStatuses and st.containerStatuses[0].ready
    )
    waiting = [c for st in statuses[:first_ready] for c in st.containerStatuses or []]
    assert waiting, "no status came before the ready one"
    assert all(c.state and c.state.waiting and not c.started for c in waiting)


def _stop_signal(statuses: list[PodStatus]) -> str | None:
    running = statuses[-1].containerStatuses or []
    return running[0].stopSignal if running else None


async def test_a_stop_signal_in_the_spec_is_the_signal_the_container_gets(
    docker: DockerClient, node_name: str, tmp_path: Path, usr1_image: str
) -> None:
    host = tmp_path / "host"
    text = _pod(
        "stopint",
        host,
        f"""    command: [sh, -c, "{_TRAPS}"]
    lifecycle:
      stopSignal: SIGINT
""",
        image=usr1_image,
        os={"name": "linux"},
    )
    _, statuses = await _run_until_ready(docker, node_name, tmp_path, text)
    assert (host / "signal").read_text() == "INT\n"
    assert _stop_signal(statuses) == "SIGINT"


async def test_without_a_stop_signal_the_images_stopsignal_is_sent_and_reported(
    docker: DockerClient, node_name: str, tmp_path: Path, usr1_image: str
) -> None:
    host = tmp_path / "host"
    text = _pod("stopusr1", host, f'    command: [sh, -c, "{_TRAPS}"]\n', image=usr1_image)
    _, statuses = await _run_until_ready(docker, node_name, tmp_path, text)
    assert (host / "signal").read_text() == "USR1\n"
    assert _stop_signal(statuses) == "SIGUSR1"


async def test_a_running_pod_is_ready_to_start_containers_first_among_its_conditions(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod("conditions", tmp_path / "host", '    command: [sh, -c, "sleep 3600"]\n')
    _, statuses = await _run_until_ready(docker, node_name, tmp_path, text)
    conditions = statuses[-1].conditions or []
    assert [c.type for c in conditions] == CONDITION_ORDER
    assert {c.type: c.status for c in conditions}["PodReadyToStartContainers"] == "True"
    assert _stop_signal(statuses) == "SIGTERM"


@pytest.mark.parametrize(
    ("spec", "rejected"),
    [
        (
            "hostUsers: false",
            "PodFeatureUnsupported: Pod was rejected: spec.hostUsers: false asks for a user "
            "namespace of the pod's own",
        ),
        (
            "volumes: [{name: tools, image: {reference: BUSYBOX}}]",
            "PodFeatureUnsupported: Pod was rejected: spec.volumes[0].image: image volumes "
            "are not supported by this node",
        ),
        (
            "resources: {limits: {memory: 64Mi}}",
            "PodLevelResourcesNotSupported: Pod was rejected: spec.resources.limits (memory): "
            "pod-level limits are not enforced by this node",
        ),
    ],
    ids=["host-users", "image-volume", "pod-level-limits"],
)
def test_what_the_engine_cannot_do_is_refused_before_anything_starts(
    tmp_path: Path,
    docker_engine: Engine,
    test_images: dict[str, str],
    node_name: str,
    spec: str,
    rejected: str,
) -> None:
    manifest = write_manifest(
        tmp_path,
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: refused}}
        spec:
          {spec}
          containers:
            - {{name: app, image: BUSYBOX, command: [sleep, "3600"]}}
        """,
    )
    proc = run_pod(manifest, "--pod-security", "privileged", node=node_name)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(f"pod/refused: {rejected}")
    assert node_containers(docker_engine, node_name) == []


HOOKED = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  os: {name: linux}
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' INT; while true; do sleep 0.2; done"]
    lifecycle:
      stopSignal: SIGINT
      postStart: {sleep: {seconds: 0}}
      preStop: {sleep: {seconds: 1}}
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("lifecycle")
    yield from api_daemon(tmp, docker_engine)


def test_kubectl_shows_todays_lifecycle_fields_and_conditions(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = f"hooked{uuid.uuid4().hex[:6]}"
    kubectl.ok("apply", "-f", manifest(tmp_path, "pod.yaml", HOOKED.replace("NAME", name)))
    wait_running(kubectl.node, name)
    pod = json.loads(kubectl.ok("get", "pod", name, "-o", "json"))
    lifecycle = pod["spec"]["containers"][0]["lifecycle"]
    assert lifecycle == {
        "stopSignal": "SIGINT",
        "postStart": {"sleep": {"seconds": 0}},
        "preStop": {"sleep": {"seconds": 1}},
    }
    conditions = pod["status"]["conditions"]
    assert [c["type"] for c in conditions] == CONDITION_ORDER
    assert conditions[0]["status"] == "True"
    assert pod["status"]["containerStatuses"][0]["stopSignal"] == "SIGINT"
    described = kubectl.ok("describe", "pod", name).splitlines()
    assert any(line.split() == ["PodReadyToStartContainers", "True"] for line in described)
    assert kubectl.ok("delete", "pod", name).startswith(f'pod "{name}" deleted')


def test_kubectl_apply_of_a_stop_signal_without_the_os_is_invalid(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = f"noos{uuid.uuid4().hex[:6]}"
    text = HOOKED.replace("NAME", name).replace("  os: {name: linux}\n", "")
    done = kubectl("apply", "-f", manifest(tmp_path, "pod.yaml", text))
    assert done.returncode == 1
    assert (
        f'The Pod "{name}" is invalid: spec.containers[0].lifecycle.stopSignal: Forbidden: '
        "may not be set for containers with empty `spec.os.name`"
    ) in done.stderr
