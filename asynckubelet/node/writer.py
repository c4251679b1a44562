"""Writing what the node records to files without holding its event loop.

The status manager and the event recorder keep files beside the node's state (a status
file per pod, ``events.jsonl``). A write the disk is slow to take would hold every pod's
work if it ran on the loop, so while the node runs they hand what they record to a
:class:`BatchWriter`: the loop queues an item and returns, and one worker thread writes
everything queued since the last write in one call. Before the writer runs and after it
stops, an item is written at once (a library user who never starts the node still gets
its files, and nothing queued is lost at the end).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

T = TypeVar("T")


class BatchWriter(Generic[T]):
    """Queues items on the loop and passes them, in order and in batches, to ``write``
    (a blocking function, called in a worker thread while :meth:`run` runs)."""

    def __init__(self, write: Callable[[builtins.list[T]], None]) -> None:
        self._write = write
        self._pending: builtins.list[T] = []
        self._dirty: anyio.Event | None = None

    def add(self, item: T) -> None:
        """Queue ``item`` while :meth:`run` runs; else write it now."""
        if self._dirty is None:
            self._write([item])
            return
        self._pending.append(item)
        self._dirty.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Write what is queued in a worker thread until cancelled; what is left is
        written before this returns. A batch whose write was cancelled or failed goes
        back to the front of the queue."""
        self._dirty = anyio.Event()
        task_status.started()
        try:
            while True:
                await self._dirty.wait()
                self._dirty = anyio.Event()
                batch, self._pending = self._pending, []
                try:
                    await anyio.to_thread.run_sync(self._write, batch)
                except BaseException:
                    self._pending = batch + self._pending
                    raise
        finally:
            self._dirty = None
            batch, self._pending = self._pending, []
            if batch:
                self._write(batch)


__all__ = ["BatchWriter"]
