"""Interactive exec sessions: a command in a container with its stdin, output and terminal.

``asynckubelet exec -it`` needs what ``exec_run`` cannot give: the command's input fed
while it runs, its output as it comes, a pseudo-terminal that follows the user's window
size, and the exit code at the end. Docker's attach stream is hijacked HTTP; aiodocker's
``Stream`` carries it, and closing only our writing half tells the command its input ended.
``kubectl attach`` is the same session on a container's main process, without an exit
code of its own (the process goes on when the client leaves).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiodocker
import aiohttp
import anyio

from asynckubelet import errors
from asynckubelet.docker.api import DockerAPI
from asynckubelet.docker.client import DockerClient
from asynckubelet.docker.errors import map_error


class ExecSession:
    """A running exec: read its output, write its input, resize its terminal."""

    def __init__(self, exec_: aiodocker.execs.Exec | None, stream: aiodocker.stream.Stream) -> None:
        self._exec = exec_
        self._stream = stream

    async def read(self) -> tuple[int, bytes] | None:
        """``(1 stdout | 2 stderr, data)``, or None at the end of the output."""
        try:
            message = await self._stream.read_out()
        except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
            raise map_error(e, what="exec output") from e
        if message is None:
            return None
        return int(message.stream), bytes(message.data)

    async def write(self, data: bytes) -> None:
        try:
            await self._stream.write_in(data)
        except (aiohttp.ClientError, OSError, RuntimeError) as e:
            raise map_error(OSError(str(e)), what="exec input") from e

    def close_input(self) -> None:
        """End the command's stdin, keep reading its output."""
        resp = getattr(self._stream, "_resp", None)
        connection = getattr(resp, "connection", None)
        transport = getattr(connection, "transport", None)
        if transport is not None and transport.can_write_eof():
            transport.write_eof()

    async def resize(self, *, rows: int, columns: int) -> None:
        if self._exec is not None:
            with suppress(aiodocker.DockerError):
                await self._exec.resize(h=rows, w=columns)

    async def running(self) -> bool:
        if self._exec is None:
            return True
        info = await self._exec.inspect()
        return bool(info.get("Running")) or info.get("ExitCode") is None

    async def exit_code(self) -> int:
        """The command's exit code, once Docker reports it ended (-1 if it never does;
        0 for an attach, which leaves the process running)."""
        if self._exec is None:
            return 0
        for _ in range(500):
            info = await self._exec.inspect()
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            await anyio.sleep(0.01)
        return -1


@asynccontextmanager
async def exec_session(
    client: DockerAPI,
    container_id: str,
    cmd: Sequence[str],
    *,
    stdin: bool,
    tty: bool,
    env: dict[str, str] | None = None,
) -> AsyncIterator[ExecSession]:
    """Start ``cmd`` in the container, attached; the session closes on exit.

    The attach stream is hijacked HTTP, which only the real client carries."""
    if not isinstance(client, DockerClient):
        raise errors.RuntimeUnavailable("an interactive exec needs a connection to a Docker engine")
    docker = client._connect()
    try:
        container = docker.containers.container(container_id)
        exec_ = await container.exec(
            list(cmd), stdout=True, stderr=True, stdin=stdin, tty=tty, environment=env
        )
        stream = exec_.start(detach=False)
        await stream.__aenter__()
    except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
        raise map_error(e, what=f"exec in container {container_id[:12]}") from e
    try:
        yield ExecSession(exec_, stream)
    finally:
        with anyio.CancelScope(shield=True):
            await stream.close()


ATTACH_DRAIN = 0.5
"""Seconds an attach to a process that had ended by the time it was made still reads."""


class AttachSession(ExecSession):
    """An attach to a container's main process; its terminal is the container's."""

    def __init__(self, container: aiodocker.containers.DockerContainer, stream: Any) -> None:
        super().__init__(None, stream)
        self._container = container
        self.ended = False
        """The process had ended when the attach was made: the engine would hold such an
        attach open until the container starts again, so its output ends at once."""

    async def read(self) -> tuple[int, bytes] | None:
        if not self.ended:
            return await super().read()
        with anyio.move_on_after(ATTACH_DRAIN):
            return await super().read()
        return None

    async def resize(self, *, rows: int, columns: int) -> None:
        with suppress(aiodocker.DockerError):
            await self._container.resize(h=rows, w=columns)


@asynccontextmanager
async def attach_session(
    client: DockerAPI, container_id: str, *, stdin: bool
) -> AsyncIterator[ExecSession]:
    """Attach to the container's main process (its output from now on, and its input
    when ``stdin``); the process goes on when the session closes."""
    if not isinstance(client, DockerClient):
        raise errors.RuntimeUnavailable("an attach needs a connection to a Docker engine")
    docker = client._connect()
    try:
        container = docker.containers.container(container_id)
        stream = container.attach(stdout=True, stderr=True, stdin=stdin)
        await stream.__aenter__()
    except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
        raise map_error(e, what=f"attach to container {container_id[:12]}") from e
    session = AttachSession(container, stream)
    try:
        # A process that ended between the caller's look and the attach (an ephemeral
        # container running `true`) leaves an attach the engine never ends.
        info = await container.show()
        session.ended = not (info.get("State") or {}).get("Running")
    except (aiodocker.DockerError, aiohttp.ClientError, OSError):
        session.ended = True
    try:
        yield session
    finally:
        with anyio.CancelScope(shield=True):
            await stream.close()
