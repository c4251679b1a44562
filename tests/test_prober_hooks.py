"""Lifecycle hook messages, as the kubelet words them, without Docker."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.docker import ExecResult
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.hooks import HookTarget, run_hook
from asynckubelet.testing import FakeDocker

UID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def engine(answer: ExecResult | BaseException | None = None) -> FakeDocker:
    """Container ``cid`` running, answering its one exec with ``answer``."""
    docker = FakeDocker()
    docker.add_container(id="cid", state="running")
    docker.exec_results = [answer] if answer is not None else []
    return docker


def _pod(hook: str) -> Pod:
    return load_manifests_text(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: web, uid: {UID}}}
spec:
  containers:
  - name: app
    image: x
    lifecycle: {{postStart: {hook}}}
"""
    ).pods[0]


async def _run(hook: str, docker: FakeDocker, timeout: float | None = None) -> str | None:
    pod = _pod(hook)
    assert pod.spec is not None
    container = pod.spec.containers[0]
    assert container.lifecycle is not None
    return await run_hook(
        container.lifecycle.postStart,
        pod,
        container,
        HookTarget(container_id="cid", host="127.0.0.1", netns=None),
        docker=docker,
        timeout=timeout,
    )


EXEC = "{exec: {command: [sh, -c, check]}}"


@pytest.mark.anyio
async def test_a_successful_exec_hook_has_no_message() -> None:
    assert await _run(EXEC, engine(ExecResult(0, b"ok", b""))) is None


@pytest.mark.anyio
async def test_a_failed_exec_hook_message_names_the_command_container_pod_and_output() -> None:
    message = await _run(EXEC, engine(ExecResult(3, b"out", b"err")))
    assert message == (
        f'Exec lifecycle hook ([sh -c check]) for Container "app" in Pod "web_default({UID})" '
        "failed - error: command 'sh -c check' exited with 3: err, message: \"outerr\""
    )


@pytest.mark.anyio
async def test_an_exec_hook_past_its_timeout_says_timed_out() -> None:
    message = await _run(EXEC, engine(TimeoutError()), timeout=1)
    assert message is not None
    assert 'error: command "sh -c check" timed out' in message


@pytest.mark.anyio
async def test_an_http_hook_to_a_closed_port_fails_with_the_dial_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = await _run(f"{{httpGet: {{path: /hook, port: {port}}}}}", engine())
    assert message == (
        f'HTTP lifecycle hook (/hook) for Container "app" in Pod "web_default({UID})" '
        "failed - "
        f'error: Get "http://127.0.0.1:{port}/hook": dial tcp 127.0.0.1:{port}: connect: '
        "connection refused"
    )


@pytest.mark.anyio
async def test_a_sleep_hook_succeeds() -> None:
    assert await _run("{sleep: {seconds: 0}}", engine()) is None
