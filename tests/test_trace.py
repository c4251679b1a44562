"""The trace seam: marks in the order made, of the bound pod, and nothing at all when off."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet import _trace


@pytest.fixture
def trace_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "trace.jsonl"
    _trace.enable(path)
    try:
        yield path
    finally:
        _trace.disable()


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_marks_are_written_in_the_order_made_with_growing_times(trace_file: Path) -> None:
    for phase in ("seen", "admitted", "sync"):
        _trace.mark(phase, "uid-1")

    found = records(trace_file)
    assert [(r["pod"], r["phase"]) for r in found] == [
        ("uid-1", "seen"),
        ("uid-1", "admitted"),
        ("uid-1", "sync"),
    ]
    times = [int(str(r["t"])) for r in found]
    assert times == sorted(times)


@pytest.mark.anyio
async def test_a_bound_pod_is_the_pod_of_its_tasks_and_worker_threads(trace_file: Path) -> None:
    async def child() -> None:
        _trace.mark("in task")

    async def worker(uid: str) -> None:
        _trace.bind(uid)
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
        await anyio.to_thread.run_sync(_trace.mark, "in thread")

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "a")
        tg.start_soon(worker, "b")
    _trace.mark("outside")

    found = {(r["pod"], r["phase"]) for r in records(trace_file)}
    assert found == {
        ("a", "in task"),
        ("a", "in thread"),
        ("b", "in task"),
        ("b", "in thread"),
        ("", "outside"),
    }


def test_an_engine_call_is_recorded_with_its_start_and_end(trace_file: Path) -> None:
    _trace.bind("uid-2")
    began = _trace.clock()
    _trace.engine("start container 0123456789ab", began)

    (call,) = records(trace_file)
    assert call["engine"] == "start container 0123456789ab"
    assert call["pod"] == "uid-2"
    assert isinstance(call["end"], int)
    assert call["t"] == began <= call["end"]


def test_when_off_nothing_is_written_and_the_clock_is_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    _trace.enable(path)
    _trace.disable()

    def refuse(*_: object) -> None:
        raise AssertionError("a trace record was made while tracing is off")

    monkeypatch.setattr(_trace.Recorder, "write", refuse)
    _trace.bind("uid-3")
    _trace.mark("seen", "uid-3")
    _trace.engine("list containers", _trace.clock())

    assert not _trace.enabled()
    assert _trace.clock() == 0
    assert path.read_text() == ""


def test_when_off_a_mark_allocates_nothing() -> None:
    assert not _trace.enabled()
    here = tracemalloc.Filter(True, _trace.__file__)
    tracemalloc.start()
    try:
        for _ in range(1000):
            _trace.mark("container started")
            _trace.engine("start container", _trace.clock())
            _trace.bind("uid")
        allocated = tracemalloc.take_snapshot().filter_traces([here]).statistics("filename")
    finally:
        tracemalloc.stop()
    assert allocated == []


def test_the_environment_turns_it_on_only_when_it_names_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_trace.ENV, raising=False)
    _trace.from_environment()
    assert not _trace.enabled()

    monkeypatch.setenv(_trace.ENV, str(tmp_path / "t.jsonl"))
    _trace.from_environment()
    try:
        assert _trace.enabled()
        _trace.mark("seen", "uid-4")
    finally:
        _trace.disable()
    assert [r["phase"] for r in records(tmp_path / "t.jsonl")] == ["seen"]
