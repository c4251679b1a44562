"""``DockerAPI``: the Docker engine calls the runtime, the node and the network backends make.

Everything above this package is typed against this protocol, not against the client, so
a test can hand in :class:`asynckubelet.testing.FakeDocker` and the code under test cannot
tell. :class:`~asynckubelet.docker.client.DockerClient` is the one real implementation;
the command line, which also builds, pushes and attaches, uses the client itself.

Every call raises the project's exception tree (:mod:`asynckubelet.errors`), never the
HTTP library's, so callers handle ``NotFound`` or ``RuntimeUnavailable`` alike whichever
implementation answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from asynckubelet.docker.types import (
    ContainerConfig,
    ContainerInspect,
    ContainerSummary,
    Event,
    ExecResult,
    HostConfig,
    ImageInspect,
    LogLine,
    PullProgress,
)


class DockerAPI(Protocol):
    """One Docker engine, as the project talks to it."""

    @property
    def url(self) -> str:
        """The engine's address (``unix://...``, ``tcp://host:port``): local or remote."""
        ...

    # -- system ---------------------------------------------------------------------------

    async def version(self) -> dict[str, Any]: ...

    async def info(self) -> dict[str, Any]:
        """``GET /info``: the engine's configuration (cgroup driver, ID, data root, ...)."""
        ...

    async def ping(self) -> bool:
        """True when the engine answers, False when it does not."""
        ...

    # -- containers -----------------------------------------------------------------------

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        """Create a container; returns its id. A name in use is :class:`~errors.Conflict`,
        an absent image :class:`~errors.ImageNotFound`."""
        ...

    async def start_container(self, container_id: str) -> None: ...

    async def stop_container(self, container_id: str, *, grace_period: float) -> None:
        """The stop signal, then SIGKILL after ``grace_period`` seconds."""
        ...

    async def kill_container(self, container_id: str, *, signal: str = "SIGKILL") -> None: ...

    async def update_container(self, container_id: str, resources: HostConfig) -> None:
        """Change a container's CPU and memory cgroup settings while it runs."""
        ...

    async def remove_container(
        self, container_id: str, *, force: bool = True, missing_ok: bool = True
    ) -> None: ...

    async def inspect_container(self, container_id: str) -> ContainerInspect: ...

    async def list_containers(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        name: str | None = None,
        all: bool = True,
    ) -> list[ContainerSummary]:
        """Containers whose labels match (``None`` value: the key is present) and whose
        name matches the regular expression ``name``."""
        ...

    async def wait_container(self, container_id: str) -> int: ...

    async def container_stats(self, container_id: str, *, one_shot: bool = False) -> dict[str, Any]:
        """``GET /containers/{id}/stats?stream=false``: the container's cgroup counters
        (``cpu_stats``, ``memory_stats``, ``read``). Without ``one_shot`` the engine also
        fills ``precpu_stats`` with its previous sample (about a second earlier, so the
        call takes that long); with it, one sample at once."""
        ...

    def logs(
        self,
        container_id: str,
        *,
        follow: bool = False,
        stdout: bool = True,
        stderr: bool = True,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> AsyncIterator[LogLine]: ...

    async def exec_run(
        self,
        container_id: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        user: str = "",
        workdir: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``cmd`` in a running container and collect its output; :class:`TimeoutError`
        past ``timeout``."""
        ...

    def events(
        self, *, filters: Mapping[str, Sequence[str]] | None = None, since: float | None = None
    ) -> AsyncIterator[Event]:
        """The engine's event stream, until the engine closes it."""
        ...

    # -- images ---------------------------------------------------------------------------

    async def inspect_image(self, ref: str) -> ImageInspect:
        """An absent image is :class:`~errors.ImageNotFound`."""
        ...

    async def image_exists(self, ref: str) -> bool: ...

    async def pull_image(
        self,
        ref: str,
        *,
        auth: Mapping[str, str] | None = None,
        on_progress: Callable[[PullProgress], None] | None = None,
    ) -> None:
        """Pull ``ref``; any failure is an :class:`~errors.ImagePullError` naming it."""
        ...

    async def load_image(self, data: bytes) -> None:
        """Load a ``docker save``-format archive."""
        ...

    # -- volumes and networks -------------------------------------------------------------

    async def create_volume(self, name: str, *, labels: Mapping[str, str]) -> dict[str, Any]: ...

    async def create_network(
        self, name: str, *, labels: Mapping[str, str], options: Mapping[str, str] | None = None
    ) -> str: ...

    async def inspect_network(self, name: str) -> dict[str, Any]: ...

    async def remove_network(self, name: str) -> None:
        """Absent is fine."""
        ...


__all__ = ["DockerAPI"]
