"""The records a pod's decision is made of: :class:`PodActions` (the kubelet's
``podActions``), what it kills (:class:`ContainerToKill`), removes for a restart in place
(:class:`ContainerToReset`) and updates in place
(:class:`~asynckubelet.runtime.resizing.ContainerToUpdate`). Decided by
:mod:`~asynckubelet.runtime.actions`, carried out by :mod:`~asynckubelet.runtime.sync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from asynckubelet.runtime.resizing import ContainerToUpdate


@dataclass(frozen=True)
class ContainerToKill:
    """One container instance a sync must stop, with the kubelet's words for why."""

    container_id: str
    """Docker container id of the instance."""
    name: str
    """The container's name in the pod spec."""
    reason: str
    """``StartupProbe``, ``LivenessProbe``, ``Unknown`` or ``""`` (spec changed)."""
    message: str
    """For the ``Killing`` event: ``Container app failed liveness probe, will be restarted``."""


@dataclass(frozen=True)
class ContainerToReset:
    """One instance a restart in place removes (the kubelet's ``containerToRemoveInfo``)."""

    container_id: str
    """Docker container id of the instance."""
    name: str
    """The container's name in the pod spec."""
    init: bool
    """True for an instance of an init container (sidecars included)."""
    kill: bool
    """Stop it first (it is not exited); never with ``preStop``, as the kubelet does."""
    restart_count: int
    """The instance's restart count; the container's next instance takes one more."""


@dataclass(frozen=True)
class PodActions:
    """The kubelet's ``podActions``: everything one sync of a pod must do, in order.

    ``sync_pod`` carries these out as the kubelet does: kill the pod if ``kill_pod``; kill
    ``containers_to_kill``; create the sandbox (attempt ``attempt``) if ``create_sandbox``,
    else use ``sandbox_id``; start ``init_containers_to_start`` in order; start
    ``containers_to_start``. When ``containers_to_reset`` is not empty (a restart in place)
    nothing else is set: stop the listed instances that are still running and remove every
    listed instance, in order, keeping the sandbox, its IP and the pod's volumes.
    """

    kill_pod: bool = False
    """Stop every running container and the sandbox."""
    create_sandbox: bool = False
    """Create a new sandbox; when the pod also has init containers they restart from the first."""
    sandbox_id: str = ""
    """The existing (newest) sandbox, where containers start when none is created."""
    attempt: int = 0
    """Attempt number of the sandbox to create (newest attempt + 1; 0 for the first)."""
    next_init_container_to_start: str | None = None
    """Name of the init container to start next, for pods without restartable init containers."""
    init_containers_to_start: tuple[int, ...] = ()
    """Indexes into ``spec.initContainers`` to start, in spec order."""
    containers_to_start: tuple[int, ...] = ()
    """Indexes into ``spec.containers`` to start."""
    ephemeral_containers_to_start: tuple[int, ...] = ()
    """Indexes into ``spec.ephemeralContainers`` to start (each once: never restarted)."""
    containers_to_kill: Mapping[str, ContainerToKill] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Docker container id -> what to kill and why."""
    reason: str = ""
    """Why the sandbox is (re)created or the pod killed; ``""`` when neither happens."""
    containers_to_reset: tuple[ContainerToReset, ...] = ()
    """Every instance of every container, in removal order: the containers whose exit did not
    ask for the restart first, then those whose exit did (so an interrupted reset is taken up
    again from what is left)."""
    containers_to_update: tuple[ContainerToUpdate, ...] = ()
    """Running containers whose CPU and memory the engine's update call changes in place."""

    @property
    def is_noop(self) -> bool:
        """True when a sync has nothing to do."""
        return not (
            self.kill_pod
            or self.create_sandbox
            or self.init_containers_to_start
            or self.containers_to_start
            or self.ephemeral_containers_to_start
            or self.containers_to_kill
            or self.containers_to_reset
            or self.containers_to_update
        )


__all__ = ["ContainerToKill", "ContainerToReset", "ContainerToUpdate", "PodActions"]
