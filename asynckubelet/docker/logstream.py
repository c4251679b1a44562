"""A container's output read from the engine as the kubelet reads a CRI log: in lines of at
most :data:`PIECE` bytes.

What a container prints is hostile: a line of many megabytes without a newline, assembled
whole before anything is passed on, makes a ``limitBytes=10`` read wait for all of it and
hold it in memory (docs/benchmarks.md). So nothing here holds more than one piece of a line
per stream (plus one piece of a multiplexed frame, whatever size the frame's header
claims): a longer line is passed on as :class:`~asynckubelet.docker.types.LogLine` pieces
with ``newline=False``, cut where no UTF-8 character is split, the way a CRI runtime writes
it as partial (``P``) lines; its bytes are those the container wrote, in order. Each byte
is looked at a bounded number of times, so a read costs what its output weighs, and a
reader that stops (``limitBytes`` reached) closes the engine's stream at once.

A followed log crosses rotations of the engine's log files, and Docker 20.10's follower
sends entries again after one (the rotated file's last entry; a whole file when the
writer is fast) and gives up on a fast one (``Error grabbing logs: ... file already
closed``). So a followed log asks for the engine's timestamps and passes on, per stream,
only entries stamped after the last one passed on (the pieces of one long line share
their first piece's stamp, and are counted), and when the follower gives up while the
container runs, follows again from there. An entry stamped earlier than the last one
passed on is skipped, which hides lines only if the engine host's clock steps back while
a log is followed; a piece of a line longer than 16 KiB that the follower sends again is
passed on again, as nothing tells it from the next piece. A container with a terminal
has no frames to tell entries apart, and its followed log is passed on as the engine
sends it.
"""

from __future__ import annotations

import asyncio
import calendar
import re
import struct
import time
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing
from typing import Any, Protocol

import aiodocker
import aiohttp
import anyio

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker.errors import map_error
from asynckubelet.docker.types import ContainerInspect, LogLine


class LogSource(Protocol):
    """What reading a log needs of the engine's client (``DockerClient``): the log
    endpoint's body and the container's state."""

    def log_response(
        self, container_id: str, params: Mapping[str, Any]
    ) -> AbstractAsyncContextManager[aiohttp.StreamReader]: ...

    async def inspect_container(self, container_id: str) -> ContainerInspect: ...


PIECE = 16 * 1024
"""The most bytes of one line held or passed on at once: the CRI's partial-line size, and
the size at which Docker's log drivers split a line into entries."""

FOLLOW_RECHECK_LINES = 10_000
"""A followed log of a container with a terminal that ended (its container stopped) with
at most this many lines is read again without following, for the lines Docker's follow
stream may have dropped: the json-file reader of a follow stops with its container, and
what the container wrote just before it exited (a short-lived ``cat``'s only output) can
miss the stream. Other containers' logs are read again from the last entry passed on."""

_STREAM_NAMES = {0: "stdout", 1: "stdout", 2: "stderr", 3: "error"}
"""Frame kinds; ``error`` is the engine's own message (``systemerr``) that ends a stream."""
_RESUMES = 5
"""Times in a row a followed log is asked again after the engine's follower failed
without passing anything on in between."""
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z")
"""Docker's ``RFC3339NanoFixed`` in UTC: fixed width, so stamps compare as bytes."""
_STAMP_SEARCH = 40
_MESSAGE = 1024


def utf8_cut(data: bytes | bytearray, end: int) -> int:
    """Where to cut ``data[:end]`` so that no UTF-8 character is split: ``end``, or the
    start of a character that ``end`` would cut short. Bytes that are no character's
    start or continuation are cut anywhere (they were never a character)."""
    i = end - 1
    while i >= 0 and end - i <= 3 and data[i] & 0xC0 == 0x80:
        i -= 1
    if i <= 0 or data[i] & 0xC0 == 0x80:
        return end
    lead = data[i]
    if lead >= 0xF0:
        size = 4 if lead < 0xF8 else 1
    elif lead >= 0xE0:
        size = 3
    else:
        size = 2 if lead >= 0xC0 else 1
    return i if i + size > end else end


