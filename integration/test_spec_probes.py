"""Probes on real Docker: restarts, readiness, startup gating, events with the kubelet's text.

The pods use the loopback-only network (no pod IP), so ``httpGet`` and ``tcpSocket``
probes reach the container through the sandbox's network namespace, with nothing but
busybox's ``httpd`` in the image.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import PodStatus

from asynckubelet.docker import DockerClient
from asynckubelet.runtime.hooks import HEALTH_CHECK, grpc_probe
from asynckubelet.runtime.probes import ProbeResult
from integration.spec_helpers import run_manifest

pytestmark = pytest.mark.anyio


def _pod(name: str, container: str) -> str:
    return builders.pod_yaml(name, "  containers:\n" + container, terminationGracePeriodSeconds=2)


def _cs(status: PodStatus) -> Any:
    return status.containerStatuses[0] if status.containerStatuses else None


def _condition(status: PodStatus, kind: str) -> str:
    return next((c.status for c in status.conditions or [] if c.type == kind), "")


HTTPD = """
  - name: web
    image: BUSYBOX
    command: [sh, -c, "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
"""


async def test_a_failing_liveness_probe_restarts_the_container_with_the_kubelets_events(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "live",
        """
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 3600"]
    livenessProbe:
      exec: {command: [sh, -c, "echo sick; exit 1"]}
      periodSeconds: 1
      failureThreshold: 2
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        until=lambda s: _cs(s) is not None and _cs(s).restartCount >= 1,
    )
    assert "Liveness probe failed: sick\n" in run.messages("Unhealthy")
    assert "Container app failed liveness probe, will be restarted" in run.messages("Killing")
    assert _cs(run.statuses[-1]).restartCount == 1


async def test_a_passing_http_readiness_probe_makes_the_container_and_pod_ready(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "ready",
        HTTPD
        + """
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker, text, node=node_name, root=tmp_path, until=lambda s: bool(_cs(s) and _cs(s).ready)
    )
    final = run.statuses[-1]
    assert _cs(final).ready is True
    assert _condition(final, "ContainersReady") == "True"
    assert _condition(final, "Ready") == "True"
    not_yet = [s for s in run.statuses if _cs(s) is not None and _cs(s).state.running]
    assert _cs(not_yet[0]).ready is False


async def test_a_failing_http_readiness_probe_keeps_the_pod_not_ready_with_the_status_code(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "notready",
        HTTPD
        + """
    readinessProbe:
      httpGet: {path: /missing, port: 8080}
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        until_event="Readiness probe failed: HTTP probe failed",
    )
    assert "Readiness probe failed: HTTP probe failed with statuscode: 404" in run.messages(
        "Unhealthy"
    )
    final = run.statuses[-1]
    assert _cs(final).ready is False
    assert _condition(final, "Ready") == "False"
    assert _cs(final).restartCount == 0


async def test_a_tcp_readiness_probe_on_a_closed_port_reports_connection_refused(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "tcp",
        HTTPD
        + """
    readinessProbe:
      tcpSocket: {port: 9999}
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker, text, node=node_name, root=tmp_path, until_event="Readiness probe failed"
    )
    assert (
        "Readiness probe failed: dial tcp 127.0.0.1:9999: connect: connection refused"
        in run.messages("Unhealthy")
    )


async def test_a_tcp_readiness_probe_on_an_open_port_makes_the_container_ready(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "tcpok",
        HTTPD
        + """
    readinessProbe:
      tcpSocket: {port: http}
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker, text, node=node_name, root=tmp_path, until=lambda s: bool(_cs(s) and _cs(s).ready)
    )
    assert _cs(run.statuses[-1]).ready is True
    assert run.messages("Unhealthy") == [] or all(
        "connection refused" in m for m in run.messages("Unhealthy")
    )


async def test_liveness_waits_for_the_startup_probe_which_gates_started(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "startup",
        """
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 2; touch /tmp/up; sleep 3600"]
    startupProbe:
      exec: {command: [test, -f, /tmp/up]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: [sh, -c, "echo dead; exit 1"]}
      periodSeconds: 1
      failureThreshold: 100
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        until=lambda s: bool(_cs(s) and _cs(s).started),
        stop_after=30,
    )
    running = [s for s in run.statuses if _cs(s) is not None and _cs(s).state.running]
    assert _cs(running[0]).started is False
    assert _cs(running[-1]).started is True
    messages = run.messages("Unhealthy")
    assert "Startup probe failed: " in messages
    assert "Liveness probe failed: dead\n" not in messages


async def test_an_exec_probe_that_outlives_its_timeout_fails_as_timed_out(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "slow",
        """
  - name: app
    image: BUSYBOX
    command: [sh, -c, "sleep 3600"]
    readinessProbe:
      exec: {command: [sleep, "5"]}
      timeoutSeconds: 1
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        until_event="Readiness probe failed",
    )
    assert 'Readiness probe failed: command "sleep 5" timed out' in run.messages("Unhealthy")


@pytest.fixture
def grpc_health_port() -> Iterator[int]:
    """A gRPC health server on the node's loopback, answering SERVING."""
    grpc = pytest.importorskip("grpc")

    class Health(grpc.GenericRpcHandler):  # type: ignore[misc,name-defined]
        def service(self, details: Any) -> Any:
            if details.method != HEALTH_CHECK:
                return None
            return grpc.unary_unary_rpc_method_handler(lambda request, context: b"\x08\x01")

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((Health(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield int(port)
    server.stop(None)


async def test_a_grpc_readiness_probe_of_a_host_network_pod_makes_it_ready(
    docker: DockerClient, node_name: str, tmp_path: Path, grpc_health_port: int
) -> None:
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: grpcready}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: BUSYBOX
    command: [sleep, "3600"]
    readinessProbe:
      grpc: {{port: {grpc_health_port}}}
      periodSeconds: 1
"""
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path,
        pod_security="privileged",
        until=lambda s: bool(_cs(s) and _cs(s).ready),
    )
    assert _cs(run.statuses[-1]).ready is True


async def test_a_grpc_probe_inside_the_pod_namespace_reports_the_refused_connection(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    pytest.importorskip("grpc")
    text = _pod(
        "grpcns",
        """
  - name: app
    image: BUSYBOX
    command: [sleep, "3600"]
    readinessProbe:
      grpc: {port: 9999}
      periodSeconds: 1
""",
    )
    run = await run_manifest(
        docker, text, node=node_name, root=tmp_path, until_event="Readiness probe failed"
    )
    assert (
        'Readiness probe failed: error: failed to connect service at "127.0.0.1:9999": '
        "dial tcp 127.0.0.1:9999: connect: connection refused"
    ) in run.messages("Unhealthy")


async def test_a_grpc_probe_through_a_namespace_relay_reaches_the_server(
    grpc_health_port: int,
) -> None:
    outcome = await grpc_probe(
        "127.0.0.1", grpc_health_port, service="", timeout=2, netns="/proc/self/ns/net"
    )
    assert (outcome.result, outcome.output) == (ProbeResult.SUCCESS, "service healthy")
