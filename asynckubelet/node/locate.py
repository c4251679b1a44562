"""Where a node daemon is found: its state dir, its socket, whether it answers.

The part of :mod:`asynckubelet.node.daemon` a client needs before it asks anything, kept
apart so that the shortest commands (``get`` through a running daemon) load nothing more
than the standard library's ``os`` and ``socket`` for it (:func:`default_state_dir_path`
and :func:`socket_answers` take and give plain strings; ``pathlib`` is for the rest).
"""

from __future__ import annotations

import os
import socket

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

SOCKET_NAME = "api.sock"
API_GROUP = "local.asynckubelet"
"""The API group of the node's own resource (``/apis/local.asynckubelet/v1/applies``)."""


def default_state_dir() -> Path:
    """``/var/lib/asynckubelet`` for root, else ``$XDG_STATE_HOME/asynckubelet``."""
    from pathlib import Path

    return Path(default_state_dir_path())


def default_state_dir_path() -> str:
    """:func:`default_state_dir` as a string, without ``pathlib``."""
    if os.geteuid() == 0:
        return "/var/lib/asynckubelet"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "asynckubelet")


def socket_path(state: Path) -> Path:
    return state / SOCKET_NAME


def socket_answers(path: str | os.PathLike[str]) -> bool:
    """Whether a process listens on the unix socket ``path`` (a daemon that was killed
    leaves its socket file, and connecting to it is refused)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True
    return True


__all__ = [
    "API_GROUP",
    "SOCKET_NAME",
    "default_state_dir",
    "default_state_dir_path",
    "socket_answers",
    "socket_path",
]
