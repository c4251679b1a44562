"""How many containers the engine is asked to create and start at once.

Docker makes containers fastest a few at a time. Asked for every container of a burst at
once, dockerd, containerd and runc contend for the same locks and cores, and the whole burst
takes longer than the same work queued (docs/benchmarks.md). docker-compose bounds its
parallel operations the same way (``COMPOSE_PARALLEL_LIMIT``).

A :class:`StartGate` holds at most ``limit`` creations (each a create and start of one
container, a sandbox's pause container among them) under way; the others wait their turn
in order. A pod's own containers go before the sandboxes of pods not begun: the pods of a
burst come up one after another rather than all at the end. Between its sandbox and its
first container a pod sets up its network, while none of its containers is waiting yet:
so the slot its sandbox gives back stays claimed for the pod, and no new sandbox takes it
until one of the pod's containers asks for a slot or the pod gives the claim up. The
containers of other pods may use a claimed slot meanwhile, so the engine is not kept idle
while starts of pods under way wait. A start that waits can be cancelled; once it has its
slot, what it makes is not split by a cancellation (the callers shield the create and
start).
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
        self.claims: set[str] = set()
        """The pods whose sandbox gave its slot back and whose containers have not asked
        for one yet: each keeps a slot from new sandboxes."""
        self._waiting: tuple[deque[anyio.Event], deque[anyio.Event]] = (deque(), deque())
        """Those waiting for a slot: a pod's own containers first, then new sandboxes."""

    @property
    def waiting(self) -> int:
        return len(self._waiting[0]) + len(self._waiting[1])

    @contextlib.asynccontextmanager
    async def slot(self, *, sandbox: bool = False, pod: str = "") -> AsyncIterator[None]:
        """Hold a slot while the body creates and starts one container; ``sandbox``: the
        container is a new pod's sandbox, which waits behind the containers of pods
        already under way. ``pod``: the pod's UID; a sandbox made without an error leaves
        its slot claimed for the pod's containers, and a container's slot redeems the
        pod's claim."""
        if not self.limit:
            yield
            return
        if not sandbox and pod:
            self.claims.discard(pod)
        await self._acquire(sandbox=sandbox)
        try:
            yield
        except BaseException:
            self._release()
            raise
        if sandbox and pod:
            self.claims.add(pod)
        self._release()

    def unclaim(self, pod: str) -> None:
        """``pod`` starts no container now: its claim, if any, goes to the next in line."""
        if pod in self.claims:
            self.claims.discard(pod)
            self._dispatch()

    def _free(self, *, sandbox: bool) -> bool:
        if sandbox:
            return self.busy + len(self.claims) < self.limit and not self.waiting
        return self.busy < self.limit and not self._waiting[0]

    async def _acquire(self, *, sandbox: bool) -> None:
        if self._free(sandbox=sandbox):
            self.busy += 1
            return
        turn = anyio.Event()
        queue = self._waiting[1 if sandbox else 0]
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
        self.busy -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to those waiting: containers first; a sandbox only to a slot
        no pod has claimed."""
        containers, sandboxes = self._waiting
        while True:
            if containers and self.busy < self.limit:
                turn = containers.popleft()
            elif sandboxes and self.busy + len(self.claims) < self.limit:
                turn = sandboxes.popleft()
            else:
                return
            self.busy += 1
            turn.set()


__all__ = ["StartGate", "default_parallel_starts"]
