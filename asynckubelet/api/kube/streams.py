"""``pods/exec``, ``pods/attach`` and ``pods/portforward`` in the node's Kubernetes API.

kubectl asks the API server for these subresources, and the API server hands the upgraded
connection through to the pod's kubelet. Here the node is both, so the request is checked
as the API server checks it (the pod, the container, the streams asked for; errors as its
``Status``) and then served by the same sessions as cluster mode's kubelet API
(:mod:`asynckubelet.api.upgrades`): WebSocket (``v5.channel.k8s.io`` and older for exec
and attach, ``SPDY/3.1+portforward.k8s.io`` for port forwarding) or SPDY/3.1, whichever
the client asks for. A command's exit code goes back as the ``Status`` on the error
channel, which kubectl prints as ``command terminated with exit code N``.

Port forwarding dials the pod's IP on the node's pod network (loopback for a pod on the
host's network), as cluster mode does.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from asynckubelet import errors
from asynckubelet.api import streaming, upgrades
from asynckubelet.api.answers import not_found, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.node import access
from asynckubelet.runtime.types import ContainerState

PODS = "/api/v1/namespaces/{namespace}/pods/{name}"


def _bad_request(message: str) -> web.Response:
    return status(400, "BadRequest", message)


def _pod(request: web.Request) -> Any:
    ns, name = request.match_info["namespace"], request.match_info["name"]
    pod = request.app[NODE_KEY].get(ns, name)
    if pod is None:
        raise _Answer(not_found("pods", name))
    return pod


class _Answer(Exception):
    """A refusal, answered before any upgrade."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.text)
        self.response = response


async def _session(request: web.Request, *, attach: bool) -> web.StreamResponse:
    node = request.app[NODE_KEY]
    name = request.match_info["name"]
    pod = _pod(request)
    try:
        container, _ = access.default_container(pod, request.query.get("container") or None)
    except errors.NotFound:
        container = request.query.get("container", "")
        raise _Answer(_bad_request(f"container {container} is not valid for pod {name}")) from None
    command = request.query.getall("command", [])
    if not attach and not command:
        raise _Answer(_bad_request("you must specify at least 1 command"))
    try:
        options = streaming.StreamOptions.from_query(request.query)
    except ValueError as e:
        raise _Answer(_bad_request(str(e))) from None
    try:
        instance = await access.container_instance(node.runtime, pod, container=container)
    except errors.NotFound:
        instance = None
    if instance is None or instance.state is not ContainerState.RUNNING:
        raise _Answer(_bad_request(f"container {container} is not running in pod {name}"))
    docker = node.runtime.docker
    start = (
        upgrades.container_attach(docker, instance.id)
        if attach
        else upgrades.container_exec(docker, instance.id)
    )
    verb = "attach to" if attach else "exec in"
    return await upgrades.serve_exec(
        request,
        options=options,
        command=command,
        start=start,
        what=f"{verb} {request.match_info['namespace']}/{name}/{container}",
    )


async def exec_pod(request: web.Request) -> web.StreamResponse:
    try:
        return await _session(request, attach=False)
    except _Answer as e:
        return e.response


async def attach_pod(request: web.Request) -> web.StreamResponse:
    try:
        return await _session(request, attach=True)
    except _Answer as e:
        return e.response


async def port_forward_pod(request: web.Request) -> web.StreamResponse:
    try:
        pod = _pod(request)
    except _Answer as e:
        return e.response
    name = f"{request.match_info['namespace']}/{request.match_info['name']}"
    try:
        dial = upgrades.pod_dial(pod)
    except ValueError:
        return _bad_request(f"pod {name} does not have an IP address yet")
    return await upgrades.serve_port_forward(request, pod=name, dial=dial)


def add_routes(router: web.UrlDispatcher) -> None:
    """The three subresources, on GET (a WebSocket upgrade) and POST (SPDY), as served."""
    for method in ("GET", "POST"):
        router.add_route(method, f"{PODS}/exec", exec_pod)
        router.add_route(method, f"{PODS}/attach", attach_pod)
        router.add_route(method, f"{PODS}/portforward", port_forward_pod)


__all__ = ["add_routes", "attach_pod", "exec_pod", "port_forward_pod"]
