"""The node's local API as a benchmark reads it: the state dir's unix socket, where pod
specs and statuses are served (the TCP endpoint serves only health and metrics)."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(str(self.socket_path))
        self.sock = sock


def api_get(state: Path, path: str, *, timeout: float = 30) -> str:
    """The body of a GET on the local API of the node whose state dir is ``state``;
    OSError while the daemon does not answer yet."""
    conn = _UnixConnection(state / "api.sock", timeout)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read().decode()
        if answer.status != 200:
            raise OSError(f"GET {path}: {answer.status} {body[:200]}")
        return body
    finally:
        conn.close()


def ready_pods(state: Path) -> int:
    """How many of the node's pods have the Ready condition true."""
    items = json.loads(api_get(state, "/api/v1/pods"))["items"]
    return sum(
        1
        for p in items
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    )
