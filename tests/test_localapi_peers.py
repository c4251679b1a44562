"""The local API serves only the daemon's own user and root, by the kernel's record of who
connected to its unix socket (``SO_PEERCRED``), whatever the socket's mode."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from asynckubelet import KubeletConfig, peercred
from asynckubelet.api.localapi import create_local_app
from asynckubelet.node import Kubelet, daemon
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

NOBODY = 65534


def _get(path: Path, target: str) -> tuple[int, dict[str, Any] | str]:
    """A bare HTTP/1.0 GET over the unix socket ``path``: status and body."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(f"GET {target} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    code = int(head.split()[1])
    try:
        return code, json.loads(body)
    except ValueError:
        return code, body.decode()


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start the local API of a node on a fake engine on the state dir's socket, with the
    given ``uids`` (None: the default); yields a starter returning the socket's path."""
    state = tmp_path / "state"
    state.mkdir()
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(),
    )
    async with node, anyio.create_task_group() as tg:

        async def start(uids: frozenset[int] | None = None, at: Path | None = None) -> Path:
            path = daemon.claim_socket(state) if at is None else at
            app = create_local_app(node, uids=uids)

            async def run(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                runner = web.AppRunner(app)
                await runner.setup()
                await web.UnixSite(runner, str(path)).start()
                task_status.started()
                try:
                    await anyio.sleep_forever()
                finally:
                    with anyio.CancelScope(shield=True):
                        await runner.cleanup()

            await tg.start(run)
            return path

        yield start
        tg.cancel_scope.cancel()


async def test_the_daemons_own_user_is_served(serve: Callable[..., Any]) -> None:
    path = await serve()
    code, body = await anyio.to_thread.run_sync(_get, path, "/api/v1/pods")
    assert code == 200
    assert isinstance(body, dict)
    assert body["kind"] == "PodList"


async def test_a_user_not_let_in_is_refused_with_a_status_naming_its_uid(
    serve: Callable[..., Any],
) -> None:
    path = await serve(frozenset({os.geteuid() + 1}))
    code, body = await anyio.to_thread.run_sync(_get, path, "/api/v1/pods")
    assert code == 403
    assert isinstance(body, dict)
    assert (body["reason"], body["message"]) == (
        "Forbidden",
        f"Forbidden: user ID {os.geteuid()} may not use this node's API",
    )


CLIENT = """
import socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.settimeout(10)
    sock.connect(sys.argv[1])
    sock.sendall(b"GET /api/v1/namespaces/default/secrets HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
sys.stdout.write(data.decode())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root")
async def test_another_local_user_is_refused_even_on_a_socket_made_world_writable(
    serve: Callable[..., Any], tmp_path: Path
) -> None:
    # The attack: the socket's directory and mode loosened (a bind mount, a chmod).
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no system python3 another user may run")
    folder = Path(tempfile.mkdtemp(prefix="akl-peer-"))
    try:
        os.chmod(folder, 0o755)  # noqa: S103  (another user must reach the socket)
        path = await serve(at=folder / "api.sock")
        os.chmod(path, 0o666)  # noqa: S103  (the attack: a socket whose mode was loosened)
        done = await anyio.run_process(
            [python, "-c", CLIENT, str(path)], user=NOBODY, group=NOBODY, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        head, _, body = done.stdout.decode().partition("\r\n\r\n")
        assert head.split()[1] == "403"
        assert json.loads(body)["message"] == (
            f"Forbidden: user ID {NOBODY} may not use this node's API"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_over_tcp_the_local_api_answers_401_unless_told_to_serve_anyone() -> None:
    node = Kubelet(KubeletConfig(node_name="n1", housekeeping_period=3600), docker=FakeDocker())
    async with node, TestClient(TestServer(create_local_app(node))) as client:
        answer = await client.get("/api/v1/pods")
        assert answer.status == 401
        assert (await answer.json())["reason"] == "Unauthorized"


def test_the_default_users_are_the_daemons_own_and_root() -> None:
    assert peercred.default_uids() == {os.geteuid(), 0}
