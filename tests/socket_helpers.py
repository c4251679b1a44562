"""A unix socket that answers HTTP requests in a thread of its own, for the client's tests."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

Answer = Callable[[socket.socket, bytes, bytes], None]
"""``(connection, request head, what came after it)``: answers one request."""


@contextlib.contextmanager
def unix_server(path: Path, answer: Answer) -> Iterator[Path]:
    """Serve ``path`` until the block ends, one connection at a time: each request's head
    is read, then ``answer`` writes to the connection (a connection closed before a whole
    head, as a check that a daemon listens makes, is let go)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        break
                    data += more
                if b"\r\n\r\n" in data:
                    head, _, rest = data.partition(b"\r\n\r\n")
                    answer(conn, head, rest)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield path
    finally:
        server.close()
