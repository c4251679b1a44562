"""The command line's side of a node app a test serves: its socket, asked as ``delete``
asks it (:class:`~asynckubelet.api.remote.RemoteNode` over the standard library's
client), from a worker thread while the app goes on answering."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
from aiohttp import web
from aiohttp.test_utils import TestClient

from asynckubelet.api.client import NodeClient
from asynckubelet.api.remote import RemoteNode


async def delete_remotely(
    client: TestClient[Any, Any], objects: Sequence[Mapping[str, str]], **options: Any
) -> list[dict[str, str]]:
    """``RemoteNode.delete(objects, **options)`` against the app ``client`` serves, on a
    unix socket opened beside its TCP site for the call."""
    runner = client.server.runner
    assert runner is not None
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "api.sock"
        site = web.UnixSite(runner, str(path))
        await site.start()
        try:
            remote = RemoteNode(NodeClient(path))
            call = functools.partial(remote.delete, objects, **options)
            return await anyio.to_thread.run_sync(call)
        finally:
            await site.stop()


__all__ = ["delete_remotely"]
