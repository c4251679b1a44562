"""The exec subresource's client side: the channels read as the node writes them, the
outcome on the error channel turned into the command's exit code or an error."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from asynckubelet import errors
from asynckubelet.api.execclient import StreamSession

pytestmark = pytest.mark.anyio


class Messages:
    """The messages a WebSocket receives, then its close; what is sent is kept."""

    def __init__(self, *frames: bytes) -> None:
        self.frames = list(frames)
        self.sent: list[bytes] = []

    async def receive(self) -> aiohttp.WSMessage:
        if self.frames:
            return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, self.frames.pop(0), None)
        return aiohttp.WSMessage(aiohttp.WSMsgType.CLOSED, None, None)

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)


def outcome(body: dict[str, Any]) -> bytes:
    return b"\x03" + json.dumps(body).encode()


async def drained(session: StreamSession) -> list[tuple[int, bytes]]:
    pieces = []
    while (piece := await session.read()) is not None:
        pieces.append(piece)
    return pieces


async def test_output_comes_by_channel_and_success_is_exit_code_0() -> None:
    ws = Messages(b"\x01", b"\x01out", b"\x02err", outcome({"status": "Success"}))
    session = StreamSession(ws)  # type: ignore[arg-type]
    assert await drained(session) == [(1, b"out"), (2, b"err")]
    assert not await session.running()
    assert await session.exit_code() == 0


async def test_a_non_zero_exit_is_the_code_its_cause_carries() -> None:
    failure = {
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    session = StreamSession(Messages(outcome(failure)))  # type: ignore[arg-type]
    await drained(session)
    assert await session.exit_code() == 3


async def test_a_command_that_could_not_run_is_an_error_with_the_nodes_words() -> None:
    failure = {"status": "Failure", "reason": "InternalError", "message": "no such file"}
    session = StreamSession(Messages(outcome(failure)))  # type: ignore[arg-type]
    await drained(session)
    with pytest.raises(errors.PodError, match="no such file"):
        await session.exit_code()


async def test_a_stream_that_ends_without_an_outcome_is_an_error() -> None:
    session = StreamSession(Messages(b"\x01partial"))  # type: ignore[arg-type]
    assert await drained(session) == [(1, b"partial")]
    with pytest.raises(errors.PodError, match="ended before the command did"):
        await session.exit_code()


async def test_input_its_end_and_the_window_size_go_on_their_channels() -> None:
    ws = Messages()
    session = StreamSession(ws)  # type: ignore[arg-type]
    await session.write(b"hi")
    await session.resize(rows=33, columns=111)
    assert ws.sent == [b"\x00hi", b'\x04{"Width": 111, "Height": 33}']
