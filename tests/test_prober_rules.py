"""Prober rules without Docker: HTTP/TCP verdicts on loopback, thresholds, initial results."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.docker import ExecResult
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.prober import Prober
from asynckubelet.runtime.hooks import http_probe, tcp_probe
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus
from asynckubelet.testing import FakeDocker

seen_headers: list[dict[str, str]] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        seen_headers.append(dict(self.headers))
        code = int(self.path.strip("/") or 200)
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"body")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("code", "result"),
    [
        (200, ProbeResult.SUCCESS),
        (204, ProbeResult.SUCCESS),
        (302, ProbeResult.SUCCESS),
        (399, ProbeResult.SUCCESS),
        (400, ProbeResult.FAILURE),
        (404, ProbeResult.FAILURE),
        (500, ProbeResult.FAILURE),
    ],
)
def test_http_probes_succeed_on_200_to_399_only(
    server: int, code: int, result: ProbeResult
) -> None:
    outcome = http_probe(
        scheme="HTTP",
        host="127.0.0.1",
        port=server,
        path=f"/{code}",
        headers={},
        timeout=2,
        netns=None,
    )
    assert outcome.result is result


def test_a_failed_http_probe_says_the_status_code(server: int) -> None:
    outcome = http_probe(
        scheme="HTTP",
        host="127.0.0.1",
        port=server,
        path="/503",
        headers={},
        timeout=2,
        netns=None,
    )
    assert outcome.output == "HTTP probe failed with statuscode: 503"


def test_http_probes_send_the_kube_probe_agent_and_the_spec_headers(server: int) -> None:
    seen_headers.clear()
    http_probe(
        scheme="HTTP",
        host="127.0.0.1",
        port=server,
        path="/200",
        headers={"X-Custom": "yes"},
        timeout=2,
        netns=None,
    )
    assert seen_headers[-1]["User-Agent"].startswith("kube-probe/")
    assert seen_headers[-1]["X-Custom"] == "yes"


def test_an_http_probe_to_a_closed_port_fails_with_the_dial_error() -> None:
    port = _closed_port()
    outcome = http_probe(
        scheme="HTTP", host="127.0.0.1", port=port, path="/x", headers={}, timeout=2, netns=None
    )
    assert outcome.result is ProbeResult.FAILURE
    assert outcome.output == (
        f'Get "http://127.0.0.1:{port}/x": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )


def test_tcp_probes_succeed_when_the_port_accepts(server: int) -> None:
    assert tcp_probe("127.0.0.1", server, timeout=2, netns=None).result is ProbeResult.SUCCESS


def test_tcp_probes_fail_with_the_dial_error_when_refused() -> None:
    port = _closed_port()
    outcome = tcp_probe("127.0.0.1", port, timeout=2, netns=None)
    assert outcome.output == f"dial tcp 127.0.0.1:{port}: connect: connection refused"


def engine(codes: Sequence[int]) -> FakeDocker:
    """Container ``cid`` running, answering exec with these exit codes in turn."""
    docker = FakeDocker()
    docker.add_container(id="cid", state="running")
    docker.exec_results = [ExecResult(exit_code=c, stdout=b"out", stderr=b"") for c in codes]
    return docker


def _pod(probes: str) -> Pod:
    return load_manifests_text(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:
  - name: c
    image: x
{probes}
"""
    ).pods[0]


def _runtime() -> PodRuntimeStatus:
    now = datetime.now(UTC)
    c = ContainerStatus(
        id="cid", name="c", state=ContainerState.RUNNING, created_at=now, started_at=now
    )
    return PodRuntimeStatus(uid="u", name="p", namespace="default", containers=(c,))


def _prober(codes: Sequence[int]) -> tuple[Prober, list[str]]:
    messages: list[str] = []

    def events(
        pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None:
        messages.append(f"{reason}: {message}")

    return Prober(docker=engine(codes), events=events), messages


def _start(prober: Prober, pod: Pod) -> None:
    prober._tg = _NoTasks()  # type: ignore[assignment]
    prober.update(pod, _runtime())


class _NoTasks:
    def start_soon(self, *args: Any, **kwargs: Any) -> None:
        pass


EXEC = "exec: {command: [check]}"


@pytest.mark.anyio
async def test_initial_results_are_live_not_ready_and_unknown_startup() -> None:
    pod = _pod(
        f"    livenessProbe: {{{EXEC}}}\n    readinessProbe: {{{EXEC}}}\n"
        f"    startupProbe: {{{EXEC}}}\n"
    )
    prober, _ = _prober([])
    _start(prober, pod)
    assert prober.liveness == {"cid": ProbeResult.SUCCESS}
    assert prober.readiness() == {"c": False}
    assert prober.startup == {"cid": ProbeResult.UNKNOWN}
    assert prober.started() == {"c": False}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("threshold", "codes", "after"),
    [
        (3, [1, 1], ProbeResult.SUCCESS),
        (3, [1, 1, 1], ProbeResult.FAILURE),
        (3, [1, 1, 0, 1, 1], ProbeResult.SUCCESS),
        (1, [1], ProbeResult.FAILURE),
    ],
)
async def test_liveness_fails_only_after_failure_threshold_failures_in_a_row(
    threshold: int, codes: list[int], after: ProbeResult
) -> None:
    pod = _pod(f"    livenessProbe: {{{EXEC}, failureThreshold: {threshold}}}")
    prober, _ = _prober(codes)
    _start(prober, pod)
    worker = prober.workers[("cid", "Liveness")]
    for _ in codes:
        await worker.once()
    assert prober.liveness["cid"] is after


@pytest.mark.anyio
async def test_readiness_needs_success_threshold_successes_in_a_row() -> None:
    pod = _pod(f"    readinessProbe: {{{EXEC}, successThreshold: 2}}")
    prober, _ = _prober([0, 1, 0, 0])
    _start(prober, pod)
    worker = prober.workers[("cid", "Readiness")]
    states = []
    for _ in range(4):
        await worker.once()
        states.append(prober.readiness()["c"])
    assert states == [False, False, False, True]


@pytest.mark.anyio
async def test_liveness_is_not_probed_before_the_startup_probe_succeeds() -> None:
    pod = _pod(f"    livenessProbe: {{{EXEC}, failureThreshold: 1}}\n    startupProbe: {{{EXEC}}}")
    prober, messages = _prober([1, 0])
    _start(prober, pod)
    await prober.workers[("cid", "Liveness")].once()
    assert prober.liveness["cid"] is ProbeResult.SUCCESS
    assert messages == []


@pytest.mark.anyio
async def test_each_failed_probe_records_an_unhealthy_event_with_the_output() -> None:
    pod = _pod(f"    readinessProbe: {{{EXEC}}}")
    prober, messages = _prober([1])
    _start(prober, pod)
    await prober.workers[("cid", "Readiness")].once()
    assert messages == ["Unhealthy: Readiness probe failed: out"]


@pytest.mark.anyio
async def test_a_probe_within_its_initial_delay_does_not_run() -> None:
    pod = _pod(f"    readinessProbe: {{{EXEC}, initialDelaySeconds: 60}}")
    prober, messages = _prober([1])
    _start(prober, pod)
    await prober.workers[("cid", "Readiness")].once()
    assert messages == []
