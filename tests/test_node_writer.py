"""The node's batched file writer: items queued on the loop, written in a worker thread in
order and in batches, nothing lost when it stops or a write fails."""

from __future__ import annotations

import threading

import anyio
import pytest

from asynckubelet.node.writer import BatchWriter

pytestmark = pytest.mark.anyio


async def test_an_item_added_while_the_writer_is_not_running_is_written_at_once() -> None:
    written: list[list[int]] = []
    writer = BatchWriter[int](written.append)
    writer.add(1)
    assert written == [[1]]


async def test_items_added_while_it_runs_are_written_in_order_off_the_loop() -> None:
    batches: list[list[int]] = []
    threads: set[int] = set()
    done = anyio.Event()

    def write(batch: list[int]) -> None:
        threads.add(threading.get_ident())
        batches.append(batch)
        if sum(len(b) for b in batches) == 3:
            done.set()

    writer = BatchWriter[int](write)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        writer.add(1)
        writer.add(2)
        writer.add(3)
        assert batches == []
        with anyio.fail_after(5):
            await done.wait()
        tg.cancel_scope.cancel()
    assert [i for b in batches for i in b] == [1, 2, 3]
    assert batches[0] == [1, 2, 3]
    assert threading.get_ident() not in threads


async def test_what_is_queued_when_it_stops_is_written_before_run_returns() -> None:
    written: list[int] = []
    writer = BatchWriter[int](written.extend)
    async with anyio.create_task_group() as tg:
        await tg.start(writer.run)
        writer.add(1)
        tg.cancel_scope.cancel()
    assert written == [1]
    writer.add(2)
    assert written == [1, 2]


async def test_a_batch_whose_write_failed_goes_back_in_front_of_the_queue() -> None:
    written: list[int] = []
    failures = [OSError("disk full")]

    def write(batch: list[int]) -> None:
        if failures:
            raise failures.pop()
        written.extend(batch)

    writer = BatchWriter[int](write)

    async def run_until_it_fails() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            writer.add(1)
            writer.add(2)
            await anyio.sleep(5)

    with pytest.raises(ExceptionGroup) as caught:
        await run_until_it_fails()
    assert [str(e) for e in caught.value.exceptions] == ["disk full"]
    assert written == [1, 2]
