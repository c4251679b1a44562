"""``RuntimeMetrics``: how the runtime reports the time and failures of its operations.

The kubelet's ``kubelet_runtime_operations_duration_seconds`` and
``kubelet_runtime_operations_errors_total`` count what the runtime does; the runtime only
says what happened through these two calls, and the node decides where the numbers go
(:class:`~asynckubelet.node.metrics.NodeMetrics`). A runtime given none reports nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from asynckubelet import errors
from asynckubelet.runtime.results import PodSyncResult


class RuntimeMetrics(Protocol):
    def operation_finished(self, operation: str, *, seconds: float) -> None:
        """``operation`` (``sync_pod``, ``kill_pod``, ``get_pod_status``) took ``seconds``,
        whether it succeeded or not."""
        ...

    def operation_failed(self, operation: str) -> None:
        """``operation`` failed: a whole operation, or one step of a sync (``start_container``,
        ``create_pod_sandbox``...)."""
        ...


@contextmanager
def measured(metrics: RuntimeMetrics | None, operation: str) -> Iterator[None]:
    """Time the block as ``operation``; an error of the project's tree counts as a failure."""
    started = time.monotonic()
    try:
        yield
    except errors.AsyncKubeletError:
        if metrics is not None:
            metrics.operation_failed(operation)
        raise
    finally:
        if metrics is not None:
            metrics.operation_finished(operation, seconds=time.monotonic() - started)


def count_failed_steps(metrics: RuntimeMetrics | None, result: PodSyncResult) -> None:
    """Each failed step of a sync counts as a failure of its action."""
    if metrics is None:
        return
    for step in result.results:
        if step.error:
            metrics.operation_failed(step.action.value)


__all__ = ["RuntimeMetrics", "count_failed_steps", "measured"]
