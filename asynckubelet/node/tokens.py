"""Service-account tokens for projected volumes, from a node-local issuer.

On a cluster the kubelet asks the API server for a token bound to the pod (``TokenRequest``)
and writes it into the projected volume. A node without an API server cannot get one, and
an empty file breaks every client that reads it (Vault's Kubernetes auth, cloud workload
identity, anything that sends the token as a bearer credential). So this node issues the
token itself, in the API server's shape, signed by a key of its own: an RSA key made once
in the node's state directory (``signing-key.pem``, mode 0600), its public half beside it
(``signing-key.pub``) for whoever verifies the tokens. The claims are the API server's:
``iss`` (``https://asynckubelet.local`` unless configured: ``--service-account-issuer``
of ``serve`` and ``run``, or ``ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER``, which the command line
reads; the library takes only what it is given), ``sub``
``system:serviceaccount:<ns>:<sa>``, ``aud`` (the projection's audience, else the issuer),
``iat``/``nbf``/``exp`` from ``expirationSeconds`` and the private ``kubernetes.io`` claim
naming the namespace, the pod, the service account and the node. The key id is the API
server's: the unpadded base64url SHA-256 of the public key's DER form.

Such a token proves only that this node issued it: a verifier must be configured with this
node's issuer and public key, as for any external OIDC issuer; the Kubernetes API of a
cluster does not accept it. As the kubelet's token manager does, a token is reused until
80 % of its lifetime (or 24 h) has passed, less a jitter of up to 10 s, and then replaced;
the projected volume is rewritten through the atomic writer when its token changes.

PyJWT and cryptography are imported with the first token: a node whose pods ask for none
does not carry them (docs/benchmarks.md).
"""

from __future__ import annotations

import base64
import hashlib
import random
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from asynckubelet import hostfs

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

DEFAULT_ISSUER = "https://asynckubelet.local"
ISSUER_ENV = "ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER"
PRIVATE_KEY_FILE = "signing-key.pem"
PUBLIC_KEY_FILE = "signing-key.pub"
MAX_TTL = timedelta(hours=24)
MAX_JITTER_SECONDS = 10.0
_UID_NAMESPACE = uuid.UUID("6f1c3b8e-2d47-4a51-9a0e-6a6b9c1e7d20")


@dataclass(frozen=True)
class TokenRequest:
    """What a token is asked for: by a ``serviceAccountToken`` projection (bound to its
    pod) or by the API's ``TokenRequest`` (bound to a pod, a Secret, the node or
    nothing)."""

    namespace: str
    service_account: str
    pod_name: str
    pod_uid: str
    audiences: tuple[str, ...]
    expiration_seconds: int
    service_account_uid: str = ""
    """The service account's uid (empty: one made from its names)."""
    secret_name: str = ""
    """A Secret the token is bound to (with ``secret_uid``)."""
    secret_uid: str = ""
    node_bound: bool = False
    """Bound to the node itself; a token bound to a pod names its node too, one bound to
    nothing (no pod, Secret or node) names neither."""


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    issued_at: datetime
    expires_at: datetime


class TokenSource(Protocol):
    """Where a projected volume's service-account token comes from: this node's own
    :class:`TokenIssuer`, or an API server's ``TokenRequest`` in cluster node mode. Called
    from a worker thread."""

    def token(self, request: TokenRequest) -> Token:
        """The cached token for ``request``, or a new one when it is due for refresh."""
        ...

    def forget(self, *, pod_uid: str) -> None:
        """Drop the pod's cached tokens (it is gone)."""
        ...


def requires_refresh(token: Token, *, now: datetime, jitter: float = 0.0) -> bool:
    """The kubelet token manager's ``requiresRefresh``: past 80 % of the lifetime, or 24 h
    after issue, each less ``jitter`` seconds."""
    ttl = token.expires_at - token.issued_at
    slack = timedelta(seconds=jitter)
    if now >= token.expires_at - ttl * 0.2 - slack:
        return True
    return now >= token.issued_at + MAX_TTL - slack


def validate_issuer(issuer: str) -> str:
    """The issuer as the API server accepts ``--service-account-issuer``: not empty, and a
    URL when it holds a ``:``; a ValueError in the API server's words otherwise."""
    if not issuer:
        raise ValueError("service-account-issuer should not be an empty string")
    if ":" in issuer:
        try:
            if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in issuer):
                raise ValueError("invalid control character in URL")
            _ = urllib.parse.urlsplit(issuer).port
        except ValueError as e:
            raise ValueError(
                f"service-account-issuer {issuer!r} contained a ':' but was not a valid URL: {e}"
            ) from None
    return issuer


