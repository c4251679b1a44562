"""SPDY/3.1 framing and a server-side session: what ``kubectl exec`` and ``port-forward``
speak to a kubelet through the API server.

The API server passes a client's ``Upgrade: SPDY/3.1`` through to the kubelet, and the
two ends then exchange SPDY frames on the raw connection: the client opens one stream per
channel (``SYN_STREAM`` with a ``streamType`` header), the kubelet answers each with a
``SYN_REPLY`` and then both send ``DATA``; ``FLAG_FIN`` half-closes a stream, ``GOAWAY``
ends the session. Header blocks are zlib streams (one per direction for the whole
connection) primed with the SPDY/3 dictionary and flushed with ``Z_SYNC_FLUSH``.

No maintained Python SPDY/3.1 library exists, so this is the minimum a kubelet needs:
``SYN_STREAM``, ``SYN_REPLY``, ``RST_STREAM``, ``SETTINGS``, ``PING``, ``GOAWAY``,
``HEADERS``, ``WINDOW_UPDATE`` and ``DATA``. Flow control: received data is acknowledged
with ``WINDOW_UPDATE`` once half a window has been consumed; the peer's windows are not
enforced on sending, as Kubernetes' own SPDY library (spdystream) neither sends
``WINDOW_UPDATE`` nor waits for one.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynckubelet._logging import logger

VERSION = 3
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
DEFAULT_WINDOW = 64 * 1024
MAX_FRAME_LENGTH = 0xFFFFFF
MAX_DATA_CHUNK = 32 * 1024
MAX_HEADER_BLOCK = 256 * 1024
"""Largest decompressed header block accepted (a peer cannot make the node inflate more)."""


class FrameType(enum.IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


class RstStatus(enum.IntEnum):
    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    CANCEL = 5
    INTERNAL_ERROR = 6
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3.1."""


_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding "
    "accept-language accept-ranges age allow authorization cache-control connection "
    "content-base content-encoding content-language content-length content-location "
    "content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
    "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
    "server te trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status"
)
_NAMES = [
    *_WORDS.split(),
    *("200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"),
]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502"
    "504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad "
    "Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not "
    "Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec "
    "00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,"
    "image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,"
    "publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(n)) + n.encode() for n in _NAMES) + _TAIL.encode()
"""The SPDY/3 header compression dictionary (draft 3, section 2.6.10.1): each of the
common header names and values with a 4-byte length, then common text."""


Headers = dict[str, list[str]]


def encode_header_block(headers: Mapping[str, list[str] | str]) -> bytes:
    """The uncompressed name/value block: names lower-cased, several values joined by NUL."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        key = name.lower().encode()
        value = (values if isinstance(values, str) else "\0".join(values)).encode()
        out += [struct.pack(">I", len(key)), key, struct.pack(">I", len(value)), value]
    return b"".join(out)


def decode_header_block(data: bytes) -> Headers:
    def take(at: int, n: int) -> tuple[bytes, int]:
        if at + n > len(data):
            raise ProtocolError("header block is cut short")
        return data[at : at + n], at + n

    raw, at = take(0, 4)
    (count,) = struct.unpack(">I", raw)
    headers: Headers = {}
    for _ in range(count):
        raw, at = take(at, 4)
        name, at = take(at, struct.unpack(">I", raw)[0])
        raw, at = take(at, 4)
        value, at = take(at, struct.unpack(">I", raw)[0])
        if not name:
            raise ProtocolError("empty header name")
        headers.setdefault(name.decode("latin-1").lower(), []).extend(
            value.decode("latin-1").split("\0")
        )
    return headers


class HeaderCompressor:
    """One direction's header compression context (it spans the connection)."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(zdict=DICTIONARY)

    def compress(self, headers: Mapping[str, list[str] | str]) -> bytes:
        return self._z.compress(encode_header_block(headers)) + self._z.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    def __init__(self) -> None:
        self._z = zlib.decompressobj(zdict=DICTIONARY)

    def decompress(self, data: bytes) -> Headers:
        try:
            raw = self._z.decompress(data, MAX_HEADER_BLOCK)
        except zlib.error as e:
            raise ProtocolError(f"header block does not decompress: {e}") from None
        if self._z.unconsumed_tail:
            raise ProtocolError("header block too large")
        return decode_header_block(raw)