class LineAssembler:
    """One stream's bytes as lines: a complete line of at most :data:`PIECE` bytes is one
    :class:`LogLine` (its newline left out), a longer one several, each of at most
    :data:`PIECE` bytes with ``newline=False`` but the last. At most :data:`PIECE` bytes
    are held between calls."""

    __slots__ = ("_held", "stream")

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._held = bytearray()

    def pieces(self, data: bytes) -> Iterator[tuple[bytes, bool]]:
        """``(bytes, ended its line)`` for each piece ``data`` completes."""
        held = self._held
        view = memoryview(data)
        start, size = 0, len(data)
        while start < size:
            room = PIECE - len(held)
            newline = data.find(b"\n", start, start + room + 1)
            if newline >= 0:
                held += view[start:newline]
                piece = bytes(held)
                held.clear()
                start = newline + 1
                yield piece, True
            elif room == 0:
                cut = utf8_cut(held, len(held))
                piece = bytes(held[:cut])
                del held[:cut]
                yield piece, False
            else:
                take = min(room, size - start)
                held += view[start : start + take]
                start += take

    def rest(self) -> bytes:
        """What is held (a line its stream ended without a newline), now let go."""
        piece = bytes(self._held)
        self._held.clear()
        return piece

    def feed(self, data: bytes) -> Iterator[LogLine]:
        for piece, ended in self.pieces(data):
            yield LogLine(self.stream, piece.decode(errors="replace"), newline=ended)

    def end(self) -> Iterator[LogLine]:
        if piece := self.rest():
            yield LogLine(self.stream, piece.decode(errors="replace"), newline=False)


class _Assemblers:
    def __init__(self) -> None:
        self.of = {"stdout": LineAssembler("stdout"), "stderr": LineAssembler("stderr")}

    def end(self) -> Iterator[LogLine]:
        for assembler in self.of.values():
            yield from assembler.end()


class _Seen:
    """Where each stream of a followed log has got to: the engine's stamp of the last entry
    passed on, whether that entry ended its line, and how many entries with that stamp (the
    pieces of one long line) were passed on. A read again meets them from the first:
    :meth:`start` begins counting anew."""

    def __init__(self) -> None:
        self._at: dict[str, tuple[bytes, bool, int]] = {}
        self._met: dict[str, tuple[bytes, int]] = {}
        self.entries = 0
        """Entries passed on so far."""

    def start(self) -> None:
        self._met = {}

    def admits(self, stream: str, stamp: bytes) -> bool:
        if not _STAMP.fullmatch(stamp):
            return True
        met_stamp, met = self._met.get(stream, (b"", 0))
        met = met + 1 if met_stamp == stamp else 1
        self._met[stream] = (stamp, met)
        at = self._at.get(stream)
        if at is None:
            return True
        last, ended, count = at
        return stamp > last or (stamp == last and not ended and met > count)

    def passed(self, stream: str, stamp: bytes, *, ended: bool) -> None:
        if _STAMP.fullmatch(stamp):
            last, _, count = self._at.get(stream, (b"", False, 0))
            self._at[stream] = (stamp, ended, count + 1 if last == stamp else 1)
        self.entries += 1

    def since(self) -> str | None:
        """The engine's ``since`` for reading again from the earliest stream's last entry
        (``seconds.nanoseconds``, exact); None when nothing was passed on."""
        if not self._at:
            return None
        stamp = min(s for s, _, _ in self._at.values()).decode()
        seconds = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
        return f"{seconds}.{stamp[20:29]}"


