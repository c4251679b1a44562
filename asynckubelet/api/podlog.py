"""A pod's log as the API server's ``GET .../pods/{name}/log`` streams it.

The kubelet's ``GetContainerLogs`` with the pod log endpoint's parameters
(:class:`~asynckubelet.node.operations.PodLogOptions`), served by the node's Kubernetes
API (:mod:`asynckubelet.api.kube.server`) on its TLS endpoint and its unix socket alike.
"""

from __future__ import annotations

import anyio
from aiohttp import web

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.api.answers import not_found, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.node import access, operations


async def pod_log(request: web.Request) -> web.StreamResponse:
    """A container's output; with ``follow`` it goes on across the container's restarts
    until the pod will not start it again."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    try:
        options = operations.PodLogOptions.from_query(request.query)
    except ValueError as e:
        raise web.HTTPBadRequest(text=f"{e}\n") from None
    record = node.status.find(namespace, name)
    if record is None:
        return not_found("pods", name)
    pod = record.pod
    try:
        chosen, _ = access.default_container(pod, options.container)
        instance = await access.container_instance(
            node.runtime, pod, container=chosen, previous=options.previous, reported=record.status
        )
    except errors.NotFound as e:
        return status(400, "BadRequest", str(e))
    except errors.DockerError as e:
        return status(500, "InternalError", str(e))
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    target = operations.ContainerTarget(pod=pod, container=chosen, container_id=instance.id)
    pieces = operations.container_log(node.runtime, target, options)
    try:
        async for data in pieces:
            await response.write(data)
    except errors.DockerError as e:
        logger.debug("log stream of {}/{}/{} ended: {}", namespace, name, chosen, e)
    finally:
        with anyio.CancelScope(shield=True):
            await pieces.aclose()
    await response.write_eof()
    return response


__all__ = ["pod_log"]