# -- frames ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataFrame:
    stream_id: int
    data: bytes
    flags: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


@dataclass(frozen=True)
class ControlFrame:
    """A control frame; ``payload`` is its body after the 8-byte header (header blocks
    still compressed)."""

    type: int
    flags: int
    payload: bytes


Frame = DataFrame | ControlFrame


def control(type_: int, payload: bytes, *, flags: int = 0) -> bytes:
    if len(payload) > MAX_FRAME_LENGTH:
        raise ValueError("frame too large")
    return struct.pack(">HHI", 0x8000 | VERSION, type_, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    return (
        struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data))
        + data
    )


def syn_stream(
    compressor: HeaderCompressor,
    stream_id: int,
    headers: Mapping[str, list[str] | str],
    *,
    flags: int = 0,
    priority: int = 0,
) -> bytes:
    body = struct.pack(">IIBB", stream_id, 0, (priority & 7) << 5, 0)
    return control(FrameType.SYN_STREAM, body + compressor.compress(headers), flags=flags)


def syn_reply(
    compressor: HeaderCompressor,
    stream_id: int,
    headers: Mapping[str, list[str] | str],
    *,
    flags: int = 0,
) -> bytes:
    body = struct.pack(">I", stream_id) + compressor.compress(headers)
    return control(FrameType.SYN_REPLY, body, flags=flags)


def rst_stream(stream_id: int, status: int) -> bytes:
    return control(FrameType.RST_STREAM, struct.pack(">II", stream_id, status))


def ping(ping_id: int) -> bytes:
    return control(FrameType.PING, struct.pack(">I", ping_id))


def goaway(last_good: int, status: int = 0) -> bytes:
    return control(FrameType.GOAWAY, struct.pack(">II", last_good, status))


def window_update(stream_id: int, delta: int) -> bytes:
    return control(FrameType.WINDOW_UPDATE, struct.pack(">II", stream_id, delta))


def settings(values: Mapping[int, int]) -> bytes:
    body = struct.pack(">I", len(values)) + b"".join(
        struct.pack(">II", key & 0xFFFFFF, value) for key, value in values.items()
    )
    return control(FrameType.SETTINGS, body)


