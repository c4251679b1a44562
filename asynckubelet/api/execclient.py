"""``exec`` and ``attach`` from the command line through the pod's ``exec`` and ``attach``
subresources.

With a daemon running, ``asynckubelet exec`` asks the node's Kubernetes API on the state
dir's socket, as ``kubectl exec`` asks an API server: a WebSocket upgrade of ``GET
.../pods/{name}/exec`` speaking ``v5.channel.k8s.io`` (:mod:`asynckubelet.api.streaming`
serves it). Each binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3
the outcome (a ``Status``: ``Success``, or ``NonZeroExitCode`` with the exit code as a
cause), 4 the terminal's size (``{"Width", "Height"}``); 255 with the byte 0 ends stdin.
The session reads and writes as the engine's own exec session does
(:class:`~asynckubelet.docker.execs.ExecSession`), so the command line attaches a
terminal to either the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp

from asynckubelet import errors
from asynckubelet.api.client import quote

V5 = "v5.channel.k8s.io"
STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
CLOSE = 255
NON_ZERO_EXIT = "NonZeroExitCode"


class StreamSession:
    """A command running behind the ``exec`` subresource's WebSocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._outcome: dict[str, Any] | None = None
        self._ended = False
        self._sending: set[asyncio.Task[None]] = set()

    async def read(self) -> tuple[int, bytes] | None:
        """The next piece of output, ``(1 or 2, data)``; None once the stream ended."""
        while not self._ended:
            message = await self._ws.receive()
            if message.type is not aiohttp.WSMsgType.BINARY:
                if message.type in (aiohttp.WSMsgType.PING, aiohttp.WSMsgType.PONG):
                    continue
                self._ended = True
                break
            data: bytes = message.data
            channel, payload = (data[0], data[1:]) if data else (-1, b"")
            if channel in (STDOUT, STDERR) and payload:
                return channel, payload
            if channel == ERROR:
                with contextlib.suppress(ValueError):
                    found = json.loads(payload)
                    self._outcome = found if isinstance(found, dict) else None
        return None

    async def write(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._ws.send_bytes(bytes([STDIN]) + data)

    def close_input(self) -> None:
        """End the command's input (the close signal for channel 0)."""
        task = asyncio.get_running_loop().create_task(self._send(bytes([CLOSE, STDIN])))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._ws.send_bytes(data)

    async def resize(self, *, rows: int, columns: int) -> None:
        size = json.dumps({"Width": columns, "Height": rows}).encode()
        await self._send(bytes([RESIZE]) + size)

    async def running(self) -> bool:
        return not self._ended

    async def exit_code(self) -> int:
        """The command's exit code, from the outcome the node sent."""
        outcome = self._outcome
        if outcome is None:
            raise errors.PodError("the exec stream ended before the command did")
        if outcome.get("status") == "Success":
            return 0
        if outcome.get("reason") == NON_ZERO_EXIT:
            causes = (outcome.get("details") or {}).get("causes") or []
            for cause in causes:
                with contextlib.suppress(TypeError, ValueError):
                    return int(cause.get("message"))
        raise errors.PodError(str(outcome.get("message") or "the command could not be run"))


@contextlib.asynccontextmanager
async def exec_stream(
    socket_path: str | os.PathLike[str],
    namespace: str,
    name: str,
    *,
    container: str,
    command: Sequence[str],
    stdin: bool,
    tty: bool,
) -> AsyncIterator[StreamSession]:
    """``command`` running in the pod's ``container``, through the daemon listening on
    ``socket_path``; with ``tty`` its output is one stream (stdout), as a terminal's is."""
    query = [("container", container), *(("command", c) for c in command)]
    async with _stream(
        socket_path, namespace, name, "exec", query, stdin=stdin, tty=tty
    ) as session:
        yield session


@contextlib.asynccontextmanager
async def attach_stream(
    socket_path: str | os.PathLike[str],
    namespace: str,
    name: str,
    *,
    container: str,
    stdin: bool,
    tty: bool,
) -> AsyncIterator[StreamSession]:
    """The main process of the pod's ``container``, attached through the pod's ``attach``
    subresource (its outcome is the process's exit)."""
    query = [("container", container)]
    async with _stream(
        socket_path, namespace, name, "attach", query, stdin=stdin, tty=tty
    ) as session:
        yield session


@contextlib.asynccontextmanager
async def _stream(
    socket_path: str | os.PathLike[str],
    namespace: str,
    name: str,
    subresource: str,
    query: list[tuple[str, str]],
    *,
    stdin: bool,
    tty: bool,
) -> AsyncIterator[StreamSession]:
    query = [*query, ("stdout", "true")]
    query += [("stderr", "true")] if not tty else [("tty", "true")]
    query += [("stdin", "true")] if stdin else []
    url = f"http://localhost/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/{subresource}"
    connector = aiohttp.UnixConnector(path=os.fspath(socket_path))
    async with aiohttp.ClientSession(connector=connector) as http:
        try:
            ws = await http.ws_connect(url, params=query, protocols=(V5,), max_msg_size=0)
        except aiohttp.WSServerHandshakeError as e:
            raise errors.DaemonError(f"the node refused the {subresource}: {e.message}") from None
        except aiohttp.ClientError as e:
            raise errors.DaemonError(f"cannot reach the node daemon at {socket_path}: {e}") from e
        async with ws:
            yield StreamSession(ws)


__all__ = ["StreamSession", "attach_stream", "exec_stream"]
