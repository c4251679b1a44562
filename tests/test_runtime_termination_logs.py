"""A failed container's termination message taken from its logs
(``FallbackToLogsOnError``) is, as the kubelet's circular buffer makes it, the last 2048
bytes of its last 80 lines, however long those lines are."""

from __future__ import annotations

import pytest

from asynckubelet.docker import LogLine
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


async def test_the_message_from_the_logs_is_their_last_2048_bytes() -> None:
    docker = FakeDocker()
    docker.add_container(
        id="c1",
        state="exited",
        exit_code=1,
        labels={
            naming.LABEL_NODE: "n1",
            naming.LABEL_POD_UID: "u1",
            naming.LABEL_TYPE: naming.TYPE_CONTAINER,
            naming.LABEL_CONTAINER_NAME: "app",
            naming.LABEL_TERMINATION_MESSAGE_POLICY: "FallbackToLogsOnError",
        },
    )
    docker.log_lines["c1"] = [
        LogLine("stdout", "a" * 3000),
        LogLine("stdout", "é" * 8000, newline=False),
        LogLine("stdout", "é" * 2000),
        LogLine("stderr", "fin", newline=False),
    ]
    rm = RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker)
    status = await rm.get_pod_status(uid="u1", name="p", namespace="default")
    assert status.containers[0].message == "é" * 1022 + "\nfin"
