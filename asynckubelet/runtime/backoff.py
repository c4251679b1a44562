"""Crash-loop and image-pull back-off, with the kubelet's semantics and words.

A container that keeps dying, or an image that keeps failing to pull, must not be retried
in a tight loop: the kubelet waits 10 s, then 20 s, 40 s... up to 5 minutes, and forgets
the history once the thing has stayed quiet for twice that cap (10 minutes). This is
client-go's ``flowcontrol.Backoff`` (``Get``, ``Next``, ``IsInBackOffSince``,
``IsInBackOffSinceUpdate``, ``GC``) as the kubelet configures it, and the kubelet's
``doBackOff`` decision for a container start.

The delay schedule itself is tenacity's ``wait_exponential``, so the project has one
definition of exponential back-off for retries and restarts alike; an entry only counts
its steps. The clock is injected so tests (and a "plan" that must not wait) control time;
state lives only in memory, as in the kubelet, so an agent restart forgets back-off.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lightkube.models.core_v1 import Container, Pod

from asynckubelet.runtime import naming
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus

if TYPE_CHECKING:
    import tenacity

INITIAL_DELAY = 10.0
"""Seconds: the kubelet's ``backOffPeriod``."""
MAX_CONTAINER_BACKOFF = 300.0
"""Seconds: the kubelet's ``MaxContainerBackOff``."""
MAX_IMAGE_BACKOFF = 300.0
"""Seconds: the kubelet's ``MaxImageBackOff``."""

REPORT_PERIOD = 10.0
"""Seconds between two reports (``BackOff`` events) of one key's wait. The kubelet's pod
worker looks at a pod again ``backOffPeriod`` (10 s) after a sync that failed, and
reports the wait each time it looks; a worker that looks more often reports no more
often than that."""

CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock, for callers that do not inject one."""
    return datetime.now(UTC)


@dataclass
class _Entry:
    steps: int
    delay: float
    last_update: datetime


class Backoff:
    """Per-key exponential back-off: client-go's ``flowcontrol.Backoff`` without jitter."""

    def __init__(
        self,
        *,
        initial: float = INITIAL_DELAY,
        cap: float = MAX_CONTAINER_BACKOFF,
        clock: Clock = utc_now,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.clock = clock
        self._wait: tenacity.wait_exponential | None = None
        """tenacity's schedule, made at the first failure (most pods never fail)."""
        self._entries: dict[Hashable, _Entry] = {}
        self._reported: dict[Hashable, datetime] = {}

    @property
    def reset_after(self) -> timedelta:
        """Quiet time after which a key starts again from ``initial``: twice the cap."""
        return timedelta(seconds=2 * self.cap)

    def delay_for_step(self, step: int) -> float:
        """Seconds of back-off after the ``step``-th consecutive failure (1-based)."""
        import tenacity

        if self._wait is None:
            self._wait = tenacity.wait_exponential(
                multiplier=self.initial, exp_base=2, min=self.initial, max=self.cap
            )
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = step
        return float(self._wait(state))

    def get(self, key: Hashable) -> float:
        """The current back-off of ``key`` in seconds; 0 when it has none."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else 0.0

    def next(self, key: Hashable, *, event_time: datetime) -> None:
        """Record a failure at ``event_time``: start at ``initial`` or double, up to the cap."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry.last_update):
            steps = 1
        else:
            steps = entry.steps + 1
        self._entries[key] = _Entry(
            steps=steps, delay=self.delay_for_step(steps), last_update=self.clock()
        )

    def is_in_backoff_since(self, key: Hashable, *, event_time: datetime) -> bool:
        """True while less than the current back-off has passed since ``event_time``."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry.last_update):
            return False
        return (self.clock() - event_time).total_seconds() < entry.delay

    def is_in_backoff_since_update(self, key: Hashable, *, event_time: datetime) -> bool:
        """True while ``event_time`` is within the current back-off of the last ``next``."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry.last_update):
            return False
        return (event_time - entry.last_update).total_seconds() < entry.delay

    def report_due(self, key: Hashable, *, period: float = REPORT_PERIOD) -> bool:
        """Whether the wait of ``key`` is to be reported now: the first time it is asked,
        then once ``period`` seconds have passed since the last report (the kubelet's
        rate, :data:`REPORT_PERIOD`)."""
        now = self.clock()
        last = self._reported.get(key)
        if last is not None and (now - last).total_seconds() < period:
            return False
        self._reported[key] = now
        return True

    def until(self, key: Hashable) -> datetime | None:
        """When the current back-off of ``key`` ends, counted from its last recorded failure
        (as :meth:`is_in_backoff_since_update` counts); None when it has none."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        return entry.last_update + timedelta(seconds=entry.delay)

    def reset(self, key: Hashable) -> None:
        """Forget everything about ``key``."""
        self._entries.pop(key, None)
        self._reported.pop(key, None)

    def gc(self) -> None:
        """Drop keys that have been quiet for longer than :attr:`reset_after`."""
        now = self.clock()
        for key in [k for k, e in self._entries.items() if self._expired(now, e.last_update)]:
            del self._entries[key]
        for key in [k for k, at in self._reported.items() if self._expired(now, at)]:
            del self._reported[key]

    def __len__(self) -> int:
        return len(self._entries)

    def _expired(self, event_time: datetime, last_update: datetime) -> bool:
        return event_time - last_update > self.reset_after


def crash_loop_key(*, pod_uid: str, container: Container) -> tuple[str, str, str]:
    """The key of a container's crash-loop back-off.

    Like the kubelet's ``getStableKey`` it includes the spec hash: editing a crashing
    container gives it a fresh start.
    """
    return (pod_uid, container.name, naming.hash_container(container))


def image_pull_key(*, pod_uid: str, image: str) -> tuple[str, str]:
    """The key of an image's pull back-off within one pod."""
    return (pod_uid, image)


def go_duration(seconds: float) -> str:
    """Format a duration as Go's ``time.Duration.String`` does: ``20s``, ``1m20s``, ``5m0s``."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    whole_minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(whole_minutes), 60)
    text = f"{rest:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text


def pod_full_name(pod: Pod) -> str:
    """The kubelet's ``format.Pod``: ``name_namespace(uid)``."""
    meta = pod.metadata
    if meta is None:
        return "_()"
    return f"{meta.name or ''}_{meta.namespace or ''}({meta.uid or ''})"


def crash_loop_message(*, delay: float, container: str, pod: Pod) -> str:
    """The CrashLoopBackOff waiting message, word for word the kubelet's."""
    return (
        f"back-off {go_duration(delay)} restarting failed container={container}"
        f" pod={pod_full_name(pod)}"
    )


def image_pull_back_off_message(image: str) -> str:
    """The ImagePullBackOff waiting message: ``Back-off pulling image "x"``."""
    return f"Back-off pulling image {json.dumps(image, ensure_ascii=False)}"


@dataclass(frozen=True)
class BackOffCheck:
    """The answer of :func:`should_back_off`."""

    in_backoff: bool
    reason: str = ""
    """``CrashLoopBackOff`` while backing off."""
    message: str = ""
    """The waiting message (``back-off 20s restarting failed container=...``)."""
    event_message: str = ""
    """The ``BackOff`` event text (``Back-off restarting failed container app in pod ...``)."""
    report: bool = False
    """Whether to record the ``BackOff`` event now (:meth:`Backoff.report_due`)."""


def should_back_off(
    *, backoff: Backoff, pod: Pod, container: Container, status: PodRuntimeStatus
) -> BackOffCheck:
    """Whether starting ``container`` must wait: the kubelet's ``doBackOff``.

    The newest dead instance's ``finished_at`` is when the current wait began. When the
    container may start, the failure is recorded (``Next``), so the following crash waits
    twice as long; like the kubelet, this is the one place the crash-loop back-off grows.
    """
    dead = next(
        (
            c
            for c in status.containers
            if c.name == container.name and c.state is ContainerState.EXITED
        ),
        None,
    )
    if dead is None:
        return BackOffCheck(in_backoff=False)
    event_time = dead.finished_at or dead.started_at or dead.created_at
    key = crash_loop_key(pod_uid=status.uid, container=container)
    if backoff.is_in_backoff_since(key, event_time=event_time):
        return BackOffCheck(
            in_backoff=True,
            reason=CRASH_LOOP_BACK_OFF,
            message=crash_loop_message(delay=backoff.get(key), container=container.name, pod=pod),
            event_message=(
                f"Back-off restarting failed container {container.name} in pod {pod_full_name(pod)}"
            ),
            report=backoff.report_due(key),
        )
    backoff.next(key, event_time=event_time)
    return BackOffCheck(in_backoff=False)
