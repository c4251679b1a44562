"""Writes of ``pods/NAME/ephemeralcontainers``: ``PUT`` and ``PATCH`` (JSON, merge and
strategic merge), as ``kubectl debug`` sends them.

Only the ephemeral containers of what is sent are kept (the API server's
``dropNonEphemeralContainerUpdates``); the pod they make is validated as
``ValidatePodEphemeralContainersUpdate`` validates it
(:mod:`~asynckubelet.manifests.ephemeral`: additions only, names unique across every
container, no ports, probes, resources or lifecycle, ``targetContainerName`` naming a
container), refused with ``422 Invalid`` worded as the API server words it, and a stale
``resourceVersion`` is ``409``. The pod is then stored through the same path as an update of
it, and its worker starts the added containers (:mod:`~asynckubelet.runtime.actions`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from asynckubelet.api.kube.podwrites import invalid_pod, subresource_patch, subresource_put
from asynckubelet.manifests.ephemeral import (
    ephemeral_update,
    validate_ephemeral_containers_update,
)

SUBRESOURCE = "ephemeralcontainers"


def _updated(name: str, sent: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    new = ephemeral_update(sent, stored)
    errors = validate_ephemeral_containers_update(new, stored)
    if errors:
        raise invalid_pod(name, errors)
    return new


async def replace_ephemeral(request: web.Request) -> web.Response:
    """``PUT pods/NAME/ephemeralcontainers``."""
    return await subresource_put(request, SUBRESOURCE, _updated)


async def patch_ephemeral(request: web.Request) -> web.Response:
    """``PATCH pods/NAME/ephemeralcontainers``."""
    return await subresource_patch(request, SUBRESOURCE, _updated)


__all__ = ["patch_ephemeral", "replace_ephemeral"]
