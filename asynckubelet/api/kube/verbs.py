"""The routes of the Kubernetes API's write verbs: create, update, patch
(:mod:`~asynckubelet.api.kube.writes`), delete (:mod:`~asynckubelet.api.kube.deletes`) and
the ``scale`` subresource (:mod:`~asynckubelet.api.kube.scales`)."""

from __future__ import annotations

from aiohttp import web

from asynckubelet.api.kube.deletes import delete, delete_collection
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.scales import scale
from asynckubelet.api.kube.writes import create, patch, update
from asynckubelet.manifests import kinds as kind_table


def add_routes(router: web.UrlDispatcher, served: Served, base: str) -> None:
    """The write verbs of ``served`` under ``base`` (``/api/v1``, ``/apis/apps/v1``)."""
    if served.kind not in kind_table.KINDS or served.name in ("nodes", "events"):
        return
    listing = (
        f"{base}/namespaces/{{namespace}}/{served.name}"
        if served.namespaced
        else (f"{base}/{served.name}")
    )
    router.add_post(listing, create(served))
    router.add_delete(listing, delete_collection(served))
    one = f"{listing}/{{name}}"
    router.add_put(one, update(served))
    router.add_patch(one, patch(served))
    router.add_delete(one, delete(served))
    if any(sub == "scale" for sub, _, _ in served.subresources):
        for method in ("GET", "PUT", "PATCH"):
            router.add_route(method, f"{one}/scale", scale(served))
