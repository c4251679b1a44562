"""Who is on the other end of the local API's unix socket, as the kernel says.

The local API serves everything a user of the node can do (pod specs with their
environment, Secrets by name, logs, apply and delete), so it authenticates each connection
by the peer credentials the kernel records at ``connect()`` (``SO_PEERCRED``), which no
client can forge, and authorizes only the daemon's own user and root. The socket's mode
(0600) already keeps others out; this check holds even where a directory or mode was
loosened, or the socket was reached through a bind mount.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from aiohttp import web

from asynckubelet._logging import logger

_UCRED = struct.Struct("3i")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Refusal = Callable[[int, str], web.StreamResponse]


def peer_uid(transport: Any) -> int | None:
    """The user ID of the process that connected over the unix socket ``transport``
    carries; None when it is not a unix socket (or the kernel does not say)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError:
        return None
    _, uid, _ = _UCRED.unpack(raw)
    return int(uid)


def default_uids() -> frozenset[int]:
    """The daemon's own user and root."""
    return frozenset({os.geteuid(), 0})


def only_uids(uids: Collection[int], *, refuse: Refusal) -> Callable[..., Any]:
    """An aiohttp middleware answering ``refuse(401 or 403, message)`` unless the request
    came over a unix socket from one of ``uids``."""
    allowed = frozenset(uids)

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        uid = peer_uid(request.transport)
        if uid is None:
            return refuse(401, "Unauthorized: the local API answers only on its unix socket")
        if uid not in allowed:
            logger.warning("local API: refused a request of uid {} for {}", uid, request.path)
            return refuse(403, f"Forbidden: user ID {uid} may not use this node's API")
        return await handler(request)

    return check


__all__ = ["default_uids", "only_uids", "peer_uid"]
