"""What holds a pod back, in the kubelet's words, and whether waiting will fix it.

A kubelet never gives up on a pod: it retries a missing image, a missing ConfigMap or a
crashing container for as long as the pod exists, since in a cluster someone may fix
them. A command that waits for a pod (``run``, ``apply --wait``, the library's
``wait``) should name what holds each pod back while it waits (the pod, the container,
the kubelet's reason and message), and should not wait for ever on what cannot change,
nor end on a hiccup. :func:`holdups` reads one pod's status and says what holds it back
and what of it is final; :class:`FailureWatch` follows a pod's statuses over time and
says when the wait is over; :func:`holding_back` picks, among an object's pods, the
one to name. Final are:

* at once: ``ErrImageNeverPull``, ``InvalidImageName``, an ``ErrImagePull`` whose message
  says the image cannot be had (the registry's ``manifest unknown``, ``not found``,
  ``pull access denied``; a registry name that does not resolve, ``no such host``; an
  image of the project's own registry that cannot be made here), and a pod the node
  rejected at admission;
* ``CrashLoopBackOff`` once the container has been restarted ``max_restarts`` times;
* after ``config_timeout``, ``CreateContainerConfigError`` (a ConfigMap or Secret may
  still be applied meanwhile);
* after ``pull_timeout``, any other pull error (the network, a registry that is down):
  the kubelet's back-off retries it until then.

Everything here is a function of the statuses given and of an injected clock: no
engine, no node, no terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lightkube.models.core_v1 import ContainerStatus, Pod, PodStatus

from asynckubelet.node.status import FAILED, POD_SCHEDULED, REJECTED_MESSAGE_PREFIX
from asynckubelet.runtime.images import CANNOT_BE_BUILT, CANNOT_BE_PULLED
from asynckubelet.runtime.results import SyncError

__all__ = [
    "DEFAULT_CONFIG_TIMEOUT",
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_PULL_TIMEOUT",
    "Failure",
    "FailureWatch",
    "holding_back",
    "holdups",
    "image_is_missing",
    "shown_log_line",
]

DEFAULT_PULL_TIMEOUT = 300.0
DEFAULT_CONFIG_TIMEOUT = 30.0
DEFAULT_MAX_RESTARTS = 3
"""Restarts of a crash-looping container after which waiting for it is over."""

PERMANENT_REASONS = frozenset({SyncError.IMAGE_NEVER_PULL, SyncError.INVALID_IMAGE_NAME})
PULL_REASONS = frozenset({SyncError.IMAGE_PULL, SyncError.IMAGE_PULL_BACK_OFF})
ON_THE_WAY = frozenset({"ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container on its way: nothing holds it back."""
MISSING_IMAGE_WORDS = (
    "manifest unknown",
    "not found",
    "pull access denied",
    "does not exist",
    "invalid reference format",
    "no such host",
    CANNOT_BE_PULLED,
    CANNOT_BE_BUILT,
)
"""What a pull error says when the image is not there to be had: the registry's words as
Docker passes them on, the resolver's when the registry's name does not resolve (Go's
``lookup NAME on SERVER: no such host``; its ``server misbehaving`` is a resolver that
failed, and is retried), and the image manager's for the project's own images."""
LOG_LINE_LIMIT = 200
"""Characters of a container's last log line shown with its failure."""


def image_is_missing(message: str) -> bool:
    """An ``ErrImagePull`` message that says the image cannot be had (not a network error)."""
    text = message.lower()
    return any(words in text for words in MISSING_IMAGE_WORDS)


def shown_log_line(text: str) -> str:
    """A container's log line as a failure shows it: control characters replaced, at most
    :data:`LOG_LINE_LIMIT` characters (the container's output is anyone's)."""
    clean = "".join(c if c.isprintable() else " " for c in text).strip()
    if len(clean) > LOG_LINE_LIMIT:
        return clean[: LOG_LINE_LIMIT - 1] + "…"
    return clean


@dataclass(frozen=True)
class Failure:
    """What holds a pod back: the kubelet's reason and message, about one of its containers
    (or the pod itself), and whether waiting will not fix it."""

    reason: str
    message: str
    container: str = ""
    """The container it is about; ``""`` for the pod (a rejection, a scheduling reason)."""
    final: bool = True
    restarts: int | None = None
    """A crash-looping container's restart count."""
    log_read: bool = False
    """The container's last log line was asked for (:meth:`with_log_line`)."""

    def line(self, pod_name: str) -> str:
        """``pod/NAME/CONTAINER: REASON: MESSAGE`` (``pod/NAME: ...`` for the pod)."""
        where = f"pod/{pod_name}/{self.container}" if self.container else f"pod/{pod_name}"
        return (
            f"{where}: {self.reason}: {self.message}" if self.message else f"{where}: {self.reason}"
        )

    @property
    def wants_log_line(self) -> bool:
        """A crash loop that has ended the wait, and whose last log line is not shown yet."""
        return self.reason == SyncError.CRASH_LOOP_BACK_OFF and self.final and not self.log_read

    def with_log_line(self, text: str | None) -> Failure:
        """This failure with the container's last log line (none: unchanged)."""
        shown = shown_log_line(text or "")
        message = f"{self.message}; last log line: {shown}" if shown else self.message
        return dataclasses.replace(self, message=message, log_read=True)


