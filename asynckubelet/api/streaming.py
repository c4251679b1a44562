"""``kubectl exec``, ``attach`` and ``port-forward`` over SPDY (and exec and attach over
WebSockets), as a kubelet serves them: cluster mode's kubelet API and the node's own
Kubernetes API both run these sessions (:mod:`asynckubelet.api.upgrades` answers the
upgrade).

The API server proxies ``pods/exec`` and ``pods/portforward`` to the kubelet's
``/exec/{namespace}/{pod}/{container}`` and ``/portForward/{namespace}/{pod}`` and passes
the client's upgrade through, so the client talks to the node directly:

- **remotecommand** (``v4.channel.k8s.io``, ``v3``, ``v2``, ``channel.k8s.io``): the query
  says which of stdin (``input``), stdout (``output``), stderr (``error``) and a terminal
  (``tty``) the command gets (``command`` repeated is its argv); the client opens an
  ``error`` stream and one stream for each of those (``resize`` too with a terminal on v3
  and later). The node runs the command, copies the streams, and at the end writes the
  outcome on the error stream: on v4 a ``Status`` (``Success``, or ``Failure`` with reason
  ``NonZeroExitCode`` and the exit code as a cause), on older versions a message on
  failure only. Then it half-closes every stream and sends ``GOAWAY``.
- **port forwarding** (``portforward.k8s.io``): for each connection the client opens an
  ``error`` and a ``data`` stream with the same ``requestID`` and a ``port`` header; the
  node connects to that port of the pod, copies bytes both ways, and half-closes the
  error stream when done (after writing why, if the connection failed).

Exec also comes over a WebSocket (``Upgrade: websocket``, the API server passing a
WebSocket client's upgrade through): one message per chunk, its first byte the channel (0
stdin, 1 stdout, 2 stderr, 3 error, 4 resize), or, on the ``base64`` protocols, a text
message of the channel's digit and the data in base64. On ``v5.channel.k8s.io`` the client
ends stdin with a message on channel 255 naming channel 0.

The command runs through an :class:`ExecProcess` (the engine's attached exec, or an attach
to the container's main process), so the state machine is tested with a fake one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.api import spdy

STREAM_PROTOCOL_HEADER = "X-Stream-Protocol-Version"
REMOTECOMMAND_PROTOCOLS = (
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
PORTFORWARD_PROTOCOLS = ("portforward.k8s.io",)
STREAM_CREATION_TIMEOUT = 30.0
"""Seconds the client has to open its streams (the kubelet's streamCreationTimeout)."""
NON_ZERO_EXIT = "NonZeroExitCode"
EXIT_CODE_CAUSE = "ExitCode"


class ExecProcess(Protocol):
    """A command started in a container, attached."""

    async def read(self) -> tuple[int, bytes] | None:
        """``(1 stdout | 2 stderr, data)``, None at the end of its output."""

    async def write(self, data: bytes) -> None: ...

    def close_input(self) -> None: ...

    async def resize(self, *, rows: int, columns: int) -> None: ...

    async def exit_code(self) -> int: ...


StartExec = Callable[[Sequence[str], bool, bool], AbstractAsyncContextManager[ExecProcess]]
"""Starts ``(command, stdin, tty)``."""

Dial = Callable[[int], AbstractAsyncContextManager[anyio.abc.ByteStream]]
"""Connects to a port of the pod."""


class NegotiationError(Exception):
    """No protocol both ends speak (answered 403, as the kubelet does)."""


def negotiate(client: Sequence[str], server: Sequence[str]) -> str:
    """The first of the client's protocols the server speaks ("" when the client names
    none: the protocol before versions)."""
    offered = [p.strip() for value in client for p in value.split(",") if p.strip()]
    if not offered:
        return ""
    for protocol in offered:
        if protocol in server:
            return protocol
    raise NegotiationError(
        f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
        f"server accepts {list(server)}"
    )


@dataclass(frozen=True)
class StreamOptions:
    """Which streams an exec or attach has, from the kubelet's query parameters."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> StreamOptions:
        def flag(*names: str) -> bool:
            return any(query.get(n, "").lower() in ("1", "true") for n in names)

        tty = flag("tty")
        stdin = flag("input", "stdin")
        stdout = flag("output", "stdout")
        stderr = flag("error", "stderr") and not tty
        if not (stdin or stdout or stderr):
            raise ValueError("you must specify at least 1 of stdin, stdout, stderr")
        return cls(stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    def expected(self, protocol: str) -> set[str]:
        kinds = {"error"}
        if self.stdin:
            kinds.add("stdin")
        if self.stdout:
            kinds.add("stdout")
        if self.stderr:
            kinds.add("stderr")
        if self.tty and protocol in ("v3.channel.k8s.io", "v4.channel.k8s.io"):
            kinds.add("resize")
        return kinds


def exit_status(code: int, command: Sequence[str]) -> dict[str, Any]:
    """The v4 error stream's ``Status`` for a command that ended with ``code``."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            "command terminated with non-zero exit code: "
            f"command '{' '.join(command)}' exited with {code}"
        ),
        "reason": NON_ZERO_EXIT,
        "details": {"causes": [{"reason": EXIT_CODE_CAUSE, "message": str(code)}]},
    }


