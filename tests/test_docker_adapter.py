"""The Docker adapter's error mapping and retry rules, without a daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import anyio
import anyio.abc
import pytest
from socket_helpers import unix_server

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.errors import is_transient, map_error

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (aiodocker.DockerError(900, "Cannot connect to Docker Engine"), errors.RuntimeUnavailable),
        (aiodocker.DockerError(404, "No such container: x"), errors.NotFound),
        (aiodocker.DockerError(404, "No such image: busybox:1"), errors.ImageNotFound),
        (aiodocker.DockerError(409, "Conflict. The container name is in use"), errors.Conflict),
        (aiodocker.DockerError(503, "service unavailable"), errors.ServerBusy),
        (aiodocker.DockerError(502, "bad gateway"), errors.ServerBusy),
        (aiodocker.DockerError(500, "driver failed: device or resource busy"), errors.ServerBusy),
        (aiodocker.DockerError(500, "OCI runtime create failed"), errors.DockerAPIError),
        (aiodocker.DockerError(400, "invalid reference format"), errors.DockerAPIError),
        (aiohttp.ServerDisconnectedError(), errors.RuntimeUnavailable),
        (ConnectionResetError(104, "Connection reset by peer"), errors.RuntimeUnavailable),
        (TimeoutError(), errors.RuntimeUnavailable),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, type) else repr(v)[:40],
)
def test_docker_failures_map_to_the_exception_tree(raised: BaseException, expected: type) -> None:
    mapped = map_error(raised, what="container x")
    assert type(mapped) is expected
    assert str(mapped).startswith("container x: ")


def test_a_plain_500_is_not_mistaken_for_a_busy_daemon() -> None:
    mapped = map_error(aiodocker.DockerError(500, "OCI runtime create failed"))
    assert not isinstance(mapped, errors.ServerBusy)
    assert not is_transient(mapped)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (errors.RuntimeUnavailable("down"), True),
        (errors.ServerBusy("busy", status=503), True),
        (errors.NotFound("gone"), False),
        (errors.Conflict("in use"), False),
        (errors.DockerAPIError("bad", status=400), False),
        (errors.ImagePullError("nope"), False),
    ],
)
def test_only_unavailable_and_busy_are_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def _client(attempts: int = 4) -> DockerClient:
    return DockerClient(
        url="unix:///nonexistent/docker.sock",
        retry_attempts=attempts,
        retry_max_delay=5.0,
        retry_initial_wait=0.001,
    )


class _Failing:
    """A call that raises the given errors in turn, then returns ``"ok"``."""

    def __init__(self, *raises: BaseException) -> None:
        self.raises = list(raises)
        self.calls = 0

    async def __call__(self, _docker: Any) -> str:
        self.calls += 1
        if self.raises:
            raise self.raises.pop(0)
        return "ok"


async def test_transient_failures_are_retried_until_success() -> None:
    call = _Failing(aiodocker.DockerError(900, "down"), aiodocker.DockerError(503, "busy"))
    async with _client() as client:
        assert await client._call("thing", call) == "ok"
    assert call.calls == 3


async def test_retries_are_bounded_and_the_last_error_is_raised() -> None:
    call = _Failing(*[aiodocker.DockerError(900, "down")] * 10)
    async with _client(attempts=3) as client:
        with pytest.raises(errors.RuntimeUnavailable):
            await client._call("thing", call)
    assert call.calls == 3


@pytest.mark.parametrize(
    "raised",
    [
        aiodocker.DockerError(404, "No such container"),
        aiodocker.DockerError(409, "name in use"),
        aiodocker.DockerError(400, "bad request"),
        aiodocker.DockerError(500, "OCI runtime create failed"),
    ],
    ids=["not found", "conflict", "bad request", "plain 500"],
)
async def test_permanent_failures_are_not_retried(raised: BaseException) -> None:
    call = _Failing(raised)
    async with _client() as client:
        with pytest.raises(errors.DockerError):
            await client._call("thing", call)
    assert call.calls == 1


class _FakeContainers:
    """aiodocker's ``containers`` namespace whose first create is answered but lost."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.creates = 0

    async def create(self, *, config: Any, name: str) -> Any:
        self.creates += 1
        if self.creates == 1:
            raise aiodocker.DockerError(900, "connection reset after the daemon created it")
        raise aiodocker.DockerError(409, f'Conflict. The name "/{name}" is already in use')

    def container(self, name: str) -> Any:
        labels = self.labels

        class _C:
            async def show(self) -> dict[str, Any]:
                return {"Id": "abc123", "Config": {"Labels": labels}}

        return _C()


