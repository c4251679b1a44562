"""SPDY/3.1 framing and the server session that ``kubectl exec``/``port-forward`` talk to:
frames round trip, header blocks share one compression context per direction, streams are
answered, their data delivered and half-closed, pings echoed, windows acknowledged."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import anyio
import pytest

from asynckubelet.api import spdy

pytestmark = pytest.mark.anyio


def test_the_dictionary_is_spdy3s() -> None:
    # zlib streams name their dictionary by its Adler-32: a client's header blocks only
    # inflate with exactly these 1423 bytes.
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"utf-,*,enq=0.")


def test_header_blocks_round_trip_through_one_compression_context() -> None:
    out, into = spdy.HeaderCompressor(), spdy.HeaderDecompressor()
    first: dict[str, list[str] | str] = {"streamType": "stdout", "X-Multi": ["a", "b"]}
    second = {"streamtype": "stderr", "port": "8080"}
    one, two = out.compress(first), out.compress(second)
    assert into.decompress(one) == {"streamtype": ["stdout"], "x-multi": ["a", "b"]}
    # The second block refers back into the first's window: it inflates only in sequence.
    assert into.decompress(two) == {"streamtype": ["stderr"], "port": ["8080"]}
    with pytest.raises(spdy.ProtocolError):
        spdy.HeaderDecompressor().decompress(two)


def test_a_header_block_that_is_cut_short_is_a_protocol_error() -> None:
    block = spdy.encode_header_block({"a": "b"})
    assert spdy.decode_header_block(block) == {"a": ["b"]}
    with pytest.raises(spdy.ProtocolError):
        spdy.decode_header_block(block[:-1])


def test_frames_are_cut_from_a_byte_stream_fed_in_pieces() -> None:
    wire = (
        spdy.data_frame(1, b"hello")
        + spdy.ping(7)
        + spdy.data_frame(3, b"", fin=True)
        + spdy.window_update(1, 100)
    )
    reader = spdy.FrameReader()
    frames: list[spdy.Frame] = []
    for at in range(0, len(wire), 3):
        frames += reader.feed(wire[at : at + 3])
    assert frames[0] == spdy.DataFrame(stream_id=1, data=b"hello")
    assert frames[1] == spdy.ControlFrame(
        type=spdy.FrameType.PING, flags=0, payload=struct.pack(">I", 7)
    )
    assert frames[2] == spdy.DataFrame(stream_id=3, data=b"", flags=spdy.FLAG_FIN)
    assert isinstance(frames[3], spdy.ControlFrame)
    assert frames[3].type == spdy.FrameType.WINDOW_UPDATE
    assert struct.unpack(">II", frames[3].payload) == (1, 100)


def test_a_frame_of_another_spdy_version_is_refused() -> None:
    frame = struct.pack(">HHI", 0x8000 | 2, spdy.FrameType.PING, 4) + b"\0\0\0\1"
    with pytest.raises(spdy.ProtocolError):
        spdy.FrameReader().feed(frame)


SESSIONS: list[spdy.Session] = []
"""Every session a test made; each is released after its test, as the server does."""


@pytest.fixture(autouse=True)
def _release_sessions() -> Iterator[None]:
    yield
    while SESSIONS:
        SESSIONS.pop().release()


class Client:
    """The client end: frames into the session, what the session sends parsed back."""

    def __init__(self, *, window: int = spdy.DEFAULT_WINDOW) -> None:
        self.compressor = spdy.HeaderCompressor()
        self.decompressor = spdy.HeaderDecompressor()
        self.reader = spdy.FrameReader()
        self.received: list[spdy.Frame] = []
        self.opened: list[spdy.Stream] = []
        self.session = spdy.Session(self._from_server, on_stream=self.opened.append, window=window)
        SESSIONS.append(self.session)

    async def _from_server(self, data: bytes) -> None:
        self.received += self.reader.feed(data)

    async def open(self, stream_id: int, headers: dict[str, str], *, fin: bool = False) -> None:
        flags = spdy.FLAG_FIN if fin else 0
        await self.session.feed(spdy.syn_stream(self.compressor, stream_id, headers, flags=flags))

    def controls(self, type_: int) -> list[spdy.ControlFrame]:
        return [f for f in self.received if isinstance(f, spdy.ControlFrame) and f.type == type_]

    def data(self, stream_id: int) -> list[spdy.DataFrame]:
        return [
            f for f in self.received if isinstance(f, spdy.DataFrame) and f.stream_id == stream_id
        ]


async def test_a_stream_the_client_opens_is_answered_and_carries_data_both_ways() -> None:
    client = Client()
    await client.open(1, {"streamType": "stdin"})
    (reply,) = client.controls(spdy.FrameType.SYN_REPLY)
    assert struct.unpack_from(">I", reply.payload)[0] == 1
    assert client.decompressor.decompress(reply.payload[4:]) == {}
    (stream,) = client.opened
    assert stream.header("streamType") == "stdin"

    await client.session.feed(spdy.data_frame(1, b"abc") + spdy.data_frame(1, b"", fin=True))
    assert await stream.read() == b"abc"
    assert await stream.read() == b""

    await stream.write(b"x" * (spdy.MAX_DATA_CHUNK + 1))
    await stream.close()
    sent = client.data(1)
    assert [len(f.data) for f in sent] == [spdy.MAX_DATA_CHUNK, 1, 0]
    assert sent[-1].fin
    assert not sent[0].fin


async def test_streams_must_have_new_odd_ids() -> None:
    client = Client()
    await client.open(3, {"streamType": "error"})
    await client.open(1, {"streamType": "stdout"})
    await client.open(4, {"streamType": "stdout"})
    resets = client.controls(spdy.FrameType.RST_STREAM)
    assert [struct.unpack(">II", r.payload) for r in resets] == [
        (1, spdy.RstStatus.PROTOCOL_ERROR),
        (4, spdy.RstStatus.PROTOCOL_ERROR),
    ]
    assert [s.id for s in client.opened] == [3]


async def test_a_client_ping_is_echoed_and_a_goaway_refuses_new_streams() -> None:
    client = Client()
    await client.session.feed(spdy.ping(5))
    (pong,) = client.controls(spdy.FrameType.PING)
    assert struct.unpack(">I", pong.payload) == (5,)
    await client.session.feed(spdy.goaway(0))
    await client.open(1, {"streamType": "stdout"})
    (reset,) = client.controls(spdy.FrameType.RST_STREAM)
    assert struct.unpack(">II", reset.payload) == (1, spdy.RstStatus.REFUSED_STREAM)


async def test_consumed_data_is_acknowledged_with_window_updates() -> None:
    client = Client(window=1000)
    await client.open(1, {"streamType": "stdin"})
    (stream,) = client.opened
    await client.session.feed(spdy.data_frame(1, b"a" * 400))
    await stream.read()
    assert client.controls(spdy.FrameType.WINDOW_UPDATE) == []
    await client.session.feed(spdy.data_frame(1, b"b" * 200))
    await stream.read()
    (update,) = client.controls(spdy.FrameType.WINDOW_UPDATE)
    assert struct.unpack(">II", update.payload) == (1, 600)


async def test_a_full_stream_holds_up_reading_until_its_reader_takes_data() -> None:
    client = Client()
    await client.open(1, {"streamType": "stdin"})
    (stream,) = client.opened
    fed = anyio.Event()

    async def feed() -> None:
        for _ in range(40):
            await client.session.feed(spdy.data_frame(1, b"z"))
        fed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        await anyio.wait_all_tasks_blocked()
        assert not fed.is_set()
        got = b""
        while len(got) < 40:
            got += await stream.read()
        await fed.wait()
    assert got == b"z" * 40


async def test_a_reset_or_a_lost_connection_ends_the_streams() -> None:
    client = Client()
    await client.open(1, {"streamType": "stdout"})
    await client.open(3, {"streamType": "stderr"})
    one, three = client.opened
    await client.session.feed(spdy.rst_stream(1, spdy.RstStatus.CANCEL))
    assert await one.read() == b""
    assert one.local_closed
    await one.write(b"dropped")
    assert client.data(1) == []
    client.session.connection_lost()
    assert await three.read() == b""
    assert client.session.closed.is_set()
