"""Retrying calls to the API server: bounded for one request, unbounded for a connection.

The API server goes away (an upgrade, a restart, a network cut) and comes back; a node
must neither hammer it meanwhile nor give up. One request (a status patch, a Lease update,
an event) is retried a few times with jittered exponential back-off when the failure is
transient (no answer, 429, 5xx) and then left to the next round of its loop; a watch is
reconnected forever, its delay growing from a fraction of a second to half a minute and
starting again once a connection worked. Both schedules are tenacity's
``wait_exponential_jitter``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import tenacity

from asynckubelet import errors
from asynckubelet._logging import logger

_T = TypeVar("_T")

RECONNECT_INITIAL = 0.2
RECONNECT_MAX = 30.0
REQUEST_ATTEMPTS = 4
REQUEST_MAX_WAIT = 2.0


def is_transient(error: BaseException) -> bool:
    """No answer, too many requests, or a server error: a later try may succeed."""
    if isinstance(error, errors.ClusterUnavailable):
        return True
    if isinstance(error, errors.ClusterAPIError):
        return error.code == 429 or error.code >= 500
    return False


def _log_retry(state: tenacity.RetryCallState) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    logger.debug("API request failed ({}); try {} again", error, state.attempt_number + 1)


async def call(
    request: Callable[[], Awaitable[_T]],
    *,
    attempts: int = REQUEST_ATTEMPTS,
    initial: float = 0.1,
    max_wait: float = REQUEST_MAX_WAIT,
) -> _T:
    """``request()``, tried again on a transient error, at most ``attempts`` times."""
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(is_transient),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential_jitter(multiplier=initial, max=max_wait, jitter=initial),
        before_sleep=_log_retry,
        sleep=anyio.sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await request()
    raise AssertionError("unreachable")  # pragma: no cover


class Reconnect:
    """The delay before the next connection attempt: grows while attempts fail, and is
    reset by :meth:`succeeded`."""

    def __init__(
        self,
        *,
        initial: float = RECONNECT_INITIAL,
        maximum: float = RECONNECT_MAX,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._wait = tenacity.wait_exponential_jitter(
            multiplier=initial, max=maximum, jitter=initial
        )
        self._failures = 0
        self._sleep = sleep

    @property
    def failures(self) -> int:
        return self._failures

    def next_delay(self) -> float:
        """Count one more failure; the seconds to wait before trying again."""
        self._failures += 1
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = self._failures
        return float(self._wait(state))

    async def failed(self) -> float:
        """Count a failure and wait before the next attempt; returns the delay waited."""
        delay = self.next_delay()
        await self._sleep(delay)
        return delay

    def succeeded(self) -> None:
        self._failures = 0


__all__ = ["Reconnect", "call", "is_transient"]
