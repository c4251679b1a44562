"""Files copied into a running container and the container restarted in place: what a
development sync does (``docker cp`` and ``docker restart``), through the engine's archive
API, so it works against a remote engine too."""

from __future__ import annotations

import math

import aiodocker
import aiohttp

from asynckubelet.docker.client import DockerClient

__all__ = ["put_archive", "restart_container"]


async def put_archive(client: DockerClient, container_id: str, *, path: str, data: bytes) -> None:
    """Extract the tar ``data`` at ``path`` in the container (``PUT /containers/{id}/archive``);
    the engine resolves every name inside the container's own filesystem."""

    async def put(d: aiodocker.Docker) -> None:
        async with d._query(
            f"containers/{container_id}/archive",
            method="PUT",
            data=data,
            headers={"content-type": "application/x-tar"},
            params={"path": path},
        ):
            pass

    await client._call(f"copy files into container {container_id[:12]}", put, retry=False)


async def restart_container(
    client: DockerClient, container_id: str, *, grace_period: float
) -> None:
    """Stop the container (SIGKILL after ``grace_period`` seconds) and start it again: the
    same container, its filesystem kept."""
    seconds = max(0, math.ceil(grace_period))

    async def restart(d: aiodocker.Docker) -> None:
        await d.containers.container(container_id).restart(
            t=seconds, timeout=aiohttp.ClientTimeout(total=seconds + 30)
        )

    await client._call(f"restart container {container_id[:12]}", restart, retry=False)