def error_status(message: str) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


class StreamCollector:
    """The streams the client opens, handed out by type (``on_stream`` for the session)."""

    def __init__(self) -> None:
        self.streams: list[spdy.Stream] = []
        self._changed = anyio.Event()

    def __call__(self, stream: spdy.Stream) -> None:
        self.streams.append(stream)
        self._changed.set()

    async def wait_for(self, kinds: set[str], *, timeout: float) -> dict[str, spdy.Stream]:
        """The first stream of each of ``kinds``; TimeoutError when one is missing."""
        with anyio.fail_after(timeout):
            while True:
                found: dict[str, spdy.Stream] = {}
                for s in self.streams:
                    found.setdefault(s.header("streamtype"), s)
                if kinds <= found.keys():
                    return found
                self._changed = anyio.Event()
                await self._changed.wait()

    async def next(self) -> spdy.Stream | None:
        """Streams as they come; None never (waits)."""
        while not self.streams:
            self._changed = anyio.Event()
            await self._changed.wait()
        return self.streams.pop(0)


async def serve_exec(
    session: spdy.Session,
    streams: StreamCollector,
    *,
    protocol: str,
    options: StreamOptions,
    command: Sequence[str],
    start: StartExec,
    timeout: float = STREAM_CREATION_TIMEOUT,
) -> int | None:
    """Run one exec over ``session``; returns the exit code (None when it never ran)."""
    try:
        found = await streams.wait_for(options.expected(protocol), timeout=timeout)
    except TimeoutError:
        logger.info("exec {}: the client did not open its streams in time", list(command))
        await session.goaway()
        return None
    error = found["error"]
    stdin, stdout, stderr = found.get("stdin"), found.get("stdout"), found.get("stderr")
    code: int | None = None
    problem = ""
    try:
        async with start(command, options.stdin, options.tty) as process:
            async with anyio.create_task_group() as tg:
                if stdin is not None:
                    tg.start_soon(_pump_stdin, stdin, process)
                if "resize" in found:
                    tg.start_soon(_pump_resize, found["resize"], process)
                while (chunk := await process.read()) is not None:
                    fd, data = chunk
                    target = stderr if fd == 2 and stderr is not None else stdout
                    if target is not None:
                        await target.write(data)
                tg.cancel_scope.cancel()
            code = await process.exit_code()
    except errors.AsyncKubeletError as e:
        problem = f"error executing command in container: {e}"
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
        logger.debug("exec {}: the connection ended: {}", list(command), e)
        return code
    await _report(error, protocol, code=code, problem=problem, command=command)
    for stream in (stdout, stderr, stdin, found.get("resize")):
        if stream is not None:
            await stream.close()
    await session.goaway()
    return code


def _outcome(protocol: str, *, code: int | None, problem: str, command: Sequence[str]) -> bytes:
    """What the error stream carries at the end: v4 a ``Status`` always, older protocols
    a message on failure only."""
    if protocol.startswith(("v4.", "v5.")):
        status = error_status(problem) if problem else exit_status(code or 0, command)
        return json.dumps(status, separators=(",", ":")).encode()
    if problem or code:
        return (problem or exit_status(code or 0, command)["message"]).encode()
    return b""


async def _report(
    error: spdy.Stream, protocol: str, *, code: int | None, problem: str, command: Sequence[str]
) -> None:
    outcome = _outcome(protocol, code=code, problem=problem, command=command)
    if outcome:
        await error.write(outcome)
    await error.close()


class Channels(Protocol):
    """A WebSocket connection carrying the remotecommand channels (0 stdin, 1 stdout,
    2 stderr, 3 error, 4 resize), one message per chunk, as the kubelet frames them."""

    async def send(self, channel: int, data: bytes) -> None: ...

    async def receive(self) -> tuple[int, bytes] | None:
        """The next ``(channel, data)`` from the client; None once it closed."""


WEBSOCKET_PROTOCOLS = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
)
"""What the kubelet's remotecommand speaks over WebSockets (binary, or base64 text with the
channel as an ASCII digit), v5 first: v5 is v4 with a close signal, a message on channel
255 whose byte names the channel the client closed (stdin's end, which a WebSocket
cannot otherwise half-close)."""
STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
CLOSE = 255