class FrameReader:
    """Cuts a byte stream into frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer)
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            flags = second >> 24
            if first & 0x80000000:
                version = (first >> 16) & 0x7FFF
                if version != VERSION:
                    raise ProtocolError(f"SPDY version {version}, not {VERSION}")
                frames.append(ControlFrame(type=first & 0xFFFF, flags=flags, payload=payload))
            else:
                frames.append(DataFrame(stream_id=first & 0x7FFFFFFF, data=payload, flags=flags))
        return frames


# -- the session ---------------------------------------------------------------------------


@dataclass(eq=False)
class Stream:
    """A stream the client opened: its headers, the data it sends, what we send back."""

    session: Session
    id: int
    headers: Headers
    _send: MemoryObjectSendStream[bytes] = field(repr=False)
    _receive: MemoryObjectReceiveStream[bytes] = field(repr=False)
    remote_closed: bool = False
    local_closed: bool = False
    consumed: int = 0

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower()) or [""]
        return values[0]

    async def read(self) -> bytes:
        """The next data the peer sent; b"" once it half-closed the stream (or reset it)."""
        try:
            data = await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._receive.close()
            return b""
        await self.session._consumed(self, len(data))
        return data

    async def read_all(self, limit: int = 1 << 20) -> bytes:
        chunks = []
        size = 0
        while size < limit:
            data = await self.read()
            if not data:
                break
            chunks.append(data)
            size += len(data)
        return b"".join(chunks)

    async def write(self, data: bytes) -> None:
        if self.local_closed:
            return
        for at in range(0, len(data), MAX_DATA_CHUNK):
            await self.session._write(data_frame(self.id, data[at : at + MAX_DATA_CHUNK]))

    async def close(self) -> None:
        """Half-close: no more data from this side (``FLAG_FIN``)."""
        if self.local_closed:
            return
        self.local_closed = True
        await self.session._write(data_frame(self.id, b"", fin=True))

    async def reset(self, status: int = RstStatus.CANCEL) -> None:
        self.local_closed = True
        self._remote_fin()
        await self.session._write(rst_stream(self.id, status))

    def _remote_fin(self) -> None:
        self.remote_closed = True
        self._send.close()


class Session:
    """The server side of a SPDY/3.1 connection.

    ``write`` sends bytes on the connection; :meth:`feed` is given what arrives.
    ``on_stream`` is called with each stream the peer opens, after its ``SYN_REPLY`` was
    sent. Streams buffer what arrives up to a window each."""

    def __init__(
        self,
        write: Callable[[bytes], Awaitable[None]],
        *,
        on_stream: Callable[[Stream], None],
        window: int = DEFAULT_WINDOW,
    ) -> None:
        self._raw_write = write
        self._on_stream = on_stream
        self._reader = FrameReader()
        self._compressor = HeaderCompressor()
        self._decompressor = HeaderDecompressor()
        self._lock = anyio.Lock()
        self.window = window
        self.streams: dict[int, Stream] = {}
        self.last_stream_id = 0
        self.next_stream_id = 1
        """The ID of the next stream this side opens (as a client: odd)."""
        self.gone_away = False
        self.closed = anyio.Event()

    async def _write(self, data: bytes) -> None:
        async with self._lock:
            await self._raw_write(data)

    async def open_stream(self, headers: Mapping[str, str]) -> Stream:
        """Open a stream from this side (the client's end of the session): ``SYN_STREAM``
        with ``headers``; what the peer sends on it is read from the stream."""
        async with self._lock:
            stream_id = self.next_stream_id
            self.next_stream_id += 2
            send, receive = anyio.create_memory_object_stream[bytes](16)
            stream = Stream(
                session=self,
                id=stream_id,
                headers={k.lower(): [v] for k, v in headers.items()},
                _send=send,
                _receive=receive,
            )
            self.streams[stream_id] = stream
            await self._raw_write(syn_stream(self._compressor, stream_id, dict(headers)))
        return stream

    async def _consumed(self, stream: Stream, size: int) -> None:
        stream.consumed += size
        if stream.consumed >= self.window // 2 and not stream.remote_closed:
            delta, stream.consumed = stream.consumed, 0
            await self._write(window_update(stream.id, delta))

    async def feed(self, data: bytes) -> None:
        """Handle what arrived on the connection; raises ProtocolError on garbage."""
        for frame in self._reader.feed(data):
            if isinstance(frame, DataFrame):
                await self._on_data(frame)
            else:
                await self._on_control(frame)

    def connection_lost(self) -> None:
        """The connection ended: every stream reads to its end (what arrived stays readable
        until :meth:`release`)."""
        for stream in self.streams.values():
            stream._remote_fin()
        self.closed.set()

    def release(self) -> None:
        """Drop every stream's buffer; the session's owner calls it once its handlers are
        done."""
        for stream in self.streams.values():
            stream._send.close()
            stream._receive.close()

    async def _on_data(self, frame: DataFrame) -> None:
        stream = self.streams.get(frame.stream_id)
        if stream is None or stream.remote_closed:
            if frame.data:
                await self._write(rst_stream(frame.stream_id, RstStatus.INVALID_STREAM))
            return
        if frame.data:
            # A full stream holds up the connection's reading: the peer's writes block in
            # TCP, whatever it does with the windows.
            try:
                await stream._send.send(frame.data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                logger.debug("spdy stream {}: data after its reader left", stream.id)
        if frame.fin:
            stream._remote_fin()

    async def _on_control(self, frame: ControlFrame) -> None:
        handlers: dict[int, Callable[[ControlFrame], Awaitable[None]]] = {
            FrameType.SYN_STREAM: self._on_syn_stream,
            FrameType.RST_STREAM: self._on_rst_stream,
            FrameType.PING: self._on_ping,
            FrameType.HEADERS: self._on_headers,
            FrameType.SYN_REPLY: self._on_syn_reply,
        }
        handler = handlers.get(frame.type)
        if frame.type == FrameType.GOAWAY:
            self.gone_away = True
        elif handler is not None:
            await handler(frame)
        # SETTINGS, WINDOW_UPDATE and unknown types are read and ignored.

    async def _on_syn_stream(self, frame: ControlFrame) -> None:
        p = frame.payload
        if len(p) < 10:
            raise ProtocolError("SYN_STREAM too short")
        stream_id = struct.unpack_from(">I", p)[0] & 0x7FFFFFFF
        headers = self._decompressor.decompress(p[10:])
        if self.gone_away:
            await self._write(rst_stream(stream_id, RstStatus.REFUSED_STREAM))
            return
        if stream_id in self.streams or stream_id % 2 == 0 or stream_id <= self.last_stream_id:
            await self._write(rst_stream(stream_id, RstStatus.PROTOCOL_ERROR))
            return
        self.last_stream_id = stream_id
        send, receive = anyio.create_memory_object_stream[bytes](16)
        stream = Stream(session=self, id=stream_id, headers=headers, _send=send, _receive=receive)
        self.streams[stream_id] = stream
        if frame.flags & FLAG_FIN:
            stream._remote_fin()
        if frame.flags & FLAG_UNIDIRECTIONAL:
            stream.local_closed = True
        else:
            await self._write(syn_reply(self._compressor, stream_id, {}))
        self._on_stream(stream)

    async def _on_rst_stream(self, frame: ControlFrame) -> None:
        p = frame.payload
        if len(p) != 8:
            raise ProtocolError("RST_STREAM of a wrong length")
        stream_id = struct.unpack_from(">I", p)[0] & 0x7FFFFFFF
        reset = self.streams.get(stream_id)
        if reset is not None:
            reset.local_closed = True
            reset._remote_fin()

    async def _on_ping(self, frame: ControlFrame) -> None:
        p = frame.payload
        if len(p) != 4:
            raise ProtocolError("PING of a wrong length")
        (ping_id,) = struct.unpack(">I", p)
        if ping_id % 2 == 1:
            await self._write(ping(ping_id))

    async def _on_headers(self, frame: ControlFrame) -> None:
        p = frame.payload
        if len(p) < 4:
            raise ProtocolError("HEADERS too short")
        self._decompressor.decompress(p[4:])
        if frame.flags & FLAG_FIN:
            ended = self.streams.get(struct.unpack_from(">I", p)[0] & 0x7FFFFFFF)
            if ended is not None:
                ended._remote_fin()

    async def _on_syn_reply(self, frame: ControlFrame) -> None:
        p = frame.payload
        if len(p) < 4:
            raise ProtocolError("SYN_REPLY too short")
        self._decompressor.decompress(p[4:])

    async def goaway(self) -> None:
        """Tell the peer the session ends (no new streams)."""
        if not self.gone_away:
            self.gone_away = True
            await self._write(goaway(self.last_stream_id))


__all__ = [
    "DICTIONARY",
    "ControlFrame",
    "DataFrame",
    "FrameReader",
    "FrameType",
    "HeaderCompressor",
    "HeaderDecompressor",
    "ProtocolError",
    "RstStatus",
    "Session",
    "Stream",
    "data_frame",
    "decode_header_block",
    "encode_header_block",
    "syn_reply",
    "syn_stream",
]
