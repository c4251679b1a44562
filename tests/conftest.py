import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from socket_helpers import unix_server

from asynckubelet import _logging
from asynckubelet.docker import engine
from asynckubelet.node import daemon

settings.register_profile("fuzz")
"""``pytest tests --hypothesis-profile=fuzz``: the property tests that bound their example
count for the unit suite run their whole count under this profile."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_engine_is_ever_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests never start a Docker engine: a command that would start the project's
    own dockerd fails the test instead (a test of that path puts its own fake here)."""

    def refuse() -> Callable[[], None]:
        pytest.fail("a unit test reached engine.own_engine(): it would start a real dockerd")

    monkeypatch.setattr(engine, "own_engine", refuse)


@pytest.fixture(autouse=True)
def priorities_set(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The CPU priorities a command asked for: unit tests leave the test process's own
    priority as it is (``set_priority`` itself is tested in a process of its own)."""
    asked: list[int] = []

    def record(nice: int) -> list[str]:
        asked.append(nice)
        return []

    monkeypatch.setattr(daemon, "set_priority", record)
    return asked


@pytest.fixture(autouse=True)
def _the_test_process_keeps_its_interpreter_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[None]:
    """A ``serve`` a test runs in this process leaves its allocator as it is (the arenas'
    limit is tested in processes of their own) and gives its thread switch interval back;
    a command's log level does not outlive its test."""
    monkeypatch.setattr(daemon, "limit_malloc_arenas", lambda: False)
    interval = sys.getswitchinterval()
    yield
    sys.setswitchinterval(interval)
    _logging.set_threshold(None)


@pytest.fixture
def answering(tmp_path: Path) -> Iterator[tuple[Path, list[bytes], list[bytes]]]:
    """A unix socket, ``api.sock`` in the test's folder, that answers each request with
    the next canned answer and records what each request sent (a connection closed
    without one, as a check that a daemon listens makes, is let go)."""
    answers: list[bytes] = []
    requests: list[bytes] = []

    def answer(conn: socket.socket, head: bytes, rest: bytes) -> None:
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(rest) < length:
            rest += conn.recv(65536)
        requests.append(head + b"\r\n\r\n" + rest)
        conn.sendall(answers.pop(0))

    with unix_server(tmp_path / "api.sock", answer) as path:
        yield path, answers, requests
