"""The node's three HTTP servers as they are built, each under short limits: the TCP
endpoint, the local API on its unix socket and the kubelet API over TLS let a client
that sends half a request go after the header timeout, and answer a well-behaved client
while their cap is full of stalled ones; the local API refuses a body over its limit with
a ``Status`` naming it; the kubelet API bounds a client that never finishes its TLS
handshake like one that never finishes its headers."""

from __future__ import annotations

import datetime
import functools
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.abc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from daemon_helpers import IMAGES

from asynckubelet import httpbounds
from asynckubelet.api.answers import MAX_REQUEST_BYTES
from asynckubelet.api.localapi import serve_local
from asynckubelet.api.server import serve_http
from asynckubelet.cluster import kubeletapi
from asynckubelet.node import daemon
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

LIMITS = httpbounds.Limits(header_timeout=0.3, max_connections=4)
CAPPED = httpbounds.Limits(header_timeout=60.0, max_connections=4)
"""A full cap whose stalled clients no test waits for."""
WAIT = 10.0
"""How long a test waits for what it expects before it fails (never what it asserts)."""


async def until_closed(stream: anyio.abc.ByteStream) -> bytes:
    """What the server sent before it closed the connection."""
    received = b""
    with anyio.fail_after(WAIT):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                await stream.aclose()
                return received


async def stalled(connect: Any, count: int, sent: bytes) -> list[anyio.abc.ByteStream]:
    streams = []
    for _ in range(count):
        stream = await connect()
        if sent:
            await stream.send(sent)
        streams.append(stream)
    return streams


class FakeNode:
    def list_json(self) -> list[str]:
        return []


# -- the TCP endpoint ------------------------------------------------------------------------


@pytest.fixture
async def endpoint() -> AsyncIterator[int]:
    async with anyio.create_task_group() as tg:
        yield await tg.start(
            functools.partial(
                serve_http,
                FakeNode(),  # type: ignore[arg-type]
                host="127.0.0.1",
                port=0,
                limits=LIMITS,
            )
        )
        tg.cancel_scope.cancel()


async def test_the_tcp_endpoint_lets_a_half_sent_request_go(endpoint: int) -> None:
    stream = await anyio.connect_tcp("127.0.0.1", endpoint)
    await stream.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1")
    assert await until_closed(stream) == b""


async def test_the_tcp_endpoint_answers_healthz_with_its_cap_full_of_stalled_clients() -> None:
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(
                serve_http,
                FakeNode(),  # type: ignore[arg-type]
                host="127.0.0.1",
                port=0,
                limits=CAPPED,
            )
        )
        held = await stalled(lambda: anyio.connect_tcp("127.0.0.1", port), 4, b"GET /hea")
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/healthz") as r,
        ):
            assert (r.status, await r.text()) == (200, "ok")
        assert await until_closed(held[0]) == b""
        for stream in held[1:]:
            await stream.aclose()
        tg.cancel_scope.cancel()


# -- the local API ---------------------------------------------------------------------------


@pytest.fixture
async def local_api(tmp_path: Path) -> AsyncIterator[Path]:
    state = tmp_path / "state"
    state.mkdir()
    path = daemon.claim_socket(state)
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(images=IMAGES),
    )
    async with node, anyio.create_task_group() as tg:
        await tg.start(functools.partial(serve_local, node, path=str(path), limits=LIMITS))
        yield path
        tg.cancel_scope.cancel()


async def test_the_local_api_lets_a_half_sent_request_go(local_api: Path) -> None:
    stream = await anyio.connect_unix(local_api)
    await stream.send(b"POST /apis/local.asynckubelet/v1/apply HTTP/1.1\r\nHo")
    assert await until_closed(stream) == b""


async def test_the_local_api_refuses_a_declared_body_over_its_limit_with_a_status(
    local_api: Path,
) -> None:
    stream = await anyio.connect_unix(local_api)
    await stream.send(
        b"POST /apis/local.asynckubelet/v1/apply HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n{" % (MAX_REQUEST_BYTES + 1)
    )
    head, _, body = (await until_closed(stream)).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert json.loads(body) == too_large_status()


