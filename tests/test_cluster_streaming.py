"""``kubectl exec`` and ``port-forward`` as the node serves them over SPDY, with a fake
command: the streams the client opens are waited for, output goes to stdout or stderr,
stdin reaches the command and its end closes the command's input, terminal sizes are
applied, and the error stream carries the outcome as each protocol version writes it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from asynckubelet import errors
from asynckubelet.api import spdy, streaming

pytestmark = pytest.mark.anyio

V4 = "v4.channel.k8s.io"


class FakeProcess:
    """A command that echoes its stdin to stdout and writes ``errors`` to stderr."""

    def __init__(self, *, code: int, output: Sequence[tuple[int, bytes]] = ()) -> None:
        self.code = code
        self.output = list(output)
        self.input = b""
        self.input_closed = anyio.Event()
        self.sizes: list[tuple[int, int]] = []
        self.echo = False

    async def read(self) -> tuple[int, bytes] | None:
        if self.output:
            return self.output.pop(0)
        if self.echo:
            await self.input_closed.wait()
            if self.input:
                data, self.input = self.input, b""
                return 1, data
        return None

    async def write(self, data: bytes) -> None:
        self.input += data

    def close_input(self) -> None:
        self.input_closed.set()

    async def resize(self, *, rows: int, columns: int) -> None:
        self.sizes.append((rows, columns))

    async def exit_code(self) -> int:
        return self.code


SESSIONS: list[spdy.Session] = []
"""Every session a test made; each is released after its test, as the server does."""


@pytest.fixture(autouse=True)
def _release_sessions() -> Iterator[None]:
    yield
    while SESSIONS:
        SESSIONS.pop().release()


class Client:
    def __init__(self) -> None:
        self.compressor = spdy.HeaderCompressor()
        self.reader = spdy.FrameReader()
        self.received: list[spdy.Frame] = []
        self.streams = streaming.StreamCollector()
        self.session = spdy.Session(self._from_server, on_stream=self.streams)
        SESSIONS.append(self.session)
        self.next_id = 1
        self.arrived = anyio.Event()

    async def _from_server(self, data: bytes) -> None:
        self.received += self.reader.feed(data)
        self.arrived.set()

    async def open(self, headers: dict[str, str], *, fin: bool = False) -> int:
        stream_id, self.next_id = self.next_id, self.next_id + 2
        flags = spdy.FLAG_FIN if fin else 0
        await self.session.feed(spdy.syn_stream(self.compressor, stream_id, headers, flags=flags))
        return stream_id

    async def send(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        await self.session.feed(spdy.data_frame(stream_id, data, fin=fin))

    def output(self, stream_id: int) -> tuple[bytes, bool]:
        frames = [
            f for f in self.received if isinstance(f, spdy.DataFrame) and f.stream_id == stream_id
        ]
        return b"".join(f.data for f in frames), any(f.fin for f in frames)

    def gone_away(self) -> bool:
        return any(
            isinstance(f, spdy.ControlFrame) and f.type == spdy.FrameType.GOAWAY
            for f in self.received
        )


def starter(process: FakeProcess, calls: list[tuple[list[str], bool, bool]]) -> streaming.StartExec:
    @asynccontextmanager
    async def start(
        command: Sequence[str], stdin: bool, tty: bool
    ) -> AsyncIterator[streaming.ExecProcess]:
        calls.append((list(command), stdin, tty))
        yield process

    return start


async def test_exec_output_goes_to_its_streams_and_v4_reports_the_exit_code() -> None:
    client = Client()
    error = await client.open({"streamType": "error"})
    stdout = await client.open({"streamType": "stdout"})
    stderr = await client.open({"streamType": "stderr"})
    process = FakeProcess(code=3, output=[(1, b"hi\n"), (2, b"oops\n"), (1, b"bye\n")])
    calls: list[tuple[list[str], bool, bool]] = []
    options = streaming.StreamOptions.from_query({"output": "1", "error": "1"})
    code = await streaming.serve_exec(
        client.session,
        client.streams,
        protocol=V4,
        options=options,
        command=["sh", "-c", "exit 3"],
        start=starter(process, calls),
    )
    assert code == 3
    assert calls == [(["sh", "-c", "exit 3"], False, False)]
    assert client.output(stdout) == (b"hi\nbye\n", True)
    assert client.output(stderr) == (b"oops\n", True)
    status_bytes, closed = client.output(error)
    assert closed
    status = json.loads(status_bytes)
    assert status["status"] == "Failure"
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert client.gone_away()


async def test_a_successful_exec_is_a_success_status_on_v4_and_nothing_before() -> None:
    for protocol, expected in (
        (V4, {"metadata": {}, "status": "Success"}),
        ("v2.channel.k8s.io", None),
    ):
        client = Client()
        error = await client.open({"streamType": "error"})
        await client.open({"streamType": "stdout"})
        await streaming.serve_exec(
            client.session,
            client.streams,
            protocol=protocol,
            options=streaming.StreamOptions.from_query({"output": "1"}),
            command=["true"],
            start=starter(FakeProcess(code=0), []),
        )
        text, closed = client.output(error)
        assert closed
        assert (json.loads(text) if text else None) == expected


async def test_stdin_reaches_the_command_and_its_end_closes_the_commands_input() -> None:
    client = Client()
    await client.open({"streamType": "error"})
    stdin = await client.open({"streamType": "stdin"})
    stdout = await client.open({"streamType": "stdout"})
    process = FakeProcess(code=0)
    process.echo = True
    options = streaming.StreamOptions.from_query({"input": "1", "output": "1"})
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: streaming.serve_exec(
                client.session,
                client.streams,
                protocol=V4,
                options=options,
                command=["cat"],
                start=starter(process, []),
            )
        )
        await client.send(stdin, b"abc\n")
        await client.send(stdin, b"def\n", fin=True)
    assert process.input_closed.is_set()
    assert client.output(stdout) == (b"abc\ndef\n", True)


async def test_a_terminal_has_no_stderr_and_follows_resize_messages() -> None:
    options = streaming.StreamOptions.from_query({"output": "1", "error": "1", "tty": "1"})
    assert not options.stderr
    assert options.expected(V4) == {"error", "stdout", "resize"}
    assert options.expected("v2.channel.k8s.io") == {"error", "stdout"}
    client = Client()
    await client.open({"streamType": "error"})
    await client.open({"streamType": "stdout"})
    resize = await client.open({"streamType": "resize"})
    size = b'{"Width":80,"Height":24}{"Width":'
    await client.send(resize, size)
    await client.send(resize, b'100,"Height":30}', fin=True)
    process = FakeProcess(code=0)
    started = anyio.Event()

    @asynccontextmanager
    async def start(command: Sequence[str], stdin: bool, tty: bool) -> AsyncIterator[Any]:
        assert tty
        started.set()
        yield process

    async def slow_read() -> tuple[int, bytes] | None:
        await anyio.sleep(0.05)
        return None

    process.read = slow_read  # type: ignore[method-assign]
    await streaming.serve_exec(
        client.session, client.streams, protocol=V4, options=options, command=["sh"], start=start
    )
    assert process.sizes == [(24, 80), (30, 100)]


async def test_a_client_that_never_opens_its_streams_gets_goaway() -> None:
    client = Client()
    await client.open({"streamType": "error"})
    calls: list[tuple[list[str], bool, bool]] = []
    code = await streaming.serve_exec(
        client.session,
        client.streams,
        protocol=V4,
        options=streaming.StreamOptions.from_query({"output": "1"}),
        command=["true"],
        start=starter(FakeProcess(code=0), calls),
        timeout=0.05,
    )
    assert code is None
    assert calls == []
    assert client.gone_away()


async def test_a_command_that_cannot_start_is_an_internal_error_status() -> None:
    @asynccontextmanager
    async def start(command: Sequence[str], stdin: bool, tty: bool) -> AsyncIterator[Any]:
        raise errors.DockerAPIError("no such exec", status=404)
        yield

    client = Client()
    error = await client.open({"streamType": "error"})
    await client.open({"streamType": "stdout"})
    await streaming.serve_exec(
        client.session,
        client.streams,
        protocol=V4,
        options=streaming.StreamOptions.from_query({"output": "1"}),
        command=["nope"],
        start=start,
    )
    status = json.loads(client.output(error)[0])
    assert status["status"] == "Failure"
    assert "no such exec" in status["message"]


def test_stream_options_need_one_stream_and_take_the_kubelets_names() -> None:
    with pytest.raises(ValueError, match="at least 1 of stdin, stdout, stderr"):
        streaming.StreamOptions.from_query({"tty": "1"})
    options = streaming.StreamOptions.from_query({"input": "1", "output": "true"})
    assert (options.stdin, options.stdout, options.stderr, options.tty) == (
        True,
        True,
        False,
        False,
    )


def test_the_protocol_is_the_clients_first_the_server_speaks() -> None:
    both = streaming.REMOTECOMMAND_PROTOCOLS
    assert streaming.negotiate(["v5.channel.k8s.io", "v4.channel.k8s.io"], both) == V4
    assert streaming.negotiate(["v2.channel.k8s.io,channel.k8s.io"], both) == "v2.channel.k8s.io"
    assert streaming.negotiate([], both) == ""
    with pytest.raises(streaming.NegotiationError, match="unable to negotiate protocol"):
        streaming.negotiate(["v5.channel.k8s.io"], both)


async def test_port_forward_pairs_streams_by_request_and_copies_both_ways() -> None:
    client = Client()
    dialed: list[int] = []

    @asynccontextmanager
    async def dial(port: int) -> AsyncIterator[anyio.abc.ByteStream]:
        dialed.append(port)
        if port == 9:
            raise OSError("connection refused")
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        async with listener:
            accepted: list[anyio.abc.ByteStream] = []

            async def serve(connection: anyio.abc.ByteStream) -> None:
                accepted.append(connection)
                request = await connection.receive()
                await connection.send(b"pong:" + request)
                await connection.aclose()

            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, serve)
                port_of = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610  (anyio's typed attribute, not Django)
                async with await anyio.connect_tcp("127.0.0.1", port_of) as connection:
                    yield connection
                tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: streaming.serve_port_forward(
                client.session, client.streams, pod="ns/web", dial=dial
            )
        )
        error = await client.open(
            {"streamType": "error", "port": "8080", "requestID": "0"}, fin=True
        )
        data = await client.open({"streamType": "data", "port": "8080", "requestID": "0"})
        await client.send(data, b"ping")
        bad_error = await client.open(
            {"streamType": "error", "port": "9", "requestID": "1"}, fin=True
        )
        await client.open({"streamType": "data", "port": "9", "requestID": "1"})
        with anyio.fail_after(10):
            while True:
                client.arrived = anyio.Event()
                if client.output(error)[1] and client.output(bad_error)[1]:
                    break
                await client.arrived.wait()
        client.session.connection_lost()
    assert sorted(dialed) == [9, 8080]
    assert client.output(data) == (b"pong:ping", True)
    assert client.output(error) == (b"", True)
    message, _ = client.output(bad_error)
    assert message.startswith(b"error forwarding port 9 to pod ns/web: ")


class FakeChannels:
    """A WebSocket client: what it sends, then its close; what the server sent it."""

    def __init__(self, incoming: Sequence[tuple[int, bytes]] = ()) -> None:
        self.incoming = list(incoming)
        self.sent: list[tuple[int, bytes]] = []

    async def send(self, channel: int, data: bytes) -> None:
        self.sent.append((channel, data))

    async def receive(self) -> tuple[int, bytes] | None:
        return self.incoming.pop(0) if self.incoming else None


async def test_a_websocket_exec_announces_itself_then_sends_each_stream_on_its_channel() -> None:
    channels = FakeChannels()
    process = FakeProcess(code=0, output=[(1, b"out\n"), (2, b"err\n")])
    code = await streaming.serve_exec_websocket(
        channels,
        protocol="channel.k8s.io",
        options=streaming.StreamOptions(stdin=False, stdout=True, stderr=True, tty=False),
        command=["echo", "out"],
        start=starter(process, []),
    )
    assert code == 0
    assert channels.sent == [(1, b""), (1, b"out\n"), (2, b"err\n")]


async def test_a_websocket_exec_on_v4_ends_with_the_exit_status_on_the_error_channel() -> None:
    channels = FakeChannels()
    await streaming.serve_exec_websocket(
        channels,
        protocol="v4.channel.k8s.io",
        options=streaming.StreamOptions(stdin=False, stdout=True, stderr=False, tty=False),
        command=["false"],
        start=starter(FakeProcess(code=1), []),
    )
    channel, data = channels.sent[-1]
    status = json.loads(data)
    assert (channel, status["reason"], status["details"]["causes"][0]["message"]) == (
        3,
        "NonZeroExitCode",
        "1",
    )


async def test_websocket_stdin_reaches_the_command_and_the_clients_close_ends_it() -> None:
    channels = FakeChannels(incoming=[(0, b"hello "), (0, b"there")])
    process = FakeProcess(code=0)
    process.echo = True
    await streaming.serve_exec_websocket(
        channels,
        protocol="channel.k8s.io",
        options=streaming.StreamOptions(stdin=True, stdout=True, stderr=False, tty=False),
        command=["cat"],
        start=starter(process, []),
    )
    assert channels.sent == [(1, b""), (1, b"hello there")]
