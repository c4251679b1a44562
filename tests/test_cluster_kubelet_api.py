"""The kubelet API's HTTPS front: its own serving pair (made once, key 0600), clients
verified against the cluster CA (none: 401; another CA's: no handshake) or by a bearer
token the API server vouches for, the kubelet's request attributes, Webhook authorization
(the default) with cached answers, and every route's authorization case."""

from __future__ import annotations

import datetime
import functools
import json
import ssl
import stat
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from asynckubelet import errors
from asynckubelet.cluster import kubeletapi, kubeletauth
from asynckubelet.cluster.kubeletapi import KubeletServing
from asynckubelet.cluster.kubeletauth import Attributes, User

pytestmark = pytest.mark.anyio


def _name(cn: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(directory: Path, name: str) -> tuple[Any, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _client(directory: Path, ca: tuple[Any, x509.Certificate], cn: str, org: str) -> ssl.SSLContext:
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / f"{cn}.crt", directory / f"{cn}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = _anonymous()
    context.load_cert_chain(cert_file, key_file)
    return context


def _anonymous() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class FakeNode:
    def list_json(self) -> list[str]:
        return []

    def list(self) -> list[Any]:
        return []


def test_the_serving_pair_is_made_once_with_a_private_key(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    cert, key = kubeletauth.self_signed_pair(pki, node_name="n1", addresses=["127.0.0.1"])
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["n1"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    before = cert.read_bytes()
    assert kubeletauth.self_signed_pair(pki, node_name="n1", addresses=["127.0.0.1"]) == (cert, key)
    assert cert.read_bytes() == before
    key.write_text("not a key")
    kubeletauth.self_signed_pair(pki, node_name="n1", addresses=["127.0.0.1"])
    assert cert.read_bytes() != before


def test_a_verified_certificate_names_the_user_and_its_groups() -> None:
    peer = {
        "subject": (
            (("organizationName", "system:masters"),),
            (("commonName", "kube-apiserver-kubelet-client"),),
        )
    }
    assert kubeletauth.peer_user(peer) == User(
        name="kube-apiserver-kubelet-client",
        groups=("system:masters", "system:authenticated"),
    )
    assert kubeletauth.peer_user(None) is None
    assert kubeletauth.peer_user({"subject": ()}) is None


async def test_webhook_answers_are_cached() -> None:
    asked: list[tuple[User, Attributes]] = []

    async def review(user: User, attrs: Attributes) -> tuple[bool, str]:
        asked.append((user, attrs))
        return user.name == "admin", "because"

    authorizer = kubeletauth.WebhookAuthorizer(review)
    attrs = Attributes(verb="get", resource="nodes", subresource="proxy", name="n1")
    admin, other = User("admin"), User("other")
    assert await authorizer(admin, attrs) == (True, "because")
    assert await authorizer(admin, attrs) == (True, "because")
    assert await authorizer(other, attrs) == (False, "because")
    assert len(asked) == 2


@pytest.fixture
def cluster_ca(tmp_path: Path) -> tuple[Any, x509.Certificate]:
    return _ca(tmp_path, "cluster-ca")


async def _get(
    port: int, path: str, context: ssl.SSLContext, method: str = "GET"
) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"https://127.0.0.1:{port}{path}", ssl=context) as r,
    ):
        return r.status, await r.text()


async def test_clients_need_a_certificate_the_cluster_ca_signed(
    tmp_path: Path, cluster_ca: tuple[Any, x509.Certificate]
) -> None:
    serving = KubeletServing(
        address="127.0.0.1", port=0, cert_dir=tmp_path / "pki", authorization_mode="AlwaysAllow"
    )
    apiserver = _client(tmp_path, cluster_ca, "kube-apiserver-kubelet-client", "system:masters")
    stranger = _client(tmp_path, _ca(tmp_path, "other-ca"), "stranger", "system:masters")
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(
                kubeletapi.serve_kubelet_api,
                FakeNode(),  # type: ignore[arg-type]
                serving,
                node_name="n1",
                cluster_ca=(tmp_path / "cluster-ca.crt").read_bytes(),
            )
        )
        assert await _get(port, "/healthz", apiserver) == (200, "ok")
        status, body = await _get(port, "/pods", apiserver)
        assert status == 200
        assert json.loads(body)["kind"] == "PodList"
        assert await _get(port, "/healthz", _anonymous()) == (401, "Unauthorized\n")
        with pytest.raises(aiohttp.ClientError):
            await _get(port, "/healthz", stranger)
        status, _ = await _get(port, "/attach/ns/pod/c", apiserver, method="POST")
        assert status == 501
        tg.cancel_scope.cancel()


async def test_webhook_mode_asks_for_nodes_proxy_and_refuses_with_403(
    tmp_path: Path, cluster_ca: tuple[Any, x509.Certificate]
) -> None:
    serving = KubeletServing(
        address="127.0.0.1",
        port=0,
        cert_dir=tmp_path / "pki",
        client_ca_file=tmp_path / "cluster-ca.crt",
        authorization_mode="Webhook",
    )
    asked: list[tuple[User, Attributes]] = []

    async def review(user: User, attrs: Attributes) -> tuple[bool, str]:
        asked.append((user, attrs))
        return "system:masters" in user.groups, ""

    admin = _client(tmp_path, cluster_ca, "admin", "system:masters")
    viewer = _client(tmp_path, cluster_ca, "viewer", "viewers")
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(
                kubeletapi.serve_kubelet_api,
                FakeNode(),  # type: ignore[arg-type]
                serving,
                node_name="n1",
                cluster_ca=None,
                review=review,
            )
        )
        assert (await _get(port, "/healthz", admin))[0] == 200
        status, text = await _get(port, "/containerLogs/ns/p/c", viewer)
        assert status == 403
        assert text == "Forbidden (user=viewer, verb=get, resource=nodes, subresource=proxy)\n"
        tg.cancel_scope.cancel()
    assert [(u.name, a.verb, a.subresource, a.name) for u, a in asked] == [
        ("admin", "get", "proxy", "n1"),
        ("viewer", "get", "proxy", "n1"),
    ]


