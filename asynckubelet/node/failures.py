"""Which waiting reasons will not go away by waiting: when a foreground wait should end.

A kubelet never gives up on a pod: it retries a missing image, a missing ConfigMap or a
refused pull for as long as the pod exists, since in a cluster someone may fix them. A
command that waits for a pod (``run``, ``apply --wait``) should not wait for ever on what
cannot change, nor end on a hiccup. :class:`FailureWatch` follows a pod's statuses and
says when the wait is over, in the kubelet's own reason and message:

* at once for what no retry fixes: ``ErrImageNeverPull``, ``InvalidImageName``, an
  ``ErrImagePull`` whose message says the image does not exist (the registry's ``manifest
  unknown``, ``not found``, ``pull access denied``; an image of the project's own registry
  that cannot be made here), and a pod the node rejected at admission;
* after ``config_timeout`` for ``CreateContainerConfigError`` (a ConfigMap or Secret may
  still be applied meanwhile);
* after ``pull_timeout`` for any other pull error (the network, a registry that is down):
  the kubelet's back-off retries it until then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lightkube.models.core_v1 import PodStatus

from asynckubelet.node.status import FAILED, REJECTED_MESSAGE_PREFIX
from asynckubelet.runtime.images import CANNOT_BE_BUILT, CANNOT_BE_PULLED
from asynckubelet.runtime.results import SyncError

__all__ = [
    "DEFAULT_CONFIG_TIMEOUT",
    "DEFAULT_PULL_TIMEOUT",
    "Failure",
    "FailureWatch",
    "image_is_missing",
]

DEFAULT_PULL_TIMEOUT = 300.0
DEFAULT_CONFIG_TIMEOUT = 30.0

PERMANENT_REASONS = frozenset({SyncError.IMAGE_NEVER_PULL, SyncError.INVALID_IMAGE_NAME})
PULL_REASONS = frozenset({SyncError.IMAGE_PULL, SyncError.IMAGE_PULL_BACK_OFF})
MISSING_IMAGE_WORDS = (
    "manifest unknown",
    "not found",
    "pull access denied",
    "does not exist",
    "invalid reference format",
    CANNOT_BE_PULLED,
    CANNOT_BE_BUILT,
)
"""What a pull error says when the image is not there to be had (the registry's words as
Docker passes them on, and the image manager's for the project's own images)."""


def image_is_missing(message: str) -> bool:
    """An ``ErrImagePull`` message that says the image cannot be had (not a network error)."""
    text = message.lower()
    return any(words in text for words in MISSING_IMAGE_WORDS)


@dataclass(frozen=True)
class Failure:
    """Why waiting for a pod is over: the kubelet's reason and message."""

    reason: str
    message: str
    container: str = ""
    """The container it is about; ``""`` for the pod (a rejection)."""

    def line(self, pod_name: str) -> str:
        """``pod/NAME: REASON: MESSAGE``."""
        return f"pod/{pod_name}: {self.reason}: {self.message}"


@dataclass
class FailureWatch:
    """Follows one pod's statuses; :meth:`observe` returns a :class:`Failure` once waiting
    is over. ``now`` is any monotonic clock in seconds."""

    pull_timeout: float | None = DEFAULT_PULL_TIMEOUT
    config_timeout: float | None = DEFAULT_CONFIG_TIMEOUT
    _since: dict[tuple[str, str], float] = field(default_factory=dict)
    _pull_message: dict[str, str] = field(default_factory=dict)

    def observe(self, status: PodStatus, *, now: float) -> Failure | None:
        if status.phase == FAILED and (status.message or "").startswith(REJECTED_MESSAGE_PREFIX):
            return Failure(reason=status.reason or "Rejected", message=status.message or "")
        seen: set[tuple[str, str]] = set()
        found: Failure | None = None
        for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
            waiting = c.state.waiting if c.state is not None else None
            if waiting is None or not waiting.reason:
                continue
            failure = self._waiting(c.name, waiting.reason, waiting.message or "", now, seen)
            found = found or failure
        for key in set(self._since) - seen:
            del self._since[key]
        return found

    def _waiting(
        self, container: str, reason: str, message: str, now: float, seen: set[tuple[str, str]]
    ) -> Failure | None:
        if reason in PERMANENT_REASONS:
            return Failure(reason=reason, message=message, container=container)
        if reason in PULL_REASONS:
            if reason == SyncError.IMAGE_PULL and message:
                self._pull_message[container] = message
            last = self._pull_message.get(container, "")
            if image_is_missing(last):
                return Failure(reason=SyncError.IMAGE_PULL, message=last, container=container)
            return self._after(
                (container, "pull"),
                self.pull_timeout,
                now,
                seen,
                Failure(reason=reason, message=last or message, container=container),
            )
        if reason == SyncError.CREATE_CONTAINER_CONFIG:
            return self._after(
                (container, reason),
                self.config_timeout,
                now,
                seen,
                Failure(reason=reason, message=message, container=container),
            )
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
