"""The Kubernetes API's credentials: a CA of the node's own, the serving certificate it
signs, the one client certificate let in, and the kubeconfig that holds them.

A kubeconfig is what every Kubernetes client reads, so the node writes one, as kind and
kubeadm do: ``<state dir>/kubeconfig``, pointing at the API's address, trusting the
node's CA and presenting a client certificate (``CN=asynckubelet-admin``,
``O=system:masters``). The CA and the client certificate are kept across starts, so a
kubeconfig merged into ``~/.kube/config`` keeps working; the serving certificate is made
anew at each start for the address the API listens on.

Everything lands under the state dir through :mod:`asynckubelet.hostfs` (each file
written whole under a new name and renamed over the old, links never followed): private
keys and the kubeconfig, which embeds the client key, are 0600, the ``pki`` directory
0700. :func:`merge_kubeconfig` adds the node's cluster, user and context to a user's
kubeconfig the same way, keeping every other entry, and refuses one that is a symbolic
link rather than write through it.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asynckubelet import errors, hostfs
from asynckubelet._logging import logger

PKI_DIR = "pki/apiserver"
"""Under the state dir (cluster mode's serving pair lives in ``pki`` itself)."""
KUBECONFIG = "kubeconfig"
"""The node's kubeconfig, in the state dir."""
CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "apiserver.crt", "apiserver.key"
CLIENT_CERT, CLIENT_KEY = "admin.crt", "admin.key"
CONTEXT = "asynckubelet"
"""The name of the cluster, user and context the kubeconfig holds."""
CLIENT_USER = "asynckubelet-admin"
CLIENT_GROUP = "system:masters"
CA_DAYS = 3650
CERT_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
"""A kept certificate closer than this to its end is made anew."""
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
"""A user's kubeconfig is read up to this size (larger is refused, not cut)."""
PKI_DIR_MODE = 0o700
KEY_MODE = 0o600


@dataclass(frozen=True)
class Credentials:
    """PEM texts of the node's CA, its serving pair and its client pair."""

    ca_cert: bytes
    server_cert: bytes
    server_key: bytes
    client_cert: bytes
    client_key: bytes
    directory: Path
    """Where they are kept (the serving pair's files are loaded from there)."""

    @property
    def client_fingerprint(self) -> bytes:
        """SHA-256 of the client certificate's DER form: the one certificate let in."""
        return fingerprint(self.client_cert)

    @property
    def server_files(self) -> tuple[Path, Path]:
        return self.directory / SERVER_CERT, self.directory / SERVER_KEY


def fingerprint(pem: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    return hashlib.sha256(der).digest()


def ensure_credentials(state: Path, *, hosts: Iterable[str]) -> Credentials:
    """The node's credentials under ``state``: the CA and the client pair kept when they
    load, are signed as they should be and have time left, else made anew (a new CA
    brings a new client pair); a new serving pair for ``hosts`` (names and addresses,
    loopback's among them) each time. Raises :class:`~asynckubelet.errors.DaemonError`
    naming a file that cannot be written."""
    now = datetime.datetime.now(datetime.UTC)
    try:
        ca = _load_pair(state, CA_CERT, CA_KEY, now=now)
        client = _load_pair(state, CLIENT_CERT, CLIENT_KEY, now=now) if ca is not None else None
        if client is not None and ca is not None and not _signed_by(client[0], ca[0]):
            client = None
        if ca is None:
            ca = _make_ca(now)
            _store(state, CA_CERT, CA_KEY, ca)
            logger.info("made the Kubernetes API's CA {}", state / PKI_DIR / CA_CERT)
        if client is None:
            client = _make_leaf(ca, now, common_name=CLIENT_USER, client=True)
            _store(state, CLIENT_CERT, CLIENT_KEY, client)
        server = _make_leaf(ca, now, common_name="asynckubelet-apiserver", hosts=hosts)
        _store(state, SERVER_CERT, SERVER_KEY, server)
    except OSError as e:
        raise errors.DaemonError(
            f"cannot keep the API's credentials in {state / PKI_DIR}: {e}"
        ) from None
    return Credentials(
        ca_cert=_pem(ca[0]),
        server_cert=_pem(server[0]),
        server_key=_key_pem(server[1]),
        client_cert=_pem(client[0]),
        client_key=_key_pem(client[1]),
        directory=state / PKI_DIR,
    )


# -- kubeconfig -----------------------------------------------------------------------------


def kubeconfig(credentials: Credentials, *, server: str) -> dict[str, Any]:
    """A kubeconfig for ``server`` (``https://HOST:PORT``) holding the node's cluster,
    user and context, all named :data:`CONTEXT`, the context current."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [_cluster_entry(credentials, server)],
        "users": [_user_entry(credentials)],
        "contexts": [_context_entry()],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(state: Path, config: Mapping[str, Any]) -> Path:
    """``<state>/kubeconfig``, replaced whole (0600: it holds the client key)."""
    try:
        hostfs.write_file(state, KUBECONFIG, _dump(config), mode=KEY_MODE)
    except OSError as e:
        raise errors.DaemonError(f"cannot write {state / KUBECONFIG}: {e}") from None
    return state / KUBECONFIG


def read_kubeconfig(directory: Path, name: str) -> dict[str, Any] | None:
    """The kubeconfig ``name`` in ``directory`` (None: there is none), read without
    following a link, bounded. :class:`~asynckubelet.errors.KubeconfigError` for a link, a
    file too large or one that is not a kubeconfig."""
    path = directory / name
    try:
        data = hostfs.read_file(directory, name, limit=MAX_KUBECONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        link = path.is_symlink()
        why = "a symbolic link, which is not followed" if link else str(e)
        raise errors.KubeconfigError(f"kubeconfig {path}: {why}", path=str(path)) from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise errors.KubeconfigError(
            f"kubeconfig {path}: larger than {MAX_KUBECONFIG_BYTES} bytes", path=str(path)
        )
    try:
        loaded = yaml.safe_load(data.decode("utf-8")) if data.strip() else {}
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise errors.KubeconfigError(f"kubeconfig {path}: not YAML: {e}", path=str(path)) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise errors.KubeconfigError(f"kubeconfig {path}: not a mapping", path=str(path))
    for key in ("clusters", "users", "contexts"):
        if not isinstance(loaded.get(key) or [], list):
            raise errors.KubeconfigError(f"kubeconfig {path}: {key} is not a list", path=str(path))
    return loaded


def merged(into: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    """``into`` with the cluster, user and context of ``node`` (a kubeconfig of
    :func:`kubeconfig`) in place of any of the same name; every other entry and setting
    kept. The current context is set only when there was none."""
    out = dict(into)
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Config")
    out.setdefault("preferences", {})
    for key in ("clusters", "users", "contexts"):
        theirs = [e for e in (out.get(key) or []) if not _named(e, CONTEXT)]
        ours = [e for e in node.get(key) or [] if _named(e, CONTEXT)]
        out[key] = [*theirs, *ours]
    if not out.get("current-context"):
        out["current-context"] = CONTEXT
    return out


def merge_kubeconfig(state: Path, *, home: Path) -> Path:
    """Add the node's cluster, user and context to ``~/.kube/config`` (made when missing,
    0600, written whole); returns its path."""
    node = read_kubeconfig(state, KUBECONFIG)
    if node is None:
        raise errors.KubeconfigError(
            f"no kubeconfig at {state / KUBECONFIG}: start the node with `asynckubelet serve`",
            path=str(state / KUBECONFIG),
        )
    directory = home / ".kube"
    path = directory / "config"
    mine = read_kubeconfig(directory, "config") or {}
    try:
        hostfs.write_file(directory, "config", _dump(merged(mine, node)), mode=KEY_MODE)
    except OSError as e:
        raise errors.KubeconfigError(f"kubeconfig {path}: {e}", path=str(path)) from None
    return path


def _named(entry: Any, name: str) -> bool:
    return isinstance(entry, dict) and entry.get("name") == name


def _cluster_entry(credentials: Credentials, server: str) -> dict[str, Any]:
    return {
        "name": CONTEXT,
        "cluster": {
            "server": server,
            "certificate-authority-data": _b64(credentials.ca_cert),
        },
    }


def _user_entry(credentials: Credentials) -> dict[str, Any]:
    return {
        "name": CONTEXT,
        "user": {
            "client-certificate-data": _b64(credentials.client_cert),
            "client-key-data": _b64(credentials.client_key),
        },
    }


def _context_entry() -> dict[str, Any]:
    return {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _dump(config: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False).encode()


# -- certificates ---------------------------------------------------------------------------

_Pair = tuple[Any, Any]
"""(x509.Certificate, EllipticCurvePrivateKey)."""


def _load_pair(
    state: Path, cert_name: str, key_name: str, *, now: datetime.datetime
) -> _Pair | None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    directory = state / PKI_DIR
    try:
        cert_pem = hostfs.read_file(directory, cert_name, limit=1 << 16)
        key_pem = hostfs.read_file(directory, key_name, limit=1 << 16)
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.warning("{} cannot be read ({}); making a new one", directory / cert_name, e)
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError as e:
        logger.warning("{} cannot be used ({}); making a new one", directory / cert_name, e)
        return None
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        logger.warning("{} does not match its key; making a new one", directory / cert_name)
        return None
    if cert.not_valid_after_utc - RENEW_BEFORE < now:
        logger.info("{} is about to expire; making a new one", directory / cert_name)
        return None
    return cert, key


def _signed_by(cert: Any, ca: Any) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _store(state: Path, cert_name: str, key_name: str, pair: _Pair) -> None:
    hostfs.make_dirs(state, PKI_DIR, mode=PKI_DIR_MODE)
    directory = state / PKI_DIR
    hostfs.write_file(directory, key_name, _key_pem(pair[1]), mode=KEY_MODE)
    hostfs.write_file(directory, cert_name, _pem(pair[0]), mode=0o644)


def _pem(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _name(common_name: str, organization: str | None = None) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _usage(*, ca: bool) -> Any:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _make_ca(now: datetime.datetime) -> _Pair:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"asynckubelet-ca@{int(now.timestamp())}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    ca: _Pair,
    now: datetime.datetime,
    *,
    common_name: str,
    client: bool = False,
    hosts: Iterable[str] = (),
) -> _Pair:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, CLIENT_GROUP if client else None))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if not client:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(_alt_names(hosts)), critical=False
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _alt_names(hosts: Iterable[str]) -> list[Any]:
    from cryptography import x509

    names: list[Any] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]):
        if not host:
            continue
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


__all__ = [
    "CONTEXT",
    "KUBECONFIG",
    "PKI_DIR",
    "Credentials",
    "ensure_credentials",
    "fingerprint",
    "kubeconfig",
    "merge_kubeconfig",
    "merged",
    "read_kubeconfig",
    "write_kubeconfig",
]
