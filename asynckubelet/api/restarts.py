"""``POST /apis/local.asynckubelet/v1/restarts``: containers restarted in place.

A ``Restart`` of the node's own group, created as an ``Apply`` is (nothing is kept):
its ``spec`` names a pod (``namespace``, ``pod``), the ``containers`` to restart and the
``gracePeriodSeconds`` their stop signal gets before SIGKILL; the node's worker for that
pod stops each container and starts the same container again
(:mod:`asynckubelet.node.inplace`), and the answer's ``status.containers`` holds each
one's name and ``containerID``. ``--watch``'s ``sync+restart`` rules ask it after copying
files into the containers. A pod the node does not run is ``404 NotFound``, a container
the pod does not have ``400 BadRequest``, one that is not running (or a pod being stopped)
``409 Conflict``, each worded as the API server words its refusals.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from asynckubelet import errors
from asynckubelet.api.answers import status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube.writes import read_body
from asynckubelet.node.locate import API_GROUP

RESTART_KIND = "Restart"
RESTART_VERSION = f"{API_GROUP}/v1"
MAX_CONTAINERS = 64
"""The most containers one ``Restart`` names (a pod has far fewer)."""
MAX_GRACE = 300
"""The longest grace period a ``Restart`` may ask for, in seconds."""

__all__ = ["MAX_CONTAINERS", "MAX_GRACE", "RESTART_KIND", "RESTART_VERSION", "restart"]


def _spec(body: Any) -> tuple[str, str, list[str], float] | str:
    """``(namespace, pod, containers, grace period)``, or what is wrong with the body."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if body.get("apiVersion") != RESTART_VERSION or body.get("kind") != RESTART_KIND:
        return (
            f"the object must be a {RESTART_KIND} of {RESTART_VERSION}, "
            f"not {body.get('kind')!r} of {body.get('apiVersion')!r}"
        )
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return "spec must be an object"
    namespace, pod = spec.get("namespace", "default"), spec.get("pod")
    if not isinstance(namespace, str) or not namespace:
        return "spec.namespace must be a name"
    if not isinstance(pod, str) or not pod:
        return "spec.pod must be a name"
    containers = spec.get("containers")
    if (
        not isinstance(containers, list)
        or not containers
        or len(containers) > MAX_CONTAINERS
        or not all(isinstance(c, str) and c for c in containers)
    ):
        return f"spec.containers must be a list of 1 to {MAX_CONTAINERS} container names"
    if len(set(containers)) != len(containers):
        return "spec.containers must not name a container twice"
    grace = spec.get("gracePeriodSeconds", 30)
    if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= MAX_GRACE:
        return f"spec.gracePeriodSeconds must be a whole number from 0 to {MAX_GRACE}"
    return namespace, pod, containers, float(grace)


async def restart(request: web.Request) -> web.Response:
    """Restart the containers a ``Restart`` names; ``201`` with each one's ID."""
    body = await read_body(request)
    found = _spec(body)
    if isinstance(found, str):
        return status(400, "BadRequest", found)
    namespace, pod, containers, grace = found
    try:
        ids = await request.app[NODE_KEY].restart_in_place(
            namespace, pod, containers, grace_period=grace
        )
    except errors.ContainerNotValid as e:
        return status(400, "BadRequest", str(e))
    except errors.PodNotFound as e:
        return status(404, "NotFound", str(e), name=pod, kind="pods")
    except errors.PodConflict as e:
        return status(409, "Conflict", str(e), name=pod, kind="pods")
    except errors.DockerError as e:
        return status(500, "InternalError", f"restarting pod {pod!r}: {e}")
    return web.json_response(
        {
            "kind": RESTART_KIND,
            "apiVersion": RESTART_VERSION,
            "metadata": {"creationTimestamp": None},
            "spec": body["spec"],
            "status": {
                "containers": [
                    {"name": name, "containerID": f"docker://{cid}"}
                    for name, cid in zip(containers, ids, strict=True)
                ]
            },
        },
        status=201,
    )
