"""The ``scale`` subresource of Deployments, ReplicaSets and StatefulSets: ``GET``,
``PUT`` and ``PATCH`` of an ``autoscaling/v1`` ``Scale``, written to the object as any
update (:func:`~asynckubelet.api.kube.writes.replace`)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from asynckubelet.api.answers import not_found
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import patches
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.writes import (
    Handler,
    Refused,
    answer_json,
    namespace_of,
    read_body,
    refuse,
    replace,
    stored_form,
    what,
)


def _scale_of(body: dict[str, Any]) -> dict[str, Any]:
    """A Deployment's, ReplicaSet's or StatefulSet's ``autoscaling/v1`` ``Scale``."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels")) or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int((body.get("status") or {}).get("replicas") or 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


def scale(served: Served) -> Handler:
    """``GET``, ``PUT`` and ``PATCH`` of ``.../{name}/scale``: the replicas read from and
    written to the object (through the node's admission, as any update)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            name = request.match_info["name"]
            ns = namespace_of(request, served)
            stored = stored_form(node, served, ns, name)
            if stored is None:
                return not_found(what(served), name)
            if request.method == "GET":
                return answer_json(_scale_of(stored))
            body = await read_body(request)
            if request.method == "PATCH":
                try:
                    body = patches.patched(_scale_of(stored), body, request.content_type)
                except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
                    raise refuse(400, "BadRequest", str(e)) from None
            replicas = ((body or {}).get("spec") or {}).get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise refuse(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                    f"{json.dumps(replicas)}: must be greater than or equal to 0",
                )
            stored.setdefault("spec", {})["replicas"] = replicas
            stored.pop("status", None)
            response = await replace(request, served, stored, name=name, subresource="scale")
            if response.status != 200:
                return response
            return answer_json(_scale_of(json.loads(response.text or "{}")))
        except Refused as e:
            return e.response

    return handler
