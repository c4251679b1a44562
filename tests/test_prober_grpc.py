"""gRPC probes against a health server on loopback: the kubelet's verdicts and messages."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from asynckubelet.runtime.hooks import HEALTH_CHECK, grpc_probe
from asynckubelet.runtime.probes import ProbeResult

pytest.importorskip("grpc")
import grpc  # type: ignore[import-untyped]

STATUS_OF = {b"": 1, b"\x0a\x04sick": 2, b"\x0a\x07unknown": 3}


class _Health(grpc.GenericRpcHandler):  # type: ignore[misc]
    def service(self, details: Any) -> Any:
        if details.method != HEALTH_CHECK:
            return None

        def check(request: bytes, context: Any) -> bytes:
            return b"\x08" + bytes([STATUS_OF.get(request, 0)])

        return grpc.unary_unary_rpc_method_handler(check)


@pytest.fixture(scope="module")
def health_port() -> Iterator[int]:
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((_Health(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


@pytest.fixture(scope="module")
def bare_port() -> Iterator[int]:
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("service", "result", "output"),
    [
        ("", ProbeResult.SUCCESS, "service healthy"),
        ("sick", ProbeResult.FAILURE, 'service unhealthy (responded with "NOT_SERVING")'),
        ("unknown", ProbeResult.FAILURE, 'service unhealthy (responded with "SERVICE_UNKNOWN")'),
    ],
)
async def test_grpc_probes_succeed_only_when_the_service_is_serving(
    health_port: int, service: str, result: ProbeResult, output: str
) -> None:
    outcome = await grpc_probe("127.0.0.1", health_port, service=service, timeout=2, netns=None)
    assert (outcome.result, outcome.output) == (result, output)


@pytest.mark.anyio
async def test_a_server_without_the_health_service_fails_as_not_implementing_it(
    bare_port: int,
) -> None:
    outcome = await grpc_probe("127.0.0.1", bare_port, service="", timeout=2, netns=None)
    assert outcome.result is ProbeResult.FAILURE
    assert outcome.output.startswith(
        "this server does not implement the grpc health protocol (grpc.health.v1.Health)"
    )


@pytest.mark.anyio
async def test_a_grpc_probe_to_a_closed_port_times_out_connecting() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outcome = await grpc_probe("127.0.0.1", port, service="", timeout=1, netns=None)
    assert outcome.result is ProbeResult.FAILURE
    assert outcome.output == (
        f'timeout: failed to connect service "127.0.0.1:{port}" within 1s: '
        "context deadline exceeded"
    )