def stable_uid(*parts: str) -> str:
    """A UID that stays the same for the same names (there is no object to carry one)."""
    return str(uuid.uuid5(_UID_NAMESPACE, "/".join(parts)))


class TokenIssuer:
    """Issues and caches the node's service-account tokens; keys in ``directory``."""

    def __init__(
        self,
        *,
        directory: Path,
        node_name: str,
        issuer: str = DEFAULT_ISSUER,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.directory = directory
        self.clock = clock
        self.node_name = node_name
        self.issuer = validate_issuer(issuer)
        self._key: rsa.RSAPrivateKey | None = None
        self._kid = ""
        self._cache: dict[TokenRequest, Token] = {}
        self._lock = threading.Lock()

    @property
    def public_key_path(self) -> Path:
        return self.directory / PUBLIC_KEY_FILE

    def _signing_key(self) -> rsa.RSAPrivateKey:
        if self._key is not None:
            return self._key
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        path = self.directory / PRIVATE_KEY_FILE
        if path.exists():
            data = hostfs.read_file(self.directory, PRIVATE_KEY_FILE)
            loaded = serialization.load_pem_private_key(data, password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise ValueError(f"{path} does not hold an RSA private key")
            key = loaded
            hostfs.chmod(self.directory, PRIVATE_KEY_FILE, 0o600)
        else:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            hostfs.make_dirs(self.directory, ".", mode=0o700)
            hostfs.write_file(self.directory, PRIVATE_KEY_FILE, pem, mode=0o600)
        public = key.public_key()
        public_pem = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        if not self.public_key_path.exists() or self.public_key_path.read_bytes() != public_pem:
            hostfs.write_file(self.directory, PUBLIC_KEY_FILE, public_pem, mode=0o644)
        der = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self._kid = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
        self._key = key
        return key

    def token(self, request: TokenRequest, *, now: datetime | None = None) -> Token:
        """The cached token for ``request``, or a new one when it is due for refresh."""
        now = now or self.clock()
        with self._lock:
            cached = self._cache.get(request)
            jitter = random.uniform(0, MAX_JITTER_SECONDS)  # noqa: S311  (refresh-time jitter, not a secret)
            if cached is not None and not requires_refresh(cached, now=now, jitter=jitter):
                return cached
            token = self._issue(request, now=now)
            self._cache[request] = token
            return token

    def issue(self, request: TokenRequest, *, now: datetime) -> Token:
        """A new signed token for ``request`` (the API server's ``TokenRequest`` claims)."""
        with self._lock:
            return self._issue(request, now=now)

    def _issue(self, request: TokenRequest, *, now: datetime) -> Token:
        import jwt

        key = self._signing_key()
        issued = now.replace(microsecond=0)
        expires = issued + timedelta(seconds=request.expiration_seconds)
        audiences = list(request.audiences) or [self.issuer]
        private: dict[str, object] = {"namespace": request.namespace}
        if request.pod_name or request.node_bound:
            private["node"] = {"name": self.node_name, "uid": stable_uid("node", self.node_name)}
        if request.pod_name:
            private["pod"] = {"name": request.pod_name, "uid": request.pod_uid}
        if request.secret_name:
            private["secret"] = {"name": request.secret_name, "uid": request.secret_uid}
        private["serviceaccount"] = {
            "name": request.service_account,
            "uid": request.service_account_uid
            or stable_uid("serviceaccount", request.namespace, request.service_account),
        }
        claims = {
            "aud": audiences,
            "exp": int(expires.timestamp()),
            "iat": int(issued.timestamp()),
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": int(issued.timestamp()),
            "sub": f"system:serviceaccount:{request.namespace}:{request.service_account}",
        }
        value = jwt.encode(claims, key, algorithm="RS256", headers={"kid": self._kid})
        return Token(value=value, issued_at=issued, expires_at=expires)

    def forget(self, *, pod_uid: str) -> None:
        """Drop the pod's cached tokens (it is gone)."""
        with self._lock:
            for request in [r for r in self._cache if r.pod_uid == pod_uid]:
                del self._cache[request]


__all__ = [
    "DEFAULT_ISSUER",
    "ISSUER_ENV",
    "Token",
    "TokenIssuer",
    "TokenRequest",
    "TokenSource",
    "requires_refresh",
    "validate_issuer",
]