async def test_a_retried_create_returns_the_container_its_lost_first_attempt_made() -> None:
    labels = {"io.asynckubelet.node": "n1"}
    async with _client() as client:
        docker = client._connect()
        fake = _FakeContainers(labels)
        docker.containers = fake  # type: ignore[assignment]
        cid = await client.create_container({"Image": "x", "Labels": labels}, name="akl_a")
    assert cid == "abc123"
    assert fake.creates == 2


async def test_a_create_conflict_with_someone_elses_container_is_an_error() -> None:
    async with _client() as client:
        docker = client._connect()
        docker.containers = _FakeContainers({"other": "owner"})  # type: ignore[assignment]
        with pytest.raises(errors.Conflict):
            await client.create_container(
                {"Image": "x", "Labels": {"io.asynckubelet.node": "n1"}}, name="akl_a"
            )


async def test_an_unreachable_daemon_is_reported_as_unavailable_and_ping_is_false() -> None:
    async with _client(attempts=2) as client:
        assert await client.ping() is False
        with pytest.raises(errors.RuntimeUnavailable):
            await client.version()


async def test_a_daemon_that_never_answers_is_unavailable_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "wedged.sock"
    accepted: list[object] = []

    async def hold(conn: anyio.abc.SocketStream) -> None:
        accepted.append(conn)
        async with conn:
            await anyio.sleep_forever()

    listener = await anyio.create_unix_listener(path)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        client = DockerClient(
            url=f"unix://{path}",
            retry_attempts=2,
            retry_initial_wait=0.001,
            request_timeout=0.3,
        )
        async with client:
            with anyio.fail_after(10), pytest.raises(errors.RuntimeUnavailable):
                await client.version()
        tg.cancel_scope.cancel()
    assert len(accepted) == 2


