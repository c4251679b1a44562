"""Termination messages on real Docker: the file, a custom path, and the logs' fallback."""

from __future__ import annotations

from pathlib import Path

import builders
import pytest

from asynckubelet.docker import DockerClient
from integration.spec_helpers import run_manifest

pytestmark = pytest.mark.anyio


def _pod(container_extra: str) -> str:
    return builders.pod_yaml("term", builders.APP_YAML + container_extra, restartPolicy="Never")


async def _terminated(docker: DockerClient, node: str, root: Path, text: str) -> tuple[int, str]:
    run = await run_manifest(docker, text, node=node, root=root)
    status = run.outcome.status
    assert status is not None
    assert status.containerStatuses is not None
    state = status.containerStatuses[0].state
    assert state is not None
    assert state.terminated is not None
    return state.terminated.exitCode, state.terminated.message or ""


async def test_the_termination_log_file_becomes_the_terminated_message(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod('    command: [sh, -c, "echo -n goodbye > /dev/termination-log; exit 3"]')
    assert await _terminated(docker, node_name, tmp_path, text) == (3, "goodbye")


async def test_a_custom_termination_message_path_is_writable_by_a_non_root_user(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        """
    command: [sh, -c, "echo -n done > /tmp/why"]
    terminationMessagePath: /tmp/why
    securityContext: {runAsUser: 1000}
"""
    )
    assert await _terminated(docker, node_name, tmp_path, text) == (0, "done")


async def test_fallback_to_logs_on_error_takes_the_tail_of_the_output(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        """
    command: [sh, -c, "for i in $(seq 1 100); do echo line $i; done; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
"""
    )
    code, message = await _terminated(docker, node_name, tmp_path, text)
    assert code == 1
    lines = message.splitlines()
    assert len(lines) == 80
    assert (lines[0], lines[-1]) == ("line 21", "line 100")


async def test_fallback_to_logs_keeps_output_that_ends_without_a_newline_as_written(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        """
    command: [sh, -c, "echo first; echo -n DONE; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
"""
    )
    assert await _terminated(docker, node_name, tmp_path, text) == (1, "first\nDONE")


async def test_fallback_to_logs_is_not_used_when_the_container_succeeds(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        """
    command: [sh, -c, "echo fine"]
    terminationMessagePolicy: FallbackToLogsOnError
"""
    )
    assert await _terminated(docker, node_name, tmp_path, text) == (0, "")
