"""A daemon gives the memory a busy spell left free back to the system once its pods'
statuses have stopped changing, once per spell, and costs nothing while nothing changes."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from lightkube.models.core_v1 import Pod, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node import daemon
from asynckubelet.node.status_manager import StatusManager

pytestmark = pytest.mark.anyio


def pod(name: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"))


class Clock:
    """The sleeps of the task under test: each waits until the test lets it end."""

    def __init__(self) -> None:
        self.sleeping: list[float] = []
        self._end = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeping.append(seconds)
        await self._end.wait()

    async def end_sleep(self) -> None:
        end, self._end = self._end, anyio.Event()
        end.set()
        await anyio.wait_all_tasks_blocked()


async def test_the_memory_is_given_back_once_the_statuses_stop_changing() -> None:
    status = StatusManager()
    clock = Clock()
    given: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: daemon.give_back_memory_when_quiet(
                status, quiet=5.0, give_back=lambda: given.append(status.version), sleep=clock.sleep
            )
        )
        await anyio.wait_all_tasks_blocked()
        # At rest: no timer, nothing given back.
        assert (clock.sleeping, given) == ([], [])
        status.set(pod("a"), PodStatus(phase="Pending"))
        await anyio.wait_all_tasks_blocked()
        assert clock.sleeping == [5.0]
        # Changes within the quiet time: another quiet time is waited for.
        status.set(pod("a"), PodStatus(phase="Running"))
        status.set(pod("b"), PodStatus(phase="Pending"))
        await clock.end_sleep()
        assert (len(clock.sleeping), given) == (2, [])
        await clock.end_sleep()
        assert given == [status.version]
        # Given back once: the task waits for the next change, with no timer.
        await anyio.wait_all_tasks_blocked()
        assert len(clock.sleeping) == 2
        # The next busy spell is given back after it too.
        status.set(pod("b"), PodStatus(phase="Running"))
        await anyio.wait_all_tasks_blocked()
        await clock.end_sleep()
        assert len(given) == 2
        tg.cancel_scope.cancel()


GIVE_BACK_PROBE = """
import json
from asynckubelet.node import daemon

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) // 1024

blocks = [bytearray(4096) for _ in range(12000)]
pin = bytearray(4096)  # the heap's top stays in use: free() alone cannot shrink the heap
busy = rss()
del blocks
freed = rss()
took = daemon.give_back_memory()
print(json.dumps({"busy": busy, "freed": freed, "after": rss(), "took": took}))
"""


def test_the_free_middle_of_the_heap_goes_back_to_the_system() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GIVE_BACK_PROBE], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert found["took"] is True
    # 47 MB were freed by Python but kept by the allocator until given back.
    assert found["freed"] - found["after"] > 30, found
