"""A private image registry on 127.0.0.1 for pull tests: Debian's ``docker-registry``.

It requires basic auth (htpasswd, bcrypt), so tests can tell an authorised pull from an
unauthorised one. Docker treats registries on 127.0.0.0/8 as insecure by default, so no
TLS is needed. Nothing leaves the machine.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest

USER = "akltest"
PASSWORD = "s3cret-pull"


@dataclass(frozen=True)
class Registry:
    host: str
    """``127.0.0.1:<port>``."""
    user: str
    password: str

    def auth(self) -> dict[str, str]:
        return {"username": self.user, "password": self.password, "serveraddress": self.host}

    def dockerconfigjson(self, *, password: str | None = None) -> str:
        secret = f"{self.user}:{password or self.password}"
        return json.dumps(
            {"auths": {self.host: {"auth": base64.b64encode(secret.encode()).decode()}}}
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=0.5):
            return True
    except urllib.error.HTTPError as e:
        e.close()
        return e.code == 401
    except OSError:
        return False


@pytest.fixture(scope="session")
def registry() -> Iterator[Registry]:
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("Debian's docker-registry is not installed")
    root = Path(tempfile.mkdtemp(prefix="akl-registry-"))
    port = _free_port()
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (root / "htpasswd").write_text(f"{USER}:{hashed}\n")
    (root / "config.yml").write_text(
        json.dumps(
            {
                "version": 0.1,
                "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
                "http": {"addr": f"127.0.0.1:{port}"},
                "auth": {"htpasswd": {"realm": "akltest", "path": str(root / "htpasswd")}},
            }
        )
    )
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen(
        [binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 20
        while not _answers(f"http://127.0.0.1:{port}/v2/"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not start: {(root / 'registry.log').read_text()}")
            time.sleep(0.1)
        yield Registry(host=f"127.0.0.1:{port}", user=USER, password=PASSWORD)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)