async def serve_exec_websocket(
    channels: Channels,
    *,
    protocol: str,
    options: StreamOptions,
    command: Sequence[str],
    start: StartExec,
) -> int | None:
    """Run one exec over a WebSocket; returns the exit code (None when it never ran).

    An empty message on the lowest channel the client reads tells it the command is
    connected (the kubelet's first message); the outcome goes on the error channel.
    """
    first = STDOUT if options.stdout else STDERR if options.stderr else ERROR
    await channels.send(first, b"")
    code: int | None = None
    problem = ""
    try:
        async with start(command, options.stdin, options.tty) as process:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump_channels, channels, process, options.stdin)
                while (chunk := await process.read()) is not None:
                    fd, data = chunk
                    await channels.send(STDERR if fd == 2 and options.stderr else STDOUT, data)
                tg.cancel_scope.cancel()
            code = await process.exit_code()
    except errors.AsyncKubeletError as e:
        problem = f"error executing command in container: {e}"
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
        logger.debug("exec {}: the connection ended: {}", list(command), e)
        return code
    outcome = _outcome(protocol, code=code, problem=problem, command=command)
    if outcome:
        await channels.send(ERROR, outcome)
    return code


async def _pump_channels(channels: Channels, process: ExecProcess, stdin: bool) -> None:
    """Stdin and terminal sizes from the client, until it closes."""
    decoder = json.JSONDecoder()
    closed = False
    while (message := await channels.receive()) is not None:
        channel, data = message
        if channel == STDIN and stdin and not closed:
            await process.write(data)
        elif channel == CLOSE and data[:1] == bytes([STDIN]) and stdin and not closed:
            closed = True
            process.close_input()
        elif channel == RESIZE:
            with contextlib.suppress(ValueError, TypeError):
                size, _ = decoder.raw_decode(data.decode(errors="replace").strip())
                await process.resize(rows=int(size["Height"]), columns=int(size["Width"]))
    if stdin and not closed:
        process.close_input()


async def _pump_stdin(stream: spdy.Stream, process: ExecProcess) -> None:
    while data := await stream.read():
        await process.write(data)
    process.close_input()


async def _pump_resize(stream: spdy.Stream, process: ExecProcess) -> None:
    """Terminal sizes, one JSON object ``{"Width": w, "Height": h}`` after another."""
    decoder = json.JSONDecoder()
    buffer = ""
    while data := await stream.read():
        buffer += data.decode(errors="replace")
        while buffer.strip():
            try:
                size, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                break
            buffer = buffer.lstrip()[end:]
            if isinstance(size, dict):
                with contextlib.suppress(errors.AsyncKubeletError, TypeError, ValueError):
                    await process.resize(rows=int(size["Height"]), columns=int(size["Width"]))


# -- port forwarding -----------------------------------------------------------------------


async def serve_port_forward(
    session: spdy.Session,
    streams: StreamCollector,
    *,
    pod: str,
    dial: Dial,
    idle_timeout: float | None = None,
) -> None:
    """Forward each (error, data) stream pair to its port until the session ends."""
    pairs: dict[str, dict[str, spdy.Stream]] = {}
    async with anyio.create_task_group() as tg:

        async def until_closed() -> None:
            await session.closed.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(until_closed)
        while True:
            stream = await streams.next()
            if stream is None:
                break
            kind = stream.header("streamtype")
            request = stream.header("requestid") or str(stream.id)
            if kind not in ("error", "data"):
                await stream.reset(spdy.RstStatus.PROTOCOL_ERROR)
                continue
            pair = pairs.setdefault(request, {})
            pair[kind] = stream
            if len(pair) == 2:
                del pairs[request]
                tg.start_soon(_forward, pair["error"], pair["data"], pod, dial)


async def _forward(error: spdy.Stream, data: spdy.Stream, pod: str, dial: Dial) -> None:
    port_text = data.header("port") or error.header("port")
    try:
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(port_text)
    except ValueError:
        await error.write(f"invalid port {port_text!r}".encode())
        await error.close()
        await data.close()
        return
    try:
        async with dial(port) as connection, anyio.create_task_group() as tg:

            async def client_to_pod() -> None:
                while chunk := await data.read():
                    await connection.send(chunk)
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await connection.send_eof()

            tg.start_soon(client_to_pod)
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                while True:
                    await data.write(await connection.receive())
            tg.cancel_scope.cancel()
    except (OSError, errors.AsyncKubeletError) as e:
        message = f"error forwarding port {port} to pod {pod}: {e}"
        logger.info("{}", message)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await error.write(message.encode())
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await data.close()
        await error.close()


__all__ = [
    "PORTFORWARD_PROTOCOLS",
    "REMOTECOMMAND_PROTOCOLS",
    "STREAM_PROTOCOL_HEADER",
    "WEBSOCKET_PROTOCOLS",
    "Channels",
    "Dial",
    "ExecProcess",
    "NegotiationError",
    "StartExec",
    "StreamCollector",
    "StreamOptions",
    "error_status",
    "exit_status",
    "negotiate",
    "serve_exec",
    "serve_exec_websocket",
    "serve_port_forward",
]
