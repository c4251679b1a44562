"""A pod worker's states, as the kubelet's ``pod_workers.go`` names them, and what the
node asks of its workers.

A worker is ``Syncing`` while it drives its pod toward the spec. A pod that reached a
terminal phase, or that its owner stops, is ``Terminating``: its containers are being
stopped. Once nothing of it runs it is ``Terminated``: what is left of it (its dead
containers, for their logs) goes when the worker ends. The states only move forward;
:func:`transition` is the whole rule, a table over ``(state, event)``.

What differs between a foreground ``run`` and the node agent is configuration, not the
worker's code: :class:`WorkerPolicy` says whether the worker ends once its pod is
terminal (``run``) or stays, its pod listed, until it is stopped (the node), and
:class:`Termination` says what stopping does (leave the containers running for a later
adoption, report the stopped pod's status, keep a static pod's phase).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class WorkerState(enum.Enum):
    SYNCING = "Syncing"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"


class WorkerEvent(enum.Enum):
    TERMINAL = "terminal"
    """The pod's phase is terminal (Succeeded or Failed): it will never run again."""
    STOP = "stop"
    """The worker's owner stops it (a deletion, the node leaving, a signal)."""
    STOPPED = "stopped"
    """Nothing of the pod runs any more (its containers and sandbox are stopped)."""


_TRANSITIONS: dict[tuple[WorkerState, WorkerEvent], WorkerState] = {
    (WorkerState.SYNCING, WorkerEvent.TERMINAL): WorkerState.TERMINATING,
    (WorkerState.SYNCING, WorkerEvent.STOP): WorkerState.TERMINATING,
    (WorkerState.TERMINATING, WorkerEvent.TERMINAL): WorkerState.TERMINATING,
    (WorkerState.TERMINATING, WorkerEvent.STOP): WorkerState.TERMINATING,
    (WorkerState.TERMINATING, WorkerEvent.STOPPED): WorkerState.TERMINATED,
    (WorkerState.TERMINATED, WorkerEvent.TERMINAL): WorkerState.TERMINATED,
    (WorkerState.TERMINATED, WorkerEvent.STOP): WorkerState.TERMINATED,
    (WorkerState.TERMINATED, WorkerEvent.STOPPED): WorkerState.TERMINATED,
}


def transition(state: WorkerState, event: WorkerEvent) -> WorkerState:
    """The worker's state after ``event``. A pod still syncing cannot have been stopped
    (``STOPPED`` before ``TERMINAL`` or ``STOP``): ValueError."""
    try:
        return _TRANSITIONS[(state, event)]
    except KeyError:
        raise ValueError(f"pod worker: {event.value} while {state.value}") from None


@dataclass(frozen=True, kw_only=True)
class WorkerPolicy:
    """How the node runs its pod workers (the same for all of a node's pods)."""

    exit_when_terminal: bool = True
    """The worker ends (its pod stopped and removed) once the pod's phase is terminal, as
    ``run`` wants; False: it stays ``Terminated``, its sandbox released and its pod
    listed, until it is stopped (the node agent)."""
    own_events: bool = True
    """The worker watches Docker's events for its pod itself; False: a PLEG wakes it."""
    resync_interval: float | None = None
    """Seconds after which the worker looks again in any case; None: only when something
    is due or reported."""


@dataclass(frozen=True, kw_only=True)
class Termination:
    """What stopping the worker does to its pod (its owner chooses, up to the stop)."""

    leave_running: bool = False
    """Leave the pod's containers as they are (for a later start to adopt)."""
    report_stopped: bool = False
    """Report the pod's status once its containers are stopped and before they are
    removed, as the kubelet's ``SyncTerminatingPod`` does: their end states and exit
    codes, and a terminal phase (a deleted pod shows its end before it goes)."""
    static: bool = False
    """A static pod (from the manifest directory): its stopped status keeps a phase that
    is not terminal, as the kubelet's ``getPhase`` leaves static pods'."""


__all__ = ["Termination", "WorkerEvent", "WorkerPolicy", "WorkerState", "transition"]
