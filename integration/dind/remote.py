"""A Docker daemon the agent cannot enter: a DinD container reached only over TLS (shape B).

This is the GitLab CI shape: the job talks to a ``docker:dind`` service over
``tcp://<address>:2376`` with ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH``, and shares no
namespace with it. :func:`tls_daemon` builds the image when missing (``build.sh``), puts the
container on a user-defined bridge network of its own (the development engine has no
default bridge), issues a server certificate for the address the container got and a client
certificate from the same CA, in ``docker:dind``'s layout (``DOCKER_TLS_CERTDIR=/certs``,
``/certs/server``, and ``/certs/client`` as the client's ``DOCKER_CERT_PATH``), waits until
the daemon answers over TLS, and on the way out removes the container, its anonymous
volumes, the network and the certificates, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import EngineTLS
from integration.dind import tls

HERE = Path(__file__).resolve().parent
PORT = 2376


@dataclass(frozen=True)
class RemoteDaemon:
    """A running TLS-only daemon: its address and a ``DOCKER_CERT_PATH`` that it trusts."""

    container: str
    network: str
    ip: str
    cert_path: Path
    ca: tls.CertificateAuthority

    @property
    def url(self) -> str:
        return f"tcp://{self.ip}:{PORT}"

    @property
    def tls(self) -> EngineTLS:
        return EngineTLS(verify=True, cert_path=self.cert_path)

    def environment(self) -> dict[str, str]:
        """What a client process needs, the Docker CLI's way."""
        return {
            "DOCKER_HOST": self.url,
            "DOCKER_TLS_VERIFY": "1",
            "DOCKER_CERT_PATH": str(self.cert_path),
        }


def _docker(*args: str, engine: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["docker", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_HOST": engine},
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def build_image(*, engine: str) -> str:
    """The DinD image's reference, built first when missing (about a minute)."""
    proc = subprocess.run(
        [str(HERE / "build.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_HOST": engine},
        timeout=1200,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building the DinD image failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def run_flags(image: str, *, engine: str) -> list[str]:
    """``docker run`` flags for a DinD container on this host (``docker-flags.sh``)."""
    proc = subprocess.run(
        [str(HERE / "docker-flags.sh"), image],
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_HOST": engine},
        timeout=120,
        check=True,
    )
    return proc.stdout.splitlines()


def _answers(daemon: RemoteDaemon) -> bool:
    async def ping() -> bool:
        async with DockerClient(url=daemon.url, tls=daemon.tls, retry_attempts=1) as client:
            return await client.ping()

    return anyio.run(ping)


@contextlib.contextmanager
def tls_daemon(*, engine: str, name: str, labels: dict[str, str]) -> Iterator[RemoteDaemon]:
    """Start a TLS-only DinD daemon called ``name`` on the engine at ``engine``."""
    image = build_image(engine=engine)
    flags = run_flags(image, engine=engine)
    label_args = [f"--label={k}={v}" for k, v in labels.items()]
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    certs = work / "certs"
    (certs / "server").mkdir(parents=True)
    try:
        _docker("network", "create", *label_args, name, engine=engine)
        _docker(
            "run", "--detach", "--name", name, *label_args, *flags,
            "--network", name, "--volume", f"{certs}:/certs:ro",
            "--env", "DOCKER_TLS_CERTDIR=/certs", image,
            engine=engine,
        )  # fmt: skip
        info = json.loads(_docker("inspect", name, engine=engine))[0]
        ip = info["NetworkSettings"]["Networks"][name]["IPAddress"]
        ca = tls.make_ca(work / "ca", name=f"{name}-ca")
        staged = tls.server_material(ca, folder=work / "server-staged", ip=ip)
        for file in ("ca.pem", "key.pem", "cert.pem"):
            os.replace(staged / file, certs / "server" / file)
        daemon = RemoteDaemon(
            container=name,
            network=name,
            ip=ip,
            cert_path=tls.client_material(ca, folder=certs / "client"),
            ca=ca,
        )
        deadline = time.monotonic() + 120
        while not _answers(daemon):
            state = json.loads(_docker("inspect", name, engine=engine))[0]["State"]
            if not state["Running"] or time.monotonic() > deadline:
                tail = subprocess.run(
                    ["docker", "logs", "--tail", "40", name],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "DOCKER_HOST": engine},
                    check=False,
                )
                logs = tail.stdout + tail.stderr
                raise RuntimeError(f"the DinD daemon {name} did not answer over TLS:\n{logs}")
            time.sleep(0.2)
        yield daemon
    finally:
        _docker("rm", "--force", "--volumes", name, engine=engine, check=False)
        _docker("network", "rm", name, engine=engine, check=False)
        shutil.rmtree(work, ignore_errors=True)
