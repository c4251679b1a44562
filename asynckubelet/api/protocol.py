"""The node API: what a client of a node may ask of it, whichever side answers.

A client command asks one :class:`NodeAPI` and prints what it answers. Two sides
implement it, as podman's ``ContainerEngine`` has its ``abi`` and ``tunnel`` sides:
:class:`~asynckubelet.api.remote.RemoteNode` asks a running daemon over its local API
(the unix socket in the state dir), :class:`~asynckubelet.api.inprocess.InProcessNode`
reads the node's pods from Docker and its state dir and acts there, as a node with no
daemon is read. :func:`~asynckubelet.api.connect.connect` picks the side once.

The terms are the Kubernetes API's, because its wire format is the local API's: objects
are addressed by resource (the plural: ``pods``, ``configmaps``), namespace (None: all of
them, or a cluster-scoped kind) and name, and come back as the API server's JSON (``v1``
objects, ``List`` items, ``meta.k8s.io`` ``Table``s for server-side printing). Pod
subresources (``log``, ``exec``) are methods of their own. A refusal is an
:class:`~asynckubelet.errors.AsyncKubeletError` (a missing object: ``NotFound``, as the API
server words it). Methods block: the command line calls them from plain code, and a
remote read needs no event loop at all.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from asynckubelet import errors
from asynckubelet.node.operations import PodLogOptions

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ExecTarget:
    """Where the pod ``exec`` subresource lands: a running container on the node's engine."""

    container_id: str
    docker_host: str | None
    """The engine the node drives (None: the default one)."""
    node_name: str
    container: str = ""
    """The container's name in the pod."""
    socket: str | None = None
    """The daemon's socket: the command goes through the pod's ``exec`` subresource there
    (:mod:`asynckubelet.api.execclient`); None: straight to the engine."""


class NodeAPI(Protocol):
    """One node, asked in the Kubernetes API's terms (see the module's docstring)."""

    @property
    def remote(self) -> bool:
        """Whether a running daemon answers (else the node is read in this process)."""
        ...

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        """One object, as the API server serves it."""
        ...

    def list(
        self, resource: str, namespace: str | None, *, selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The objects of ``namespace`` (None: of all) that the label ``selector`` selects."""
        ...

    def table(
        self,
        resource: str,
        namespace: str | None,
        name: str | None = None,
        *,
        selector: str | None = None,
    ) -> dict[str, Any]:
        """The objects as a server-side printed ``Table`` (kubectl's columns)."""
        ...

    def events(self, namespace: str, *, uid: str | None = None) -> builtins.list[dict[str, Any]]:
        """The v1 Events of ``namespace``, of one object (``involvedObject.uid``) or all."""
        ...

    def watch(
        self,
        namespace: str | None,
        *,
        name: str | None = None,
        table: bool = False,
        selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The pods' watch events (``{"type", "object"}``: ``ADDED`` for each pod there, a
        ``BOOKMARK`` once those are sent, then ``ADDED``, ``MODIFIED``, ``DELETED``, or an
        ``ERROR`` Status); with ``table`` each object is a one-row ``Table``."""
        ...

    def log(self, namespace: str, name: str, options: PodLogOptions) -> Iterator[bytes]:
        """The container's output as it comes (the ``log`` subresource)."""
        ...

    def exec_target(self, namespace: str, name: str, container: str | None) -> ExecTarget:
        """The running container ``exec`` enters (the pod's default one when None)."""
        ...

    def node(self) -> dict[str, Any]:
        """The node's effective configuration (``node_name``, ``docker_host``, ...)."""
        ...

    def apply(
        self,
        files: Sequence[tuple[str, str]],
        *,
        prune_selector: str | None = None,
        prune_all: bool = False,
    ) -> dict[str, Any]:
        """Admit and store the objects of ``(source name, manifest text)`` files, as one
        change: each object's verdict (``created``, ``configured``, ``unchanged``), or a
        refusal naming every field error and nothing applied. Only a running node admits."""
        ...

    def restart(
        self, namespace: str, name: str, containers: Sequence[str], *, grace_period: int
    ) -> builtins.list[str]:
        """Restart the pod's ``containers`` in place: each stopped (SIGKILL after
        ``grace_period`` seconds) and started again by the pod's worker, the same container
        with its files. Their IDs, in the order asked. Only a running node restarts."""
        ...

    def delete(
        self,
        objects: Sequence[Mapping[str, str]],
        *,
        grace_period: float | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> builtins.list[dict[str, str]]:
        """Delete objects (``{"kind", "namespace", "name"}``; a workload with the pods it
        controls) and, with ``wait``, wait for their pods until they are gone or
        ``timeout`` ends: each one's ``status``, ``deleted``, ``notfound`` or ``timeout``,
        in the order asked."""
        ...

    def close(self) -> None:
        """Release the connection or the engine's client; the node keeps running."""
        ...


__all__ = ["ExecTarget", "NodeAPI", "PodLogOptions", "daemon_needed"]


def daemon_needed(state: Path, what: str) -> errors.DaemonError:
    """The refusal of what only a running daemon does (watch, admission, workloads)."""
    return errors.DaemonError(
        f"no node daemon for state dir {state}: {what} needs one, as kubectl needs an API "
        "server; start it with `asynckubelet serve` (same --state-dir)"
    )