async def frames(
    content: aiohttp.StreamReader, *, tty: bool
) -> AsyncGenerator[tuple[str, bytes, bool, bool], None]:
    """``(stream, bytes, first, last)``: Docker's multiplexed stream (8-byte frame headers)
    in pieces of at most :data:`PIECE` bytes, ``first``/``last`` telling where a frame (one
    entry of the log) starts and ends; a terminal's raw stream in such pieces, as stdout
    and never a frame's edge."""
    if tty:
        while chunk := await content.read(PIECE):
            yield "stdout", chunk, False, False
        return
    while True:
        try:
            header = await content.readexactly(8)
        except asyncio.IncompleteReadError:
            return
        kind, left = struct.unpack(">BxxxL", header)
        stream = _STREAM_NAMES.get(kind, "stdout")
        first = True
        while left:
            size = min(left, PIECE)
            try:
                data = await content.readexactly(size)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    yield stream, e.partial, first, True
                return
            left -= size
            yield stream, data, first, left == 0
            first = False


class _FollowerFailed(errors.DockerAPIError):
    """The engine ended a log stream it had begun with a message of its own (Docker 20.10's
    json-file follower does on a fast rotation: ``Error grabbing logs: ... file already
    closed``)."""


def _split_stamp(data: bytes) -> tuple[bytes, bytes]:
    """``(stamp, rest)`` of an entry's first piece (``STAMP SP content``)."""
    space = data.find(b" ", 0, _STAMP_SEARCH)
    if space < 0:
        return b"", data
    return data[:space], data[space + 1 :]


async def _read(
    client: LogSource,
    container_id: str,
    params: dict[str, Any],
    *,
    tty: bool,
    assemblers: _Assemblers,
    seen: _Seen | None,
    strip: bool,
) -> AsyncGenerator[LogLine, None]:
    """One request's lines, the last piece of each stream left held in ``assemblers``;
    with ``seen``, entries passed on before are skipped (``strip``: their stamps are
    not passed on)."""
    skipping = False
    stamp = b""
    message = ""
    if seen is not None:
        seen.start()
    try:
        async with (
            client.log_response(container_id, params) as content,
            aclosing(frames(content, tty=tty)) as pieces,
        ):
            async for stream, data, first, last in pieces:
                if stream == "error":
                    message = data[:_MESSAGE].decode(errors="replace").strip() if first else message
                    if last:
                        raise _FollowerFailed(f"logs of container {container_id[:12]}: {message}")
                    continue
                if first and (seen is not None or strip):
                    stamp, rest = _split_stamp(data)
                    skipping = seen is not None and not seen.admits(stream, stamp)
                    if strip:
                        data = rest
                if skipping:
                    continue
                if last and seen is not None:
                    seen.passed(stream, stamp, ended=data.endswith(b"\n"))
                for line in assemblers.of[stream].feed(data):
                    yield line
    except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
        raise map_error(e, what=f"logs of container {container_id[:12]}") from e


async def _stopped(client: LogSource, container_id: str) -> bool:
    """Whether the container has stopped (and is still there to be read)."""
    try:
        info = await client.inspect_container(container_id)
    except errors.NotFound:
        return False
    return not info.get("State", {}).get("Running")


