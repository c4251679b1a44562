from collections.abc import Callable

import pytest

from asynckubelet.docker import engine


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