def _crash_loop(c: ContainerStatus, message: str, max_restarts: int | None) -> Failure:
    last = c.lastState.terminated if c.lastState is not None else None
    restarts = c.restartCount or 0
    final = max_restarts is not None and restarts >= max_restarts
    if final:
        times = "restart" if restarts == 1 else "restarts"
        shown = f"gave up after {restarts} {times}"
        if last is not None:
            shown = f"last exit code {last.exitCode} ({last.reason or 'Error'}); {shown}"
    else:
        shown = message
        if last is not None:
            shown = f"{message}; last exit code {last.exitCode}"
    return Failure(
        reason=SyncError.CRASH_LOOP_BACK_OFF,
        message=shown,
        container=c.name,
        final=final,
        restarts=restarts,
    )


def _container(c: ContainerStatus, max_restarts: int | None) -> Failure | None:
    waiting = c.state.waiting if c.state is not None else None
    if waiting is None or not waiting.reason or waiting.reason in ON_THE_WAY:
        return None
    reason, message = waiting.reason, waiting.message or ""
    if reason == SyncError.CRASH_LOOP_BACK_OFF:
        return _crash_loop(c, message, max_restarts)
    final = reason in PERMANENT_REASONS or (
        reason == SyncError.IMAGE_PULL and image_is_missing(message)
    )
    return Failure(reason=reason, message=message, container=c.name, final=final)


def holdups(
    status: PodStatus | None, *, max_restarts: int | None = DEFAULT_MAX_RESTARTS
) -> list[Failure]:
    """What holds a pod with ``status`` back, init containers first; a final one is one
    waiting will not fix without a clock (see :class:`FailureWatch` for those that are
    final after a time). ``max_restarts`` None: a crash loop is never final."""
    if status is None:
        return []
    if status.phase == FAILED and (status.message or "").startswith(REJECTED_MESSAGE_PREFIX):
        return [Failure(reason=status.reason or "Rejected", message=status.message or "")]
    found: list[Failure] = []
    for condition in status.conditions or []:
        if condition.type == POD_SCHEDULED and condition.status == "False":
            found.append(
                Failure(
                    reason=condition.reason or "Unschedulable",
                    message=condition.message or "",
                    final=False,
                )
            )
    for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        failure = _container(c, max_restarts)
        if failure is not None:
            found.append(failure)
    return found


def holding_back(
    pods: Iterable[Pod], *, max_restarts: int | None = DEFAULT_MAX_RESTARTS
) -> tuple[str, Failure] | None:
    """Among an object's pods, the one to name and what holds it back: a final failure
    first, else the first pod held back (by name); None when nothing holds them back."""
    named: list[tuple[str, Failure]] = []
    for pod in sorted(pods, key=lambda p: (p.metadata.name or "") if p.metadata else ""):
        name = (pod.metadata.name if pod.metadata else None) or ""
        named += [(name, f) for f in holdups(pod.status, max_restarts=max_restarts)]
    return next((n for n in named if n[1].final), named[0] if named else None)


@dataclass
class FailureWatch:
    """Follows one pod's statuses; :meth:`observe` returns a :class:`Failure` once waiting
    is over. ``now`` is any monotonic clock in seconds; ``last_line`` gives, when it can,
    a container's last log line for the failure of a crash loop."""

    pull_timeout: float | None = DEFAULT_PULL_TIMEOUT
    config_timeout: float | None = DEFAULT_CONFIG_TIMEOUT
    max_restarts: int | None = DEFAULT_MAX_RESTARTS
    last_line: Callable[[str], str | None] | None = None
    _since: dict[tuple[str, str], float] = field(default_factory=dict)
    _pull_message: dict[str, str] = field(default_factory=dict)

    def observe(self, status: PodStatus, *, now: float) -> Failure | None:
        seen: set[tuple[str, str]] = set()
        found: Failure | None = None
        for failure in holdups(status, max_restarts=self.max_restarts):
            over = self._over(failure, now, seen)
            found = found or over
        for key in set(self._since) - seen:
            del self._since[key]
        if found is not None and found.wants_log_line and self.last_line is not None:
            found = found.with_log_line(self.last_line(found.container))
        return found

    def _over(self, failure: Failure, now: float, seen: set[tuple[str, str]]) -> Failure | None:
        container, reason = failure.container, failure.reason
        if reason in PULL_REASONS:
            if reason == SyncError.IMAGE_PULL and failure.message:
                self._pull_message[container] = failure.message
            last = self._pull_message.get(container, "")
            if failure.final or image_is_missing(last):
                return Failure(reason=SyncError.IMAGE_PULL, message=last, container=container)
            late = dataclasses.replace(failure, message=last or failure.message, final=True)
            return self._after((container, "pull"), self.pull_timeout, now, seen, late)
        if failure.final:
            return failure
        if reason == SyncError.CREATE_CONTAINER_CONFIG:
            late = dataclasses.replace(failure, final=True)
            return self._after((container, reason), self.config_timeout, now, seen, late)
        return None

    def _after(
        self,
        key: tuple[str, str],
        timeout: float | None,
        now: float,
        seen: set[tuple[str, str]],
        failure: Failure,
    ) -> Failure | None:
        seen.add(key)
        since = self._since.setdefault(key, now)
        if timeout is not None and now - since >= timeout:
            return failure
        return None