class _Request:
    """What one read of a container's log asks the engine, but ``follow``, ``tail`` and
    ``since`` that differ between the read and a read again."""

    def __init__(
        self,
        client: LogSource,
        container_id: str,
        *,
        stdout: bool,
        stderr: bool,
        tty: bool,
        since: float | None,
        timestamps: bool,
    ) -> None:
        self.client = client
        self.container_id = container_id
        self.stdout = stdout
        self.stderr = stderr
        self.tty = tty
        self.since = None if since is None else f"{since:.9f}"
        self.timestamps = timestamps

    def read(
        self,
        *,
        follow: bool,
        tail: int | None,
        since: str | None,
        assemblers: _Assemblers,
        seen: _Seen | None,
    ) -> AsyncGenerator[LogLine, None]:
        query: dict[str, Any] = {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "follow": follow,
            "timestamps": self.timestamps or seen is not None,
            "tail": "all" if tail is None else str(tail),
        }
        if since is not None:
            query["since"] = since
        return _read(
            self.client,
            self.container_id,
            query,
            tty=self.tty,
            assemblers=assemblers,
            seen=seen,
            strip=seen is not None and not self.timestamps,
        )

    async def whole(self, *, follow: bool, tail: int | None) -> AsyncGenerator[LogLine, None]:
        """One read, each stream's last piece included."""
        assemblers = _Assemblers()
        read = self.read(
            follow=follow, tail=tail, since=self.since, assemblers=assemblers, seen=None
        )
        async with aclosing(read) as lines:
            async for line in lines:
                yield line
        for line in assemblers.end():
            yield line

    async def followed(self, *, tail: int | None) -> AsyncGenerator[LogLine, None]:
        """A followed read of frames with stamps, asked again from the last entry passed on
        when the engine's follower fails while the container runs; once the container has
        stopped, a read again from there (none passed on: from the start, unless a
        ``tail`` asked for no more)."""
        seen = _Seen()
        assemblers = _Assemblers()
        failures = 0
        while True:
            again = seen.since()
            read = self.read(
                follow=True,
                tail=tail if again is None else None,
                since=again or self.since,
                assemblers=assemblers,
                seen=seen,
            )
            before = seen.entries
            try:
                async with aclosing(read) as lines:
                    async for line in lines:
                        yield line
                break
            except _FollowerFailed as e:
                failures = 0 if seen.entries > before else failures + 1
                if await _stopped(self.client, self.container_id):
                    break
                if failures >= _RESUMES:
                    raise
                logger.debug("{}; following again from the last entry passed on", e)
                await anyio.sleep(0.05 * 2**failures)
        again = seen.since()
        if (again is not None or tail is None) and await _stopped(self.client, self.container_id):
            since = again or self.since
            read = self.read(follow=False, tail=None, since=since, assemblers=assemblers, seen=seen)
            async with aclosing(read) as lines:
                async for line in lines:
                    yield line
        for line in assemblers.end():
            yield line

    async def counted(self, *, tail: int | None) -> AsyncGenerator[LogLine, None]:
        """A followed read of a terminal's raw stream; once the container has stopped, a
        read again past as many lines as were passed on (:data:`FOLLOW_RECHECK_LINES`)."""
        received = 0
        async with aclosing(self.whole(follow=True, tail=tail)) as lines:
            async for line in lines:
                received += 1
                yield line
        if tail is not None or received > FOLLOW_RECHECK_LINES:
            return
        if not await _stopped(self.client, self.container_id):
            return
        count = 0
        async with aclosing(self.whole(follow=False, tail=None)) as lines:
            async for line in lines:
                count += 1
                if count > received:
                    yield line


async def container_logs(
    client: LogSource,
    container_id: str,
    *,
    follow: bool,
    stdout: bool,
    stderr: bool,
    tail: int | None,
    since: float | None,
    timestamps: bool,
) -> AsyncGenerator[LogLine, None]:
    """:meth:`DockerClient.logs`: the container's output in lines of at most
    :data:`PIECE` bytes. Followed, the output is complete when the container stops: the
    log is read again from where the follow stream got to."""
    info = await client.inspect_container(container_id)
    tty = bool(info.get("Config", {}).get("Tty"))
    request = _Request(
        client,
        container_id,
        stdout=stdout,
        stderr=stderr,
        tty=tty,
        since=since,
        timestamps=timestamps,
    )
    if not follow:
        lines = request.whole(follow=False, tail=tail)
    elif tty:
        lines = request.counted(tail=tail)
    else:
        lines = request.followed(tail=tail)
    async with aclosing(lines):
        async for line in lines:
            yield line


__all__ = ["FOLLOW_RECHECK_LINES", "PIECE", "LineAssembler", "container_logs", "frames", "utf8_cut"]
