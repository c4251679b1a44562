"""Who may use the kubelet API, as the kubelet decides it.

Authentication: a client certificate the cluster's CA signed (its subject's CN is the
user, each O a group), verified by TLS against ``--client-ca-file`` or the kubeconfig's
certificate authority; else a bearer token the API server vouches for (``TokenReview``,
:class:`TokenAuthenticator`). Nothing else: anonymous requests are refused.

Authorization: ``Webhook`` (the kubelet's configuration default) asks the API server per
user and request (``SubjectAccessReview``, :class:`WebhookAuthorizer`) for the node's
subresource the path maps to (:func:`attributes`); ``AlwaysAllow`` lets every
authenticated client do anything, and is used only when asked for.

The serving certificate is the operator's, or one made here, self-signed for the node's
name and addresses (:func:`self_signed_pair`), as the kubelet makes one.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from asynckubelet import errors
from asynckubelet._logging import logger

AuthorizationMode = Literal["AlwaysAllow", "Webhook"]
AUTHORIZATION_MODES: tuple[AuthorizationMode, ...] = ("Webhook", "AlwaysAllow")
CERT_NAME = "kubelet.crt"
KEY_NAME = "kubelet.key"
CERT_DAYS = 365
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
"""Seconds a SubjectAccessReview answer is reused (the kubelet's webhook cache TTLs)."""


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attributes:
    """What a request asks, in the API server's words."""

    verb: str
    resource: str
    subresource: str
    name: str


Reviewer = Callable[[User, Attributes], Awaitable[tuple[bool, str]]]
"""Asks the API server whether ``user`` may (``SubjectAccessReview``): (allowed, reason)."""
TokenReviewer = Callable[[str], Awaitable[User | None]]
"""Asks the API server who a bearer token is (``TokenReview``): the user, or None."""
TOKEN_TTL = 120.0
"""Seconds a TokenReview's user is reused (the kubelet's
``--authentication-token-webhook-cache-ttl``)."""
FAILED_TOKEN_TTL = 10.0
"""Seconds a token the API server refused stays refused without asking again."""
STREAMING = ("/exec/", "/attach/", "/portForward/", "/run/")
"""Paths that run something in a pod: authorized as ``create`` whatever the method."""


# -- certificates ---------------------------------------------------------------------------


def self_signed_pair(
    directory: Path, *, node_name: str, addresses: Sequence[str]
) -> tuple[Path, Path]:
    """``kubelet.crt`` and ``kubelet.key`` in ``directory``: kept when both are there and
    load, else made (ECDSA P-256, self-signed for the node's name and addresses)."""
    cert, key = directory / CERT_NAME, directory / KEY_NAME
    if cert.exists() and key.exists():
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
            return cert, key
        except (ssl.SSLError, OSError) as e:
            logger.warning("serving certificate {} cannot be used ({}); making a new one", cert, e)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"{node_name}@{int(now.timestamp())}")]
    )
    names: list[x509.GeneralName] = [x509.DNSName(node_name)]
    for address in dict.fromkeys(addresses):
        with contextlib.suppress(ValueError):
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(private, hashes.SHA256())
    )
    key_bytes = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_bytes)
    os.chmod(key, 0o600)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    logger.info("made a self-signed serving certificate {}", cert)
    return cert, key


def server_context(*, cert: Path, key: Path, client_ca: bytes) -> ssl.SSLContext:
    """TLS for the kubelet API: our pair, client certificates verified against
    ``client_ca`` (PEM) when given (a request without one is answered 401)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise errors.KubeletServingError(f"serving certificate {cert} / key {key}: {e}") from None
    try:
        context.load_verify_locations(cadata=client_ca.decode("ascii", errors="replace"))
    except (ssl.SSLError, ValueError) as e:
        raise errors.KubeletServingError(f"client CA: {e}") from None
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def peer_user(peercert: dict[str, Any] | None) -> User | None:
    """The user a verified client certificate names (CN, and O as groups)."""
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    if not name:
        return None
    return User(name=name, groups=(*groups, "system:authenticated"))


def attributes(request: web.Request, node_name: str) -> Attributes:
    """The kubelet's mapping of a request to ``nodes/<subresource>``."""
    verb = {
        "GET": "get",
        "HEAD": "get",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(request.method, request.method.lower())
    path = request.path
    if path.startswith(STREAMING):
        verb = "create"
    subresource = "proxy"
    for prefix, sub in (
        ("/stats", "stats"),
        ("/metrics", "metrics"),
        ("/logs", "log"),
        ("/spec", "spec"),
    ):
        if path == prefix or path.startswith(prefix + "/"):
            subresource = sub
    return Attributes(verb=verb, resource="nodes", subresource=subresource, name=node_name)


class WebhookAuthorizer:
    """``SubjectAccessReview`` for each new (user, attributes), answers cached."""

    def __init__(self, review: Reviewer) -> None:
        self.review = review
        self._cache: dict[tuple[User, Attributes], tuple[float, bool, str]] = {}

    async def __call__(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        now = time.monotonic()
        key = (user, attrs)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        allowed, reason = await self.review(user, attrs)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (now + (ALLOWED_TTL if allowed else DENIED_TTL), allowed, reason)
        return allowed, reason


class TokenAuthenticator:
    """``TokenReview`` for each new bearer token; users cached for :data:`TOKEN_TTL`,
    refusals for :data:`FAILED_TOKEN_TTL`, keyed by the token's digest."""

    def __init__(self, review: TokenReviewer) -> None:
        self.review = review
        self._cache: dict[bytes, tuple[float, User | None]] = {}

    async def __call__(self, token: str) -> User | None:
        now = time.monotonic()
        key = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        user = await self.review(token)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (now + (TOKEN_TTL if user is not None else FAILED_TOKEN_TTL), user)
        return user


def bearer_token(request: web.Request) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (the scheme in any case), else None."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


__all__ = [
    "ALLOWED_TTL",
    "AUTHORIZATION_MODES",
    "DENIED_TTL",
    "FAILED_TOKEN_TTL",
    "STREAMING",
    "TOKEN_TTL",
    "Attributes",
    "AuthorizationMode",
    "Reviewer",
    "TokenAuthenticator",
    "TokenReviewer",
    "User",
    "WebhookAuthorizer",
    "attributes",
    "bearer_token",
    "peer_user",
    "self_signed_pair",
    "server_context",
]
