"""Throw-away TLS material for a Docker daemon reached over ``tcp://`` (shape B).

The layout is the ``docker:dind`` image's under its ``DOCKER_TLS_CERTDIR``: ``server/`` holds
``ca.pem``, ``cert.pem`` and ``key.pem`` (dockerd ``--tlsverify --tlscacert --tlscert
--tlskey``); ``client/``, the folder a CI job uses as ``DOCKER_CERT_PATH``, holds ``ca.pem``,
``cert.pem`` and ``key.pem``, as the Docker CLI reads them. Made with the ``openssl``
command, which every Debian machine has, valid for one day.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA's certificate and key in ``folder``."""

    folder: Path

    @property
    def cert(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def key(self) -> Path:
        return self.folder / "ca-key.pem"


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is missing (Debian: apt-get install openssl)")
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_ca(folder: Path, *, name: str) -> CertificateAuthority:
    """A new self-signed CA in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(folder)
    _openssl(
        "req", "-x509", *_KEY, "-days", "1", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", str(ca.key), "-out", str(ca.cert),
        cwd=folder,
    )  # fmt: skip
    return ca


def issue(
    ca: CertificateAuthority, *, folder: Path, cert: str, key: str, name: str, server_ip: str | None
) -> None:
    """Issue a certificate signed by ``ca`` into ``folder/cert`` and ``folder/key``, with
    ``ca.pem`` beside them: a server certificate for ``server_ip``, else a client one."""
    folder.mkdir(parents=True, exist_ok=True)
    csr = folder / f"{cert}.csr"
    ext = folder / f"{cert}.ext"
    if server_ip is not None:
        ext.write_text(f"subjectAltName=IP:{server_ip}\nextendedKeyUsage=serverAuth\n")
    else:
        ext.write_text("extendedKeyUsage=clientAuth\n")
    _openssl(
        "req", "-new", *_KEY, "-subj", f"/CN={name}", "-keyout", str(folder / key),
        "-out", str(csr), cwd=folder,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-CAserial", str(folder / "ca.srl"), "-days", "1",
        "-extfile", str(ext), "-out", str(folder / cert),
        cwd=folder,
    )  # fmt: skip
    for leftover in (csr, ext, folder / "ca.srl"):
        leftover.unlink(missing_ok=True)
    if ca.folder != folder:
        shutil.copyfile(ca.cert, folder / "ca.pem")


def server_material(ca: CertificateAuthority, *, folder: Path, ip: str) -> Path:
    """``ca.pem``, ``cert.pem``, ``key.pem`` for a daemon at ``ip`` (a ``server/`` folder)."""
    issue(ca, folder=folder, cert="cert.pem", key="key.pem", name="dind", server_ip=ip)
    return folder


def client_material(ca: CertificateAuthority, *, folder: Path) -> Path:
    """A ``DOCKER_CERT_PATH`` folder: ``ca.pem``, ``cert.pem``, ``key.pem`` signed by ``ca``."""
    issue(ca, folder=folder, cert="cert.pem", key="key.pem", name="client", server_ip=None)
    return folder
