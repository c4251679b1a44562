"""Which side of the node API answers: decided once, by whether a daemon answers.

A running ``serve`` is the node's one truth: its socket in the state dir
(:mod:`asynckubelet.node.daemon`) is found through the state dir alone, and when it
answers every request goes there (:class:`~asynckubelet.api.remote.RemoteNode`). Only
when none does is the node read and acted on in this process
(:class:`~asynckubelet.api.inprocess.InProcessNode`). The in-process side is imported
only then: asking a daemon loads no event loop and no Docker client.
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from asynckubelet import errors

if TYPE_CHECKING:
    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.protocol import NodeAPI

PROBE_TIMEOUT = 5.0


def find_daemon(state: Path) -> NodeClient | None:
    """The daemon of ``state``, or None when none answers on its socket; a socket this
    user may not use is a :class:`~asynckubelet.errors.DaemonError` naming it."""
    from asynckubelet.api.client import NodeClient
    from asynckubelet.node.locate import SOCKET_NAME

    path = state / SOCKET_NAME
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(PROBE_TIMEOUT)
        try:
            s.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            return None
        except PermissionError:
            raise errors.DaemonError(
                f"cannot use the node daemon's socket {path}: permission denied (it is open "
                "to the daemon's own user only)"
            ) from None
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ECONNREFUSED):
                return None
            raise errors.DaemonError(
                f"cannot reach the node daemon at {path}: {e.strerror or e}"
            ) from None
    return NodeClient(path)


def connect(*, state: Path, node_name: str, docker_host: str | None) -> NodeAPI:
    """The node of ``state``: its daemon when one answers, else the node read in this
    process (``node_name`` and ``docker_host`` then say which node, on which engine)."""
    client = find_daemon(state)
    if client is not None:
        from asynckubelet.api.remote import RemoteNode

        return RemoteNode(client, docker_host=docker_host)
    from asynckubelet.api.inprocess import InProcessNode

    return InProcessNode(state=state, node_name=node_name, docker_host=docker_host)
