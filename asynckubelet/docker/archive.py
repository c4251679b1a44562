"""Files copied into a running container: what a development sync does (``docker cp``),
through the engine's archive API, so it works against a remote engine too. The container is
restarted by its node, not here (:mod:`asynckubelet.node.inplace`)."""

from __future__ import annotations

import aiodocker

from asynckubelet.docker.client import DockerClient

__all__ = ["put_archive"]


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
