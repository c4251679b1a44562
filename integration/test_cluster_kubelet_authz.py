"""The kubelet API of a cluster node against a real API server: who gets in, as the
kubelet decides it with its default ``Webhook`` authorization.

The agent runs with no authorization flag; each client below calls its kubelet API
directly (as the API server, a monitoring agent or an attacker would), with a client
certificate the cluster's CA signed or a service account's bearer token, and the API
server's RBAC decides through ``SubjectAccessReview`` (and ``TokenReview`` for tokens).
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from integration.cluster_fixtures import Agent, Cluster, agents, cluster, namespace, wait_for

__all__ = ["agents", "cluster", "namespace"]

pytestmark = pytest.mark.timeout(600)


def _client_cert(cluster: Cluster, folder: Path, *, cn: str, org: str | None) -> tuple[Path, Path]:
    """A client certificate for ``cn`` (group ``org``) signed by the cluster's CA."""
    pki = cluster.dir / "pki"
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    name = cn.replace(":", "-")
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def _context(pair: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if pair is not None:
        context.load_cert_chain(*pair)
    return context


def _status(
    agent: Agent,
    path: str,
    *,
    context: ssl.SSLContext,
    token: str | None = None,
    method: str = "GET",
) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"https://127.0.0.1:{agent.kubelet_port}{path}", headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        e.close()
        return int(e.code)


def _service_account_token(cluster: Cluster, namespace: str, name: str) -> str:
    """The token of service account ``name`` (its token Secret, as a 1.20 cluster makes)."""
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)

    def secret() -> str:
        done = cluster.kubectl("get", "serviceaccount", name, "-n", namespace, "-o", "json",
                               check=False)  # fmt: skip
        found = json.loads(done.stdout).get("secrets") if done.returncode == 0 else None
        return str(found[0]["name"]) if found else ""

    wait_for(lambda: bool(secret()), timeout=60, what=f"the token of {namespace}/{name}")
    data = cluster.json("get", "secret", secret(), "-n", namespace)["data"]["token"]
    return base64.b64decode(data).decode()


@pytest.fixture
def agent(agents: Callable[..., Agent]) -> Agent:
    node = agents()
    node.start()
    node.wait_ready()
    return node


def test_the_kubelet_api_lets_in_only_whom_the_api_server_authorizes(
    cluster: Cluster, agent: Agent, namespace: str, tmp_path: Path
) -> None:
    assert "AlwaysAllow" not in agent.log()
    suffix = uuid.uuid4().hex[:6]
    apiserver = _context(
        (cluster.dir / "pki" / "apiserver-kubelet-client.crt",
         cluster.dir / "pki" / "apiserver-kubelet-client.key")
    )  # fmt: skip
    other_node = _context(
        _client_cert(cluster, tmp_path, cn=f"system:node:akl-other-{suffix}", org="system:nodes")
    )
    user = _context(_client_cert(cluster, tmp_path, cn=f"alice-{suffix}", org="developers"))
    stranger = _service_account_token(cluster, namespace, "stranger")
    viewer = _service_account_token(cluster, namespace, "viewer")
    role = f"akl-node-proxy-reader-{suffix}"
    cluster.kubectl("create", "clusterrole", role, "--verb=get", "--resource=nodes/proxy")
    try:
        cluster.kubectl(
            "create", "clusterrolebinding", role, f"--clusterrole={role}",
            f"--serviceaccount={namespace}:viewer",
        )  # fmt: skip
        exec_path = f"/exec/{namespace}/nope/c?command=id&output=1"
        cases = [
            ("nobody", "/pods", _context(), None, "GET", 401),
            ("a token the API server refuses", "/pods", _context(), "not-a-token", "GET", 401),
            ("another node's certificate", "/pods", other_node, None, "GET", 403),
            ("another node's certificate", exec_path, other_node, None, "POST", 403),
            ("a user's certificate", "/pods", user, None, "GET", 403),
            ("a service account with no role", "/pods", _context(), stranger, "GET", 403),
            ("the API server's kubelet client", "/pods", apiserver, None, "GET", 200),
            ("get nodes/proxy by token", "/pods", _context(), viewer, "GET", 200),
            ("get nodes/proxy, an exec by GET", exec_path, _context(), viewer, "GET", 403),
        ]

        def seen() -> list[tuple[str, str, int]]:
            return [
                (who, path, _status(agent, path, context=ctx, token=token, method=method))
                for who, path, ctx, token, method, _ in cases
            ]

        wanted = [(who, path, status) for who, path, _, _, _, status in cases]
        # A new RBAC binding reaches the API server's authorizer within a second or two,
        # and a refusal the agent cached before is asked again after 30 s.
        deadline = time.monotonic() + 90
        got = seen()
        while got != wanted and time.monotonic() < deadline:
            time.sleep(2)
            got = seen()
        assert got == wanted
    finally:
        cluster.kubectl("delete", "clusterrolebinding", role, check=False)
        cluster.kubectl("delete", "clusterrole", role, check=False)
