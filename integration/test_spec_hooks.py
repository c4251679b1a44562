"""Lifecycle hooks on real Docker: postStart, its failure, and preStop before the stop."""

from __future__ import annotations

from pathlib import Path

import builders
import pytest

from asynckubelet.docker import DockerClient
from integration.spec_helpers import run_manifest

pytestmark = pytest.mark.anyio


def _pod(name: str, body: str, policy: str = "Never") -> str:
    return builders.pod_yaml(name, body, restartPolicy=policy, terminationGracePeriodSeconds=5)


async def test_post_start_runs_in_the_container_right_after_it_starts(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "poststart",
        """
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "while [ ! -f /tmp/hook ]; do sleep 0.1; done; cat /tmp/hook"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, "echo hooked > /tmp/hook"]}
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.outcome.phase == "Succeeded"
    assert run.lines == ["app: hooked"]
    assert "FailedPostStartHook" not in run.reasons()


async def test_a_failing_post_start_exec_hook_kills_the_container(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "badhook",
        """
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 3600"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, "exit 3"]}
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert ("Warning", "FailedPostStartHook", "PostStartHook failed") in run.events
    assert ("Normal", "Killing", "FailedPostStartHook") in run.events
    assert run.outcome.phase == "Failed"
    statuses = run.outcome.status.containerStatuses if run.outcome.status else None
    assert statuses is not None
    assert statuses[0].state is not None
    assert statuses[0].state.terminated is not None


async def test_a_post_start_http_hook_to_a_closed_port_fails_the_container(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "httphook",
        """
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 3600"]
    lifecycle:
      postStart:
        httpGet: {path: /start, port: 9999}
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert ("Warning", "FailedPostStartHook", "PostStartHook failed") in run.events
    assert run.outcome.phase == "Failed"


async def test_pre_stop_runs_before_the_container_is_stopped(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    text = _pod(
        "prestop",
        f"""
  volumes: [{{name: h, hostPath: {{path: {host}, type: DirectoryOrCreate}}}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "echo up; sleep 3600"]
    volumeMounts: [{{name: h, mountPath: /h}}]
    lifecycle:
      preStop:
        exec: {{command: [sh, -c, "echo bye > /h/stopped"]}}
""",
        policy="Always",
    )
    await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path / "pods",
        pod_security="privileged",
        until=lambda s: bool(s.containerStatuses and s.containerStatuses[0].ready),
    )
    assert (host / "stopped").read_text() == "bye\n"


async def test_a_failing_pre_stop_hook_is_reported_and_the_container_still_stops(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "badstop",
        """
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 3600"]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "exit 1"]}
""",
        policy="Always",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        until=lambda s: bool(s.containerStatuses and s.containerStatuses[0].ready),
    )
    assert ("Warning", "FailedPreStopHook", "PreStopHook failed") in run.events
    assert run.outcome.stopped
