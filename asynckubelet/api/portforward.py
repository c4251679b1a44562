"""``port-forward`` from the command line through the pod's ``portforward`` subresource.

As kubectl 1.31+ does, the client opens one WebSocket to ``GET
.../pods/{name}/portforward`` on the daemon's socket speaking
``SPDY/3.1+portforward.k8s.io`` (SPDY frames in binary messages; the node's side is
:func:`asynckubelet.api.upgrades.serve_port_forward`). Each forwarded connection is a
pair of streams with one ``requestID`` and the pod's ``port``: ``error`` (the node writes
why the connection failed, if it did) and ``data`` (the bytes, both ways).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet.api import spdy
from asynckubelet.api.client import quote

TUNNELED_PORTFORWARD = "SPDY/3.1+portforward.k8s.io"


@dataclass
class Tunnel:
    """One port-forward session to a pod: a pair of streams per connection."""

    session: spdy.Session
    requests: int = 0

    async def forward(self, connection: anyio.abc.ByteStream, port: int) -> str:
        """Copy ``connection`` to the pod's ``port`` and back until either side ends; the
        node's error for this connection ("" when none)."""
        request = str(self.requests)
        self.requests += 1
        headers = {"port": str(port), "requestID": request}
        error = await self.session.open_stream({**headers, "streamType": "error"})
        data = await self.session.open_stream({**headers, "streamType": "data"})
        await error.close()
        problem = b""

        async def read_error() -> None:
            nonlocal problem
            problem = await error.read_all(64 * 1024)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_error)

            async def local_to_pod() -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    while True:
                        await data.write(await connection.receive())
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await data.close()

            tg.start_soon(local_to_pod)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                while chunk := await data.read():
                    await connection.send(chunk)
            tg.cancel_scope.cancel()
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await data.reset()
        return problem.decode(errors="replace")


@contextlib.asynccontextmanager
async def port_forward_tunnel(
    socket_path: str | os.PathLike[str], namespace: str, name: str
) -> AsyncIterator[Tunnel]:
    """A port-forward session to pod ``namespace/name`` through the daemon on
    ``socket_path``; the body's cancel scope is cancelled when the node ends the session."""
    url = f"http://localhost/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/portforward"
    connector = aiohttp.UnixConnector(path=os.fspath(socket_path))
    async with aiohttp.ClientSession(connector=connector) as http:
        try:
            ws = await http.ws_connect(url, protocols=(TUNNELED_PORTFORWARD,), max_msg_size=0)
        except aiohttp.WSServerHandshakeError as e:
            raise errors.DaemonError(f"the node refused the port forwarding: {e.message}") from None
        except aiohttp.ClientError as e:
            raise errors.DaemonError(f"cannot reach the node daemon at {socket_path}: {e}") from e
        async with ws:

            async def write(data: bytes) -> None:
                if ws.closed:
                    raise anyio.BrokenResourceError("connection closed")
                await ws.send_bytes(data)

            session = spdy.Session(write, on_stream=lambda stream: None)
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    try:
                        async for message in ws:
                            if message.type != aiohttp.WSMsgType.BINARY:
                                break
                            await session.feed(message.data)
                    except spdy.ProtocolError:
                        pass
                    finally:
                        session.connection_lost()

                tg.start_soon(read)
                try:
                    yield Tunnel(session)
                finally:
                    tg.cancel_scope.cancel()
                    session.release()


__all__ = ["TUNNELED_PORTFORWARD", "Tunnel", "port_forward_tunnel"]
