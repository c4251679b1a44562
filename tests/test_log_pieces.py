"""A container's output is read in lines of at most 16 KiB, as CRI partial lines: the
pieces put back together are the bytes the container wrote, whatever the engine's
chunking, no character is split between two pieces, and no more than a piece is held; a
frame is read in pieces whatever size its header claims."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from socket_helpers import unix_server

from asynckubelet.api.endpoints import NODE_KEY, container_logs
from asynckubelet.docker import DockerClient, LogLine
from asynckubelet.docker.logstream import PIECE, LineAssembler, frames, utf8_cut


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def _assemble(chunks: list[bytes]) -> tuple[list[tuple[bytes, bool]], LineAssembler]:
    assembler = LineAssembler("stdout")
    pieces = [piece for chunk in chunks for piece in assembler.pieces(chunk)]
    return pieces, assembler


def _rebuilt(pieces: list[tuple[bytes, bool]], rest: bytes) -> bytes:
    return b"".join(p + (b"\n" if ended else b"") for p, ended in pieces) + rest


long_lines = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.text(alphabet="é€𝄞x", min_size=PIECE // 4 - 8, max_size=PIECE // 2 + 8),
        st.builds(lambda n: "x" * n, st.integers(PIECE - 4, PIECE + 4)),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(
    lines=long_lines,
    ends_open=st.booleans(),
    cuts=st.lists(st.integers(0, 5 * PIECE), max_size=12),
)
def test_text_read_in_pieces_is_the_text_written_and_no_character_is_split(
    lines: list[str], ends_open: bool, cuts: list[int]
) -> None:
    text = "\n".join(lines) + ("" if ends_open else "\n")
    data = text.encode()
    assembler = LineAssembler("stdout")
    got: list[LogLine] = []
    for chunk in _chunked(data, cuts):
        got.extend(assembler.feed(chunk))
        assert len(assembler._held) <= PIECE
    got.extend(assembler.end())
    assert "".join(line.text + ("\n" if line.newline else "") for line in got) == text
    assert all(len(line.text.encode()) <= PIECE for line in got)
    assert all("\ufffd" not in line.text for line in got)


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(max_size=3 * PIECE)
    | st.builds(lambda n, b: b * n, st.integers(0, 3 * PIECE), st.sampled_from([b"\xe2", b"\x80"])),
    cuts=st.lists(st.integers(0, 3 * PIECE), max_size=12),
)
def test_any_bytes_are_rebuilt_exactly_and_cut_alike_however_they_arrive(
    data: bytes, cuts: list[int]
) -> None:
    whole, one = _assemble([data])
    pieces, assembler = _assemble(_chunked(data, cuts))
    rest = assembler.rest()
    assert _rebuilt(pieces, rest) == data
    assert pieces == whole
    assert rest == one.rest()
    assert all(len(p) <= PIECE for p, _ in pieces)


def test_a_character_across_the_16_kib_edge_starts_the_next_piece() -> None:
    data = b"x" * (PIECE - 1) + "é".encode() + b"tail\n"
    assembler = LineAssembler("stdout")
    lines = list(assembler.feed(data))
    assert lines == [
        LogLine("stdout", "x" * (PIECE - 1), newline=False),
        LogLine("stdout", "étail"),
    ]


def test_a_line_of_exactly_16_kib_is_one_line_even_when_its_newline_comes_later() -> None:
    assembler = LineAssembler("stdout")
    first = list(assembler.feed(b"y" * PIECE))
    second = list(assembler.feed(b"\nz"))
    assert first == []
    assert second == [LogLine("stdout", "y" * PIECE)]
    assert list(assembler.end()) == [LogLine("stdout", "z", newline=False)]


@pytest.mark.parametrize(
    ("tail", "cut"),
    [
        (b"abc", 3),
        ("é".encode()[:1], 0),
        ("€".encode()[:2], 0),
        ("𝄞".encode()[:3], 0),
        ("𝄞".encode(), 4),
        (b"\x80\x80\x80\x80", 4),
        (b"a\x80", 2),
    ],
)
def test_the_cut_falls_before_a_character_the_edge_would_split(tail: bytes, cut: int) -> None:
    data = b"a" * 8 + tail
    assert utf8_cut(data, len(data)) == 8 + cut


class _Reader:
    """A stream reader over bytes that records how much each read asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[int] = []

    async def readexactly(self, n: int) -> bytes:
        self.asked.append(n)
        if len(self.data) < n:
            partial, self.data = self.data, b""
            raise asyncio.IncompleteReadError(partial, n)
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk

    async def read(self, n: int) -> bytes:
        self.asked.append(n)
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


