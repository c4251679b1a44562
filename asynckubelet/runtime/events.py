"""``EventSink``: where Kubernetes-style events about a pod go.

The runtime (``Pulling``, ``Created``, ``Killing``, ``BackOff``...), the prober
(``Unhealthy``) and the pod workers (``Evicted``) all report through this one shape; the
node's :class:`~asynckubelet.node.events.EventRecorder` implements it, counting repeats
and keeping them for ``describe``. A runtime used on its own, without a node, logs them.
"""

from __future__ import annotations

from typing import Protocol

from lightkube.models.core_v1 import Pod

from asynckubelet._logging import logger


class EventSink(Protocol):
    """Receives one event: ``type`` is ``Normal`` or ``Warning``; ``container`` names the
    container it is about, if any."""

    def __call__(
        self, pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None: ...


def log_event(
    pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
) -> None:
    """The sink of a runtime given none: a debug line in the log."""
    meta = pod.metadata
    ref = f"{(meta.namespace if meta else None) or 'default'}/{meta.name if meta else ''}"
    logger.bind(pod=ref, container=container).debug("{} {}", reason, message)


__all__ = ["EventSink", "log_event"]
