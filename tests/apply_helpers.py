"""The node's ``applies`` (an ``Apply`` of ``local.asynckubelet/v1``) as the unit tests
post them to an app of the local API."""

from __future__ import annotations

from typing import Any, Protocol

APPLIES = "/apis/local.asynckubelet/v1/applies"


class _Response(Protocol):
    status: int

    async def json(self) -> Any: ...


class _Client(Protocol):
    def post(self, path: str, *, json: Any) -> Any: ...


async def post_apply(
    client: _Client, *texts: str, prune: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """Each text as a file of one ``Apply``: its code and, when created (``201``), the
    Apply's ``status`` (``items``, ``pruned``, ``warnings``), else the ``Status``
    refusing it."""
    spec: dict[str, Any] = {
        "files": [{"source": f"f{i}.yaml", "manifest": t} for i, t in enumerate(texts)]
    }
    if prune is not None:
        spec["prune"] = prune
    body = {"apiVersion": "local.asynckubelet/v1", "kind": "Apply", "spec": spec}
    response: _Response = await client.post(APPLIES, json=body)
    answer = await response.json()
    return response.status, answer["status"] if response.status == 201 else answer