async def test_a_serving_pair_or_ca_that_cannot_be_used_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.crt").write_text("junk")
    serving = KubeletServing(
        address="127.0.0.1",
        port=0,
        tls_cert_file=tmp_path / "bad.crt",
        tls_private_key_file=tmp_path / "bad.key",
    )
    with pytest.raises(errors.KubeletServingError, match=r"bad\.crt"):
        await kubeletapi.serve_kubelet_api(
            FakeNode(),  # type: ignore[arg-type]
            serving,
            node_name="n1",
            cluster_ca=b"-----BEGIN CERTIFICATE-----\n",
        )
    with pytest.raises(errors.KubeletServingError, match="needs a CA"):
        await kubeletapi.serve_kubelet_api(
            FakeNode(),  # type: ignore[arg-type]
            KubeletServing(address="127.0.0.1", port=0, cert_dir=tmp_path / "pki"),
            node_name="n1",
            cluster_ca=None,
        )
    with pytest.raises(ValueError, match="go together"):
        KubeletServing(address="127.0.0.1", tls_cert_file=tmp_path / "bad.crt")


def test_webhook_is_the_default_authorization() -> None:
    assert KubeletServing(address="127.0.0.1").authorization_mode == "Webhook"


async def test_webhook_authorization_without_the_api_server_is_refused(
    tmp_path: Path, cluster_ca: tuple[Any, x509.Certificate]
) -> None:
    with pytest.raises(errors.KubeletServingError, match="Webhook needs the API server"):
        await kubeletapi.serve_kubelet_api(
            FakeNode(),  # type: ignore[arg-type]
            KubeletServing(address="127.0.0.1", port=0, cert_dir=tmp_path / "pki"),
            node_name="n1",
            cluster_ca=(tmp_path / "cluster-ca.crt").read_bytes(),
        )


async def test_always_allow_is_served_only_with_a_warning_line(
    tmp_path: Path, cluster_ca: tuple[Any, x509.Certificate]
) -> None:
    from loguru import logger

    from asynckubelet.cli.logsetup import add_sink

    lines: list[str] = []
    sink = add_sink(lambda message: lines.append(str(message)), level="WARNING")
    logger.enable("asynckubelet")
    serving = KubeletServing(
        address="127.0.0.1", port=0, cert_dir=tmp_path / "pki", authorization_mode="AlwaysAllow"
    )
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(
                functools.partial(
                    kubeletapi.serve_kubelet_api,
                    FakeNode(),  # type: ignore[arg-type]
                    serving,
                    node_name="n1",
                    cluster_ca=(tmp_path / "cluster-ca.crt").read_bytes(),
                )
            )
            tg.cancel_scope.cancel()
    finally:
        logger.remove(sink)
    assert any("kubelet API authorization is AlwaysAllow" in line for line in lines)


# -- the authorization matrix ------------------------------------------------------------------

TOKENS = {"admin-token": User("admin", ("system:masters", "system:authenticated"))}
TOKENS["viewer-token"] = User("system:serviceaccount:ns:viewer", ("system:authenticated",))


async def _review_token(token: str) -> User | None:
    return TOKENS.get(token)


