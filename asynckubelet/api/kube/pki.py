"""The Kubernetes API's credentials: a CA of the node's own, the serving certificate it
signs, and the one client certificate let in (``CN=asynckubelet-admin``,
``O=system:masters``, the kubeconfig's: :mod:`~asynckubelet.api.kube.kubeconfigs`).

The CA and the client certificate are kept across starts, so a kubeconfig merged into
``~/.kube/config`` keeps working; the serving certificate is kept while it names the
addresses the API listens on. Everything is kept under ``<state dir>/pki/apiserver``
(0700) through :mod:`asynckubelet.hostfs`, each file written whole under a new name and
renamed over the old, links never followed; private keys are 0600.

Making certificates needs the ``cryptography`` package, which costs a daemon about 10 MB
of memory for as long as it runs, for work done once a year. So the daemon only checks
what is kept (:func:`load_current`, with the standard library's ``ssl``: a TLS handshake
in memory between the serving and the client pair proves both signed by the CA, valid
now and matching their keys) and, when something must be made, has a short-lived
process of its own do it (:func:`credentials`, ``python -m asynckubelet.api.kube.pki``).
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from asynckubelet import errors, hostfs
from asynckubelet._logging import logger

PKI_DIR = "pki/apiserver"
"""Under the state dir (cluster mode's serving pair lives in ``pki`` itself)."""
CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "apiserver.crt", "apiserver.key"
CLIENT_CERT, CLIENT_KEY = "admin.crt", "admin.key"
META = "meta.json"
"""What the certificates were made for: the serving certificate's hosts, and when the
first of them is due for renewal."""
CLIENT_USER = "asynckubelet-admin"
CLIENT_GROUP = "system:masters"
CA_DAYS = 3650
CERT_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
"""A kept certificate closer than this to its end is made anew."""
PKI_DIR_MODE = 0o700
KEY_MODE = 0o600
MAX_PEM_BYTES = 1 << 16
MAKE_TIMEOUT = 60.0
"""Seconds the process that makes certificates may take."""


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
    """SHA-256 of a PEM certificate's DER form."""
    der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
    return hashlib.sha256(der).digest()


def ensure_credentials(state: Path, *, hosts: Iterable[str]) -> Credentials:
    """The node's credentials under ``state``, made where need be (this needs the
    ``cryptography`` package): the CA and the client pair kept when they load, are signed
    as they should be and have time left, else made anew (a new CA brings new pairs); the
    serving pair likewise, and made anew for other ``hosts`` (names and addresses; those
    of loopback are always in). Raises :class:`~asynckubelet.errors.DaemonError` naming a
    file that cannot be written."""
    now = datetime.datetime.now(datetime.UTC)
    wanted = serving_hosts(hosts)
    try:
        ca = _load_pair(state, CA_CERT, CA_KEY, now=now)
        client = _kept_leaf(state, CLIENT_CERT, CLIENT_KEY, ca, now=now)
        server = _kept_leaf(state, SERVER_CERT, SERVER_KEY, ca, now=now)
        if server is not None and _read_meta(state).get("hosts") != wanted:
            server = None
        if ca is None:
            ca = _make_ca(now)
            _store(state, CA_CERT, CA_KEY, ca)
            logger.info("made the Kubernetes API's CA {}", state / PKI_DIR / CA_CERT)
        if client is None:
            client = _make_leaf(ca, now, common_name=CLIENT_USER, client=True)
            _store(state, CLIENT_CERT, CLIENT_KEY, client)
        if server is None:
            server = _make_leaf(ca, now, common_name="asynckubelet-apiserver", hosts=wanted)
            _store(state, SERVER_CERT, SERVER_KEY, server)
        renew = min(c.not_valid_after_utc for c in (ca[0], client[0], server[0])) - RENEW_BEFORE
        meta = {"hosts": wanted, "renew_after": int(renew.timestamp())}
        hostfs.write_file(state / PKI_DIR, META, json.dumps(meta).encode(), mode=KEY_MODE)
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


def serving_hosts(hosts: Iterable[str]) -> list[str]:
    """The names and addresses the serving certificate is for: loopback's, then ``hosts``."""
    found = ["localhost", "127.0.0.1", "::1", *(h.strip("[]") for h in hosts)]
    return [h for h in dict.fromkeys(found) if h and not _unspecified(h)]


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def load_current(
    state: Path, *, hosts: Iterable[str], now: float | None = None
) -> Credentials | None:
    """The credentials kept under ``state`` when they serve ``hosts`` as they are (None:
    something must be made), checked with the standard library only: the serving
    certificate was made for ``hosts``, no certificate is due for renewal, and a TLS
    handshake in memory between the two pairs succeeds, each verified against the CA."""
    meta = _read_meta(state)
    due = meta.get("renew_after")
    if meta.get("hosts") != serving_hosts(hosts) or not isinstance(due, int):
        return None
    if (time.time() if now is None else now) >= due:
        return None
    directory = state / PKI_DIR
    try:
        texts = [
            hostfs.read_file(directory, name, limit=MAX_PEM_BYTES)
            for name in (CA_CERT, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY)
        ]
    except OSError:
        return None
    ca, server_cert, server_key, client_cert, client_key = texts
    found = Credentials(
        ca_cert=ca,
        server_cert=server_cert,
        server_key=server_key,
        client_cert=client_cert,
        client_key=client_key,
        directory=directory,
    )
    return found if _pairs_agree(found) else None


def _pairs_agree(found: Credentials) -> bool:
    """Whether the serving and the client pair complete a handshake with each other,
    each side requiring the other's certificate to verify against the CA."""
    ca = found.ca_cert.decode("ascii", errors="replace")
    try:
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(*found.server_files)
        server.load_verify_locations(cadata=ca)
        server.verify_mode = ssl.CERT_REQUIRED
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.load_verify_locations(cadata=ca)
        client.load_cert_chain(found.directory / CLIENT_CERT, found.directory / CLIENT_KEY)
        client.check_hostname = False
    except (ssl.SSLError, OSError, ValueError):
        return False
    pipes = [ssl.MemoryBIO() for _ in range(4)]
    ends = [
        server.wrap_bio(pipes[0], pipes[1], server_side=True),
        client.wrap_bio(pipes[2], pipes[3], server_side=False),
    ]
    done = [False, False]
    for _ in range(20):
        for i, end in enumerate(ends):
            if done[i]:
                continue
            try:
                end.do_handshake()
                done[i] = True
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
            except (ssl.SSLError, OSError):
                return False
        pipes[2].write(pipes[1].read())
        pipes[0].write(pipes[3].read())
        if all(done):
            try:
                ends[0].read(1)
            except ssl.SSLWantReadError:
                return True
            except (ssl.SSLError, OSError):
                return False
    return False


async def credentials(state: Path, *, hosts: Sequence[str]) -> Credentials:
    """The credentials the API serves with: those kept when they serve (no
    ``cryptography`` in this process), else made by a process of their own."""
    found = await anyio.to_thread.run_sync(lambda: load_current(state, hosts=hosts))
    if found is not None:
        return found
    command = [sys.executable, "-m", __name__, str(state), *hosts]
    try:
        done = await anyio.run_process(
            command,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except OSError as e:
        raise errors.DaemonError(f"cannot make the API's credentials: {e}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise errors.DaemonError(lines[-1] if lines else "cannot make the API's credentials")
    found = await anyio.to_thread.run_sync(lambda: load_current(state, hosts=hosts))
    if found is None:
        raise errors.DaemonError(f"the API's credentials in {state / PKI_DIR} cannot be used")
    return found


def _read_meta(state: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(hostfs.read_file(state / PKI_DIR, META, limit=MAX_PEM_BYTES))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


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
        cert_pem = hostfs.read_file(directory, cert_name, limit=MAX_PEM_BYTES)
        key_pem = hostfs.read_file(directory, key_name, limit=MAX_PEM_BYTES)
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


def _kept_leaf(
    state: Path, cert_name: str, key_name: str, ca: _Pair | None, *, now: datetime.datetime
) -> _Pair | None:
    """A kept pair the CA ``ca`` signed (None: none such, or no CA kept)."""
    if ca is None:
        return None
    pair = _load_pair(state, cert_name, key_name, now=now)
    return pair if pair is not None and _signed_by(pair[0], ca[0]) else None


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
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def main(argv: Sequence[str]) -> int:
    """``python -m asynckubelet.api.kube.pki STATE_DIR [HOST...]``: make what the API's
    credentials lack (the daemon's helper; see the module's docstring)."""
    if not argv:
        sys.stderr.write("usage: python -m asynckubelet.api.kube.pki STATE_DIR [HOST...]\n")
        return 2
    try:
        ensure_credentials(Path(argv[0]), hosts=argv[1:])
    except errors.DaemonError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    return 0


__all__ = [
    "PKI_DIR",
    "Credentials",
    "credentials",
    "ensure_credentials",
    "fingerprint",
    "load_current",
    "serving_hosts",
]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