def _engine_answering(requests: list[str], *, api_version: str | None) -> Any:
    """An engine that answers ``/_ping`` (with ``api_version`` in its ``Api-Version``
    header, or none), ``/version`` and container listings, and records each request line."""

    def answer(conn: Any, head: bytes, rest: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode()
        requests.append(line)
        path = line.split()[1]
        headers = [f"Api-Version: {api_version}"] if api_version else []
        if path == "/_ping":
            body = b"OK"
        elif path.endswith("/version"):
            body = b'{"ApiVersion": "1.41", "Version": "20.10.24"}'
        else:
            body = b"[]"
        kind = "text/plain" if body == b"OK" else "application/json"
        head_out = [
            "HTTP/1.1 200 OK",
            f"Content-Type: {kind}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *headers,
        ]
        conn.sendall(("\r\n".join(head_out) + "\r\n\r\n").encode() + body)

    return answer


async def test_a_ping_settles_the_api_version_so_no_call_asks_for_the_engines_version(
    tmp_path: Path,
) -> None:

    requests: list[str] = []
    with unix_server(tmp_path / "d.sock", _engine_answering(requests, api_version="1.41")) as path:
        async with DockerClient(url=f"unix://{path}") as client:
            assert await client.ping() is True
            assert await client.list_containers() == []
    paths = [r.split()[1] for r in requests]
    assert paths[0] == "/_ping"
    assert paths[1].startswith("/v1.41/containers/json")
    assert not [p for p in paths if p.endswith("/version")]


async def test_an_engine_whose_ping_names_no_api_version_is_asked_for_it(tmp_path: Path) -> None:

    requests: list[str] = []
    with unix_server(tmp_path / "d.sock", _engine_answering(requests, api_version=None)) as path:
        async with DockerClient(url=f"unix://{path}") as client:
            assert await client.ping() is True
            assert await client.list_containers() == []
    paths = [r.split()[1] for r in requests]
    assert paths[:2] == ["/_ping", "/version"]
    assert paths[2].startswith("/v1.41/containers/json")


def _garbage_types() -> set[str]:
    """The types of the objects that only the cyclic collector could free, collected now."""
    import gc

    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = {f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def test_docker_calls_that_succeed_leave_no_garbage_for_the_cyclic_collector(
    tmp_path: Path,
) -> None:
    import gc

    requests: list[str] = []
    with unix_server(tmp_path / "d.sock", _engine_answering(requests, api_version="1.41")) as path:
        async with DockerClient(url=f"unix://{path}") as client:
            await client.ping()
            _garbage_types()
            # What is alive now stays alive until the check: the garbage it finds was made
            # by the calls, not left by earlier tests.
            kept = gc.get_objects()
            gc.disable()
            try:
                for _ in range(3):
                    await client.start_container("c1")
                    await client.inspect_container("c1")
                    await client.list_containers()
                left = _garbage_types()
            finally:
                gc.enable()
                del kept
    per_call = {t for t in left if t.startswith("tenacity.")} | (
        left & {"aiodocker.containers.DockerContainer", "aiodocker.logs.DockerLog"}
    )
    assert per_call == set()
    lines = [" ".join(r.split()[:2]) for r in requests]
    assert "POST /v1.41/containers/c1/start" in lines
    assert "GET /v1.41/containers/c1/json" in lines


def _frame(data: bytes) -> bytes:
    """One multiplexed stdout frame of a container without a terminal."""
    return bytes([1, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def _engine_with_a_stopped_container(requests: list[str]) -> Any:
    """An engine holding one stopped container (no terminal) that wrote ``first`` and
    ``last``, whose follow stream dropped ``last``, as Docker's may for a short-lived
    container; it records each request line."""

    def answer(conn: Any, head: bytes, rest: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode()
        requests.append(line)
        path = line.split()[1]
        kind = "application/json"
        if path == "/_ping":
            body, kind = b"OK", "text/plain"
        elif "/logs" in path:
            stamps = "timestamps=1" in path
            first = (b"2026-01-01T00:00:00.000000001Z " if stamps else b"") + b"first\n"
            last = (b"2026-01-01T00:00:00.000000002Z " if stamps else b"") + b"last"
            body = _frame(first) + (b"" if "follow=1" in path else _frame(last))
            kind = "application/vnd.docker.raw-stream"
        elif path.endswith("/json"):
            body = b'{"Id": "c1", "Config": {"Tty": false}, "State": {"Running": false}}'
        else:
            body = b"[]"
        head_out = [
            "HTTP/1.1 200 OK",
            f"Content-Type: {kind}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            "Api-Version: 1.41",
        ]
        conn.sendall(("\r\n".join(head_out) + "\r\n\r\n").encode() + body)

    return answer


async def test_a_followed_log_that_ended_is_read_again_after_one_look_at_its_container(
    tmp_path: Path,
) -> None:
    requests: list[str] = []
    with unix_server(tmp_path / "d.sock", _engine_with_a_stopped_container(requests)) as path:
        async with DockerClient(url=f"unix://{path}") as client:
            await client.ping()
            lines = [(line.text, line.newline) async for line in client.logs("c1", follow=True)]
    assert lines == [("first", True), ("last", False)]
    paths = [r.split()[1].split("?")[0] for r in requests[1:]]
    assert paths == [
        "/v1.41/containers/c1/json",
        "/v1.41/containers/c1/logs",
        "/v1.41/containers/c1/json",
        "/v1.41/containers/c1/logs",
    ]
    assert "since=1767225600.000000001" in requests[-1]