def _policy(user: User, attrs: Attributes) -> bool:
    """The API server's RBAC as this test sets it: masters may do anything; the viewer
    service account may only ``get nodes/proxy`` (what a monitoring agent is given)."""
    if "system:masters" in user.groups:
        return True
    if user.name == "system:serviceaccount:ns:viewer":
        return (attrs.verb, attrs.subresource) == ("get", "proxy")
    return False


@pytest.fixture
async def webhook_api(tmp_path: Path, cluster_ca: tuple[Any, x509.Certificate]) -> Any:
    asked: list[tuple[str, Attributes]] = []

    async def review(user: User, attrs: Attributes) -> tuple[bool, str]:
        asked.append((user.name, attrs))
        return _policy(user, attrs), ""

    serving = KubeletServing(
        address="127.0.0.1",
        port=0,
        cert_dir=tmp_path / "pki",
        client_ca_file=tmp_path / "cluster-ca.crt",
    )
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(
                kubeletapi.serve_kubelet_api,
                FakeNode(),  # type: ignore[arg-type]
                serving,
                node_name="n1",
                cluster_ca=None,
                review=review,
                review_token=_review_token,
            )
        )
        yield port, asked
        tg.cancel_scope.cancel()


async def _call(
    port: int, path: str, *, context: ssl.SSLContext, token: str | None = None, method: str = "GET"
) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"https://127.0.0.1:{port}{path}", ssl=context, headers=headers) as r,
    ):
        return r.status


@pytest.mark.parametrize(
    ("who", "path", "method", "status"),
    [
        ("nobody", "/pods", "GET", 401),
        ("nobody", "/exec/ns/p/c?command=id", "POST", 401),
        ("bad token", "/pods", "GET", 401),
        ("another node", "/pods", "GET", 403),
        ("another node", "/exec/ns/p/c?command=id", "POST", 403),
        ("a user", "/containerLogs/ns/p/c", "GET", 403),
        ("admin cert", "/pods", "GET", 200),
        ("admin token", "/pods", "GET", 200),
        ("viewer token", "/pods", "GET", 200),
        ("viewer token", "/exec/ns/p/c?command=id", "GET", 403),
        ("viewer token", "/portForward/ns/p", "GET", 403),
    ],
)
async def test_the_kubelet_api_authorization_matrix(
    webhook_api: tuple[int, list[tuple[str, Attributes]]],
    tmp_path: Path,
    cluster_ca: tuple[Any, x509.Certificate],
    who: str,
    path: str,
    method: str,
    status: int,
) -> None:
    port, _ = webhook_api
    context, token = _anonymous(), None
    if who == "bad token":
        token = "not-a-token"
    elif who == "another node":
        context = _client(tmp_path, cluster_ca, "system:node:n2", "system:nodes")
    elif who == "a user":
        context = _client(tmp_path, cluster_ca, "alice", "developers")
    elif who == "admin cert":
        context = _client(tmp_path, cluster_ca, "kube-apiserver-kubelet-client", "system:masters")
    elif who.endswith("token"):
        token = who.replace(" ", "-")
    assert await _call(port, path, context=context, token=token, method=method) == status


async def test_streaming_paths_are_asked_as_create_whatever_the_method(
    webhook_api: tuple[int, list[tuple[str, Attributes]]],
) -> None:
    port, asked = webhook_api
    for method in ("GET", "POST"):
        await _call(
            port,
            "/exec/ns/p/c?command=id",
            context=_anonymous(),
            token="viewer-token",  # noqa: S106  (the test's own fake token)
            method=method,
        )
    # Both methods ask the same question (answered once, then from the cache).
    assert {(a.verb, a.subresource) for _, a in asked} == {("create", "proxy")}


def test_a_bearer_token_is_read_from_the_authorization_header_only() -> None:
    from aiohttp.test_utils import make_mocked_request

    def token(value: str | None) -> str | None:
        headers = {"Authorization": value} if value is not None else {}
        return kubeletauth.bearer_token(make_mocked_request("GET", "/pods", headers=headers))

    assert token("Bearer abc") == "abc"
    assert token("bearer abc") == "abc"
    assert token("Basic abc") is None
    assert token("Bearer ") is None
    assert token("Bearer a b") is None
    assert token(None) is None


async def test_token_reviews_are_cached_and_refusals_expire_sooner() -> None:
    asked: list[str] = []

    async def review(token: str) -> User | None:
        asked.append(token)
        return TOKENS.get(token)

    tokens = kubeletauth.TokenAuthenticator(review)
    assert await tokens("admin-token") == TOKENS["admin-token"]
    assert await tokens("admin-token") == TOKENS["admin-token"]
    assert await tokens("nope") is None
    assert await tokens("nope") is None
    assert asked == ["admin-token", "nope"]
    assert kubeletauth.FAILED_TOKEN_TTL < kubeletauth.TOKEN_TTL
