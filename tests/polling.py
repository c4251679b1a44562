"""Waiting in unit tests for state the code under test changes on its own tasks."""

from __future__ import annotations

from collections.abc import Callable

import anyio


async def until(check: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> None:
    """Once ``check()`` holds, looked at every ``interval`` seconds; fails (``TimeoutError``)
    after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while not check():  # noqa: ASYNC110 - state the tasks under test change, polled
            await anyio.sleep(interval)


__all__ = ["until"]
