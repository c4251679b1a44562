"""The pod worker behind ``asynckubelet run``: phases, reasons and restart counts as a
cluster would show them, for a pod with init containers, a sidecar and a crashing app."""

from __future__ import annotations

import anyio
import pytest
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.docker import DockerClient, LogLine
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.printpod import kubectl_status
from integration.runtime_helpers import container_status, manager, pod_from

pytestmark = pytest.mark.anyio


async def test_init_sidecar_and_crashing_container_show_kubectl_statuses_and_restarts(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: mixed}
        spec:
          terminationGracePeriodSeconds: 2
          initContainers:
            - {name: setup, image: BUSYBOX, command: ["sh", "-c", "sleep 0.5"]}
            - name: sidecar
              image: BUSYBOX
              restartPolicy: Always
              command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
          containers:
            - name: steady
              image: BUSYBOX
              command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
            - {name: crasher, image: BUSYBOX, command: ["sh", "-c", "echo crashing; exit 3"]}
        """,
        node=node_name,
    )
    shown: list[str] = []
    statuses: list[PodStatus] = []
    logs: list[tuple[str, str]] = []
    stop = anyio.Event()

    def on_status(p: Pod, status: PodStatus) -> None:
        statuses.append(status)
        text = kubectl_status(p, status)
        if not shown or shown[-1] != text:
            shown.append(text)
        crasher = container_status(status, "crasher")
        if crasher.restartCount >= 1 and text == "CrashLoopBackOff":
            stop.set()

    def on_log(p: Pod, container: str, line: LogLine) -> None:
        logs.append((container, line.text))

    async with manager(docker, node_name) as rm:
        with anyio.fail_after(90):
            (outcome,) = await run_pods(rm, [pod], stop=stop, on_status=on_status, on_log=on_log)
        assert outcome.stopped
        assert shown[0] == "Init:0/2"
        assert "CrashLoopBackOff" in shown
        assert shown.index("Init:0/2") < shown.index("CrashLoopBackOff")
        last = statuses[-1]
        assert last.phase == "Running"
        crasher = container_status(last, "crasher")
        assert crasher.state.waiting.reason == "CrashLoopBackOff"
        assert crasher.lastState.terminated.exitCode == 3
        assert crasher.lastState.terminated.reason == "Error"
        assert crasher.restartCount >= 1
        assert container_status(last, "steady").restartCount == 0
        assert container_status(last, "steady").ready
        assert container_status(last, "sidecar").started
        assert container_status(last, "setup").state.terminated.reason == "Completed"
        conditions = {c.type: c.status for c in last.conditions or []}
        assert conditions["Initialized"] == "True"
        assert conditions["ContainersReady"] == "False"
        assert ("crasher", "crashing") in logs
        assert await rm.docker.list_containers(labels={"io.asynckubelet.node": node_name}) == []
