"""The node-local service-account token issuer: claims, keys, and the kubelet's refresh rule."""

from __future__ import annotations

import base64
import hashlib
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from asynckubelet.node.tokens import Token, TokenIssuer, TokenRequest, requires_refresh

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REQUEST = TokenRequest(
    namespace="team",
    service_account="builder",
    pod_name="web",
    pod_uid="uid-1",
    audiences=("vault",),
    expiration_seconds=7200,
)


def _decode(issuer: TokenIssuer, token: str, audience: str) -> dict[str, object]:
    public = issuer.public_key_path.read_bytes()
    claims: dict[str, object] = jwt.decode(
        token,
        public,
        algorithms=["RS256"],
        audience=audience,
        options={"verify_exp": False, "verify_nbf": False, "verify_iat": False},
    )
    return claims


def test_a_token_carries_the_api_servers_claims_and_verifies_with_the_nodes_public_key(
    tmp_path: Path,
) -> None:
    issuer = TokenIssuer(directory=tmp_path, node_name="laptop")
    token = issuer.token(REQUEST, now=T0)
    claims = _decode(issuer, token.value, "vault")
    assert claims["iss"] == "https://asynckubelet.local"
    assert claims["sub"] == "system:serviceaccount:team:builder"
    assert claims["aud"] == ["vault"]
    assert (claims["iat"], claims["nbf"]) == (int(T0.timestamp()), int(T0.timestamp()))
    assert claims["exp"] == int(T0.timestamp()) + 7200
    k8s = claims["kubernetes.io"]
    assert isinstance(k8s, dict)
    assert k8s["namespace"] == "team"
    assert k8s["pod"] == {"name": "web", "uid": "uid-1"}
    assert k8s["serviceaccount"]["name"] == "builder"
    assert k8s["node"]["name"] == "laptop"


def test_the_key_id_is_the_api_servers_hash_of_the_public_key(tmp_path: Path) -> None:
    issuer = TokenIssuer(directory=tmp_path, node_name="n")
    token = issuer.token(REQUEST, now=T0)
    public = serialization.load_pem_public_key(issuer.public_key_path.read_bytes())
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    kid = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
    assert jwt.get_unverified_header(token.value) == {"alg": "RS256", "kid": kid, "typ": "JWT"}


def test_without_an_audience_the_token_is_for_the_configured_issuer(tmp_path: Path) -> None:
    issuer = TokenIssuer(directory=tmp_path, node_name="n", issuer="https://ci.example")
    request = TokenRequest("default", "default", "p", "u", (), 3600)
    claims = _decode(issuer, issuer.token(request, now=T0).value, "https://ci.example")
    assert (claims["iss"], claims["aud"]) == ("https://ci.example", ["https://ci.example"])


def test_the_signing_key_is_private_and_kept_across_issuers(tmp_path: Path) -> None:
    first = TokenIssuer(directory=tmp_path, node_name="n")
    first.token(REQUEST, now=T0)
    assert stat.S_IMODE((tmp_path / "signing-key.pem").stat().st_mode) == 0o600
    second = TokenIssuer(directory=tmp_path, node_name="n")
    token = second.token(REQUEST, now=T0)
    assert _decode(first, token.value, "vault")["sub"] == "system:serviceaccount:team:builder"


def test_a_token_is_reused_until_it_needs_a_refresh(tmp_path: Path) -> None:
    issuer = TokenIssuer(directory=tmp_path, node_name="n")
    first = issuer.token(REQUEST, now=T0)
    assert issuer.token(REQUEST, now=T0 + timedelta(seconds=5000)) == first
    later = issuer.token(REQUEST, now=T0 + timedelta(seconds=5800))
    assert later != first
    assert later.issued_at == T0 + timedelta(seconds=5800)


def _token(ttl: timedelta) -> Token:
    return Token(value="", issued_at=T0, expires_at=T0 + ttl)


@pytest.mark.parametrize(
    ("ttl", "age", "jitter", "refresh"),
    [
        (timedelta(hours=2), timedelta(minutes=95), 0.0, False),
        (timedelta(hours=2), timedelta(minutes=96), 0.0, True),
        (timedelta(hours=2), timedelta(minutes=95, seconds=55), 10.0, True),
        (timedelta(days=3), timedelta(hours=23, minutes=59), 0.0, False),
        (timedelta(days=3), timedelta(hours=24), 0.0, True),
    ],
)
def test_the_refresh_rule_is_the_kubelet_token_managers(
    ttl: timedelta, age: timedelta, jitter: float, refresh: bool
) -> None:
    assert requires_refresh(_token(ttl), now=T0 + age, jitter=jitter) is refresh


def test_the_key_directory_is_made_0700_and_a_loose_key_is_tightened_to_0600(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "serviceaccount"
    TokenIssuer(directory=directory, node_name="n").token(REQUEST, now=T0)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (directory / "signing-key.pem").chmod(0o644)
    TokenIssuer(directory=directory, node_name="n").token(REQUEST, now=T0)
    assert stat.S_IMODE((directory / "signing-key.pem").stat().st_mode) == 0o600


def test_a_signing_key_planted_as_a_link_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "signing-key.pem").symlink_to("/etc/hostname")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        TokenIssuer(directory=tmp_path, node_name="n").token(REQUEST, now=T0)
