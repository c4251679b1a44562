"""The kubelet API on port 10250: what the API server proxies to a node.

``kubectl logs`` reaches ``/containerLogs/{namespace}/{pod}/{container}``, ``kubectl
exec`` ``/exec/...`` and ``kubectl port-forward`` ``/portForward/{namespace}/{pod}``
through the API server, which dials the address and port the Node advertises
(``status.addresses``, ``daemonEndpoints.kubeletEndpoint.port``) with its kubelet client
certificate. So the server speaks HTTPS:

- its serving certificate is the one given (``--tls-cert-file``/``--tls-private-key-file``)
  or one it makes for itself at the first start, self-signed for the node's name and IP,
  under ``<state-dir>/pki`` (the key readable by root only), as the kubelet does;
- a client is authenticated by a certificate the cluster's CA signed (``--client-ca-file``,
  else the kubeconfig's certificate authority), or by a bearer token the API server vouches
  for (a ``TokenReview``, answers cached as the kubelet caches them); a request with
  neither is 401, as on a kubelet with anonymous access off, which is the only way here;
- authorization is ``Webhook`` by default, the kubelet's configuration default: each
  request is a ``SubjectAccessReview`` for ``nodes/proxy`` (``nodes/log``, ``nodes/stats``,
  ``nodes/metrics``, ``nodes/spec`` for their paths), answers cached as the kubelet does.
  ``/exec``, ``/attach``, ``/portForward`` and ``/run`` are always asked as ``create``,
  whatever the method: a WebSocket upgrade is a GET, and ``get nodes/proxy`` (what a
  monitoring agent is given) must not be enough to run a command in a pod.
  ``AlwaysAllow`` (only when asked, with a warning) lets every authenticated client do
  anything: any node's or user's certificate signed by the cluster CA.

The read-only endpoints are those of :mod:`asynckubelet.api.endpoints` (``/healthz``, ``/pods``,
``/containerLogs`` with the kubelet's query parameters) and the resource metrics of
:mod:`asynckubelet.api.resourcemetrics` (``/metrics/resource``, ``/stats/summary``, what
metrics-server scrapes); exec and port forwarding are SPDY
or WebSocket sessions (:mod:`asynckubelet.api.upgrades`, shared with the node's Kubernetes
API). ``/attach`` and ``/run`` are not served.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
from aiohttp import web

from asynckubelet import errors, httpbounds
from asynckubelet._logging import logger
from asynckubelet.api import endpoints, resourcemetrics, streaming, upgrades
from asynckubelet.cluster.kubeletauth import (
    AUTHORIZATION_MODES,
    AuthorizationMode,
    Reviewer,
    TokenAuthenticator,
    TokenReviewer,
    User,
    WebhookAuthorizer,
    attributes,
    bearer_token,
    peer_user,
    self_signed_pair,
    server_context,
)
from asynckubelet.node import access
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.runtime.types import ContainerState

# -- the application ------------------------------------------------------------------------

NODE_NAME_KEY = web.AppKey("node_name", str)
AUTHORIZER_KEY = web.AppKey("authorizer", object)
TOKENS_KEY = web.AppKey("tokens", object)


async def request_user(request: web.Request) -> User | None:
    """Who sent ``request``: its verified client certificate's subject, else the user
    the API server names for its bearer token; None when neither says."""
    transport = request.transport
    user = peer_user(transport.get_extra_info("peercert") if transport is not None else None)
    if user is not None:
        return user
    token = bearer_token(request)
    tokens = cast("TokenReviewer | None", request.app[TOKENS_KEY])
    if token is None or tokens is None:
        return None
    try:
        return await tokens(token)
    except errors.ClusterError as e:
        logger.warning("reviewing a bearer token failed: {}", e)
        return None


@web.middleware
async def authenticate(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    user = await request_user(request)
    if user is None:
        raise web.HTTPUnauthorized(text="Unauthorized\n")
    authorizer = cast("Reviewer | None", request.app[AUTHORIZER_KEY])
    if authorizer is not None:
        attrs = attributes(request, request.app[NODE_NAME_KEY])
        try:
            allowed, reason = await authorizer(user, attrs)
        except errors.ClusterError as e:
            logger.warning("authorizing {} failed: {}", user.name, e)
            raise web.HTTPInternalServerError(text="Authorization error\n") from None
        if not allowed:
            message = (
                f"Forbidden (user={user.name}, verb={attrs.verb}, resource={attrs.resource}, "
                f"subresource={attrs.subresource})"
            )
            logger.info("{}{}", message, f": {reason}" if reason else "")
            raise web.HTTPForbidden(text=message + "\n")
    return await handler(request)


def _pod_and_container(node: Kubelet, request: web.Request) -> tuple[Any, str]:
    ns = request.match_info["namespace"]
    name = request.match_info["pod"]
    container = request.match_info.get("container")
    pod = node.get(ns, name)
    if pod is None:
        raise web.HTTPNotFound(text=f'pod does not exist: pods "{name}" not found\n')
    if container is None:
        return pod, ""
    try:
        chosen, _ = access.default_container(pod, container)
    except errors.NotFound:
        raise web.HTTPNotFound(text=f'container not found ("{container}")\n') from None
    return pod, chosen


async def exec_handler(request: web.Request) -> web.StreamResponse:
    node = request.app[endpoints.NODE_KEY]
    pod, container = _pod_and_container(node, request)
    command = request.query.getall("command", [])
    if not command:
        raise web.HTTPBadRequest(text="you must specify a command\n")
    try:
        options = streaming.StreamOptions.from_query(request.query)
    except ValueError as e:
        raise web.HTTPBadRequest(text=f"{e}\n") from None
    try:
        instance = await access.container_instance(node.runtime, pod, container=container)
    except errors.NotFound:
        instance = None
    if instance is None or instance.state is not ContainerState.RUNNING:
        raise web.HTTPNotFound(text=f'container not found ("{container}")\n')

    ns, name = request.match_info["namespace"], request.match_info["pod"]
    return await upgrades.serve_exec(
        request,
        options=options,
        command=command,
        start=upgrades.container_exec(node.runtime.docker, instance.id),
        what=f"exec in {ns}/{name}/{container}",
    )


async def port_forward_handler(request: web.Request) -> web.StreamResponse:
    node = request.app[endpoints.NODE_KEY]
    pod, _ = _pod_and_container(node, request)
    try:
        dial = upgrades.pod_dial(pod)
    except ValueError as e:
        raise web.HTTPInternalServerError(text=f"{e}\n") from None
    name = f"{request.match_info['namespace']}/{request.match_info['pod']}"
    return await upgrades.serve_port_forward(request, pod=name, dial=dial)


async def not_served(request: web.Request) -> web.Response:
    raise web.HTTPNotImplemented(
        text=f"{request.path.split('/')[1]} is not supported by this node\n"
    )


def create_app(
    node: Kubelet,
    *,
    node_name: str,
    authorizer: Reviewer | None,
    tokens: TokenReviewer | None = None,
) -> web.Application:
    """The kubelet API of ``node``: every request authenticated (client certificate, or a
    bearer token ``tokens`` vouches for) and authorized by ``authorizer`` (None:
    ``AlwaysAllow``, which the caller must have been asked for)."""
    app = web.Application(middlewares=[authenticate])
    app[endpoints.NODE_KEY] = node
    app[NODE_NAME_KEY] = node_name
    app[AUTHORIZER_KEY] = authorizer
    app[TOKENS_KEY] = tokens
    app[resourcemetrics.START_TIME_KEY] = time.time()
    app.router.add_get("/healthz", endpoints.healthz)
    app.router.add_get("/metrics/resource", resourcemetrics.metrics_resource)
    app.router.add_get("/stats/summary", resourcemetrics.stats_summary)
    app.router.add_get("/pods", endpoints.pods)
    app.router.add_get("/pods/", endpoints.pods)
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", endpoints.container_logs)
    for method in ("GET", "POST"):
        app.router.add_route(method, "/exec/{namespace}/{pod}/{container}", exec_handler)
        app.router.add_route(method, "/exec/{namespace}/{pod}/{uid}/{container}", exec_handler)
        app.router.add_route(method, "/portForward/{namespace}/{pod}", port_forward_handler)
        app.router.add_route(method, "/portForward/{namespace}/{pod}/{uid}", port_forward_handler)
        app.router.add_route(method, "/attach/{tail:.*}", not_served)
        app.router.add_route(method, "/run/{tail:.*}", not_served)
    return app


@dataclass(frozen=True)
class KubeletServing:
    """Where and how the kubelet API is served (the kubelet's flags of the same names)."""

    address: str
    port: int = 10250
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    client_ca_file: Path | None = None
    authorization_mode: AuthorizationMode = "Webhook"
    cert_dir: Path | None = None
    """Where a self-signed pair is kept (``<state-dir>/pki``)."""

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        if self.authorization_mode not in AUTHORIZATION_MODES:
            raise ValueError(
                f"--authorization-mode must be one of {', '.join(AUTHORIZATION_MODES)}, "
                f"not {self.authorization_mode!r}"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--kubelet-port must be a port number, not {self.port}")


async def serve_kubelet_api(
    node: Kubelet,
    serving: KubeletServing,
    *,
    node_name: str,
    cluster_ca: bytes | None,
    review: Reviewer | None = None,
    review_token: TokenReviewer | None = None,
    limits: httpbounds.Limits = endpoints.DEFAULT_LIMITS,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the kubelet API until cancelled; reports the bound port once listening.
    ``review`` answers SubjectAccessReviews (Webhook authorization), ``review_token``
    TokenReviews (bearer tokens; None: client certificates only); ``limits`` bound
    connections (TLS handshakes included) and requests."""
    if serving.client_ca_file is not None:
        try:
            client_ca = serving.client_ca_file.read_bytes()
        except OSError as e:
            raise errors.KubeletServingError(
                f"--client-ca-file {serving.client_ca_file}: {e}"
            ) from None
    elif cluster_ca is not None:
        client_ca = cluster_ca
    else:
        raise errors.KubeletServingError(
            "the kubelet API needs a CA to verify clients: --client-ca-file, or a kubeconfig "
            "with a certificate authority"
        )
    if serving.tls_cert_file is not None and serving.tls_private_key_file is not None:
        cert, key = serving.tls_cert_file, serving.tls_private_key_file
    else:
        directory = serving.cert_dir or Path("pki")
        cert, key = await anyio.to_thread.run_sync(
            lambda: self_signed_pair(directory, node_name=node_name, addresses=[serving.address])
        )
    context = server_context(cert=cert, key=key, client_ca=client_ca)
    authorizer: Reviewer | None = None
    if serving.authorization_mode == "Webhook":
        if review is None:
            raise errors.KubeletServingError("--authorization-mode Webhook needs the API server")
        authorizer = WebhookAuthorizer(review)
    else:
        logger.warning(
            "kubelet API authorization is AlwaysAllow: any client the cluster's CA signed "
            "(any node, any user) may read logs and exec into every pod on this node; "
            "--authorization-mode Webhook asks the API server per request"
        )
    tokens = TokenAuthenticator(review_token) if review_token is not None else None

    def started(site: web.BaseSite) -> None:
        bound = endpoints.bound_port(site, serving.port)
        logger.info(
            "kubelet API on https://{}:{} ({})",
            serving.address,
            bound,
            serving.authorization_mode,
        )
        task_status.started(bound)

    await endpoints.serve_site(
        create_app(node, node_name=node_name, authorizer=authorizer, tokens=tokens),
        httpbounds.TCP(serving.address, serving.port, ssl=context),
        started,
        limits=limits,
    )


__all__ = [
    "KubeletServing",
    "authenticate",
    "create_app",
    "exec_handler",
    "port_forward_handler",
    "request_user",
    "serve_kubelet_api",
]