def _header(kind: int, size: int) -> bytes:
    return bytes([kind, 0, 0, 0]) + size.to_bytes(4, "big")


@pytest.mark.anyio
async def test_a_frame_that_claims_4_gb_is_read_a_piece_at_a_time() -> None:
    body = _header(1, 2**32 - 1) + b"z" * (3 * PIECE + 5)
    reader = _Reader(body)
    got = [item async for item in frames(cast(aiohttp.StreamReader, reader), tty=False)]
    assert max(reader.asked) == PIECE
    assert [len(data) for _, data, _, _ in got] == [PIECE, PIECE, PIECE, 5]
    assert [(first, last) for _, _, first, last in got] == [
        (True, False),
        (False, False),
        (False, False),
        (False, True),
    ]


@pytest.mark.anyio
async def test_frames_are_cut_at_16_kib_and_keep_their_stream() -> None:
    body = _header(2, PIECE + 1) + b"e" * (PIECE + 1) + _header(1, 3) + b"ok\n"
    got = [
        (stream, len(data), first, last)
        async for stream, data, first, last in frames(
            cast(aiohttp.StreamReader, _Reader(body)), tty=False
        )
    ]
    assert got == [
        ("stderr", PIECE, True, False),
        ("stderr", 1, False, True),
        ("stdout", 3, True, True),
    ]


@pytest.mark.anyio
async def test_a_terminals_raw_stream_is_read_a_piece_at_a_time() -> None:
    reader = _Reader(b"t" * (2 * PIECE + 1))
    got = [len(d) async for _, d, _, _ in frames(cast(aiohttp.StreamReader, reader), tty=True)]
    assert got == [PIECE, PIECE, 1]
    assert max(reader.asked) == PIECE


LINE = 32 * 1024 * 1024


@contextlib.contextmanager
def _engine_with_a_32_mb_line(tmp_path: Path) -> Iterator[tuple[Path, list[int]]]:
    """An engine whose container ``c1`` (no terminal) wrote 32 MB without a newline, as
    one frame; ``sent`` gets the bytes of the log's body written before the reader hung
    up (or all of them)."""
    sent: list[int] = []
    done = threading.Event()

    def answer(conn: socket.socket, head: bytes, rest: bytes) -> None:
        path = head.split(b"\r\n", 1)[0].split()[1].decode()
        if "/logs" not in path:
            body = (
                b"OK"
                if path == "/_ping"
                else b'{"Id": "c1", "Config": {"Tty": false}, "State": {"Running": true}}'
            )
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s" % (len(body), body)
            )
            return
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
            b"Connection: close\r\n\r\n" + _header(1, LINE)
        )
        written = 0
        chunk = b"x" * 65536
        try:
            while written < LINE:
                conn.sendall(chunk)
                written += len(chunk)
        except OSError:
            pass
        finally:
            sent.append(written)
            done.set()

    with unix_server(tmp_path / "d.sock", answer) as path:
        yield path, sent
        done.wait(30)


@pytest.mark.anyio
async def test_a_reader_that_stops_at_the_first_piece_of_a_32_mb_line_hangs_up(
    tmp_path: Path,
) -> None:
    with _engine_with_a_32_mb_line(tmp_path) as (path, sent):
        async with DockerClient(url=f"unix://{path}") as client:
            await client.ping()
            lines = client.logs("c1")
            first = await anext(lines)
            await lines.aclose()  # type: ignore[attr-defined]
    assert first == LogLine("stdout", "x" * PIECE, newline=False)
    assert sent[0] < LINE // 4


class _Node:
    """The part of the node the log endpoint reads, over a real Docker client."""

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    @contextlib.asynccontextmanager
    async def logs(self, namespace: str, name: str, **kwargs: Any) -> AsyncIterator[Any]:
        lines = self.client.logs("c1", tail=kwargs.get("tail"), follow=kwargs["follow"])
        try:
            yield lines
        finally:
            await lines.aclose()  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_limit_bytes_of_a_32_mb_line_is_written_and_the_engine_is_left_at_once(
    tmp_path: Path,
) -> None:
    with _engine_with_a_32_mb_line(tmp_path) as (path, sent):
        async with DockerClient(url=f"unix://{path}") as docker:
            await docker.ping()
            app = web.Application()
            app[NODE_KEY] = cast(Any, _Node(docker))
            app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
            async with TestClient(TestServer(app, host="127.0.0.1")) as c:
                response = await c.get("/containerLogs/default/web/app?limitBytes=10")
                body = await response.read()
    assert body == b"x" * 10
    assert sent[0] < LINE // 4
