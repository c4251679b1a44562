"""How many containers the engine is asked to create and start at once.

Docker makes containers fastest a few at a time. Asked for every container of a burst at
once, dockerd, containerd and runc contend for the same locks and cores, and the whole burst
takes longer than the same work queued (docs/benchmarks.md). docker-compose bounds its
parallel operations the same way (``COMPOSE_PARALLEL_LIMIT``).

A :class:`StartGate` holds at most ``limit`` creations (each a create and start of one
container, a sandbox's pause container among them) under way; the others wait their turn
in order. A pod's own containers go before the sandboxes of pods not begun: the pods of a
burst come up one after another rather than all at the end. A start that waits can be
cancelled; once it has its slot, what it makes is not split by a cancellation (the
callers shield the create and start).
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator

import anyio

STARTS_PER_CPU = 4
MIN_PARALLEL_STARTS = 8


def default_parallel_starts() -> int:
    """Four per CPU of this machine, at least eight."""
    return max(MIN_PARALLEL_STARTS, STARTS_PER_CPU * (os.cpu_count() or 1))


class StartGate:
    """At most ``limit`` container creations at once (0: no limit)."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"the limit of parallel starts must be 0 or more, not {limit}")
        self.limit = limit
        self.busy = 0
        """Slots held now."""
        self._waiting: tuple[deque[anyio.Event], deque[anyio.Event]] = (deque(), deque())
        """Those waiting for a slot: a pod's own containers first, then new sandboxes."""

    @property
    def waiting(self) -> int:
        return len(self._waiting[0]) + len(self._waiting[1])

    @contextlib.asynccontextmanager
    async def slot(self, *, sandbox: bool = False) -> AsyncIterator[None]:
        """Hold a slot while the body creates and starts one container; ``sandbox``: the
        container is a new pod's sandbox, which waits behind the containers of pods
        already under way."""
        if not self.limit:
            yield
            return
        await self._acquire(self._waiting[1 if sandbox else 0])
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, queue: deque[anyio.Event]) -> None:
        if self.busy < self.limit and not self.waiting:
            self.busy += 1
            return
        turn = anyio.Event()
        queue.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                # The slot was handed over as the wait was cancelled: pass it on.
                self._release()
            else:
                queue.remove(turn)
            raise

    def _release(self) -> None:
        for queue in self._waiting:
            if queue:
                # The slot goes to the next in line as it is: ``busy`` stays.
                queue.popleft().set()
                return
        self.busy -= 1


__all__ = ["StartGate", "default_parallel_starts"]