async def test_the_local_api_refuses_a_streamed_body_over_its_limit_with_a_status(
    local_api: Path,
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"files": [{"source": "big.yaml", "manifest": "'
        for _ in range(MAX_REQUEST_BYTES // 65536 + 1):
            yield b"x" * 65536

    connector = aiohttp.UnixConnector(path=str(local_api))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post("http://localhost/apis/local.asynckubelet/v1/apply", data=chunks()) as r,
    ):
        assert r.status == 413
        assert await r.json() == too_large_status()


def too_large_status() -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"Request entity too large: limit is {MAX_REQUEST_BYTES}",
        "reason": "RequestEntityTooLarge",
        "code": 413,
    }


# -- the kubelet API -------------------------------------------------------------------------


def _name(cn: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _certificate(subject: x509.Name, key: Any, issuer: x509.Name, signer: Any) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=subject == issuer, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[bytes, ssl.SSLContext]:
    """A cluster CA (PEM) and a client context with a certificate it signed."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("cluster-ca")
    ca = _certificate(ca_name, ca_key, ca_name, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(_name("apiserver", "system:masters"), key, ca_name, ca_key)
    (tmp_path / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "client.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    return ca.public_bytes(serialization.Encoding.PEM), context


async def kubelet_api(
    tg: anyio.abc.TaskGroup, tmp_path: Path, ca: bytes, limits: httpbounds.Limits
) -> int:
    port: int = await tg.start(
        functools.partial(
            kubeletapi.serve_kubelet_api,
            FakeNode(),  # type: ignore[arg-type]
            kubeletapi.KubeletServing(
                address="127.0.0.1",
                port=0,
                cert_dir=tmp_path / "pki",
                authorization_mode="AlwaysAllow",
            ),
            node_name="n1",
            cluster_ca=ca,
            limits=limits,
        )
    )
    return port


async def test_the_kubelet_api_lets_a_client_that_never_starts_its_handshake_go(
    tmp_path: Path, cluster: tuple[bytes, ssl.SSLContext]
) -> None:
    ca, _ = cluster
    async with anyio.create_task_group() as tg:
        port = await kubelet_api(tg, tmp_path, ca, LIMITS)
        silent = await anyio.connect_tcp("127.0.0.1", port)
        assert await until_closed(silent) == b""
        half_hello = await anyio.connect_tcp("127.0.0.1", port)
        await half_hello.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        assert await until_closed(half_hello) == b""
        tg.cancel_scope.cancel()


async def test_the_kubelet_api_lets_a_half_sent_request_go_after_the_handshake(
    tmp_path: Path, cluster: tuple[bytes, ssl.SSLContext]
) -> None:
    ca, context = cluster
    async with anyio.create_task_group() as tg:
        port = await kubelet_api(tg, tmp_path, ca, LIMITS)
        stream = await anyio.connect_tcp(
            "127.0.0.1", port, tls=True, ssl_context=context, tls_standard_compatible=False
        )
        await stream.send(b"GET /healthz HTTP/1.1\r\nHost: n1")
        assert await until_closed(stream) == b""
        tg.cancel_scope.cancel()


async def test_the_kubelet_api_answers_with_its_cap_full_of_unfinished_handshakes(
    tmp_path: Path, cluster: tuple[bytes, ssl.SSLContext]
) -> None:
    ca, context = cluster
    async with anyio.create_task_group() as tg:
        port = await kubelet_api(tg, tmp_path, ca, CAPPED)
        held = await stalled(lambda: anyio.connect_tcp("127.0.0.1", port), 4, b"\x16\x03")
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"https://127.0.0.1:{port}/healthz", ssl=context) as r,
        ):
            assert (r.status, await r.text()) == (200, "ok")
        assert await until_closed(held[0]) == b""
        for stream in held[1:]:
            await stream.aclose()
        tg.cancel_scope.cancel()
