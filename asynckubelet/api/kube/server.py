"""The node's Kubernetes API over TLS: what real kubectl and Kubernetes clients talk to.

``serve`` answers the API server's paths on loopback (``https://127.0.0.1:6443``), so a
kubeconfig is all a client needs: discovery (:mod:`~asynckubelet.api.kube.discovery`),
``/version``, and the reads of the kinds the node keeps, answered by the local API's own
handlers (:mod:`asynckubelet.api.objects`, :mod:`asynckubelet.api.podlog`): one set of
objects, tables and error words whichever way a client comes. The same app answers on
the state dir's unix socket (:mod:`asynckubelet.api.localapi`), where the command line
asks it, authorized there by the peer's user ID instead of a certificate. Pods and this Node have
handlers of their own here (:mod:`~asynckubelet.api.kube.pods`); every list gains its
resourceVersions, chunks and the other kinds' watches on its way out
(:mod:`~asynckubelet.api.kube.lists`), the schema is served as OpenAPI
(:mod:`~asynckubelet.api.kube.openapi`), writes go through the node's one admission
(:mod:`~asynckubelet.api.kube.verbs`) and exec, attach and port-forward through the
streams the kubelet API shares (:mod:`~asynckubelet.api.kube.streams`). EndpointSlices
and the ``events.k8s.io`` Events are answered from the window of changes
(:mod:`~asynckubelet.api.kube.cached`), the subresources ``status``, ``token`` and
``ephemeralcontainers`` by :mod:`~asynckubelet.api.kube.subresources`. A verb not served
is the API server's ``405 MethodNotAllowed``; a path it does not know, its ``404``.

Authentication is the client certificate of the node's kubeconfig and nothing else
(:mod:`~asynckubelet.api.kube.pki`): TLS verifies a certificate against the node's CA
(one from another CA fails the handshake, as with the API server), and the handler
takes only the one certificate the kubeconfig holds; a request without it is ``401
Unauthorized``, worded as the API server words it. Requests are bounded as every server
of the node is (:mod:`asynckubelet.httpbounds`); a write's body is read bounded.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import ipaddress
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from aiohttp import web
from aiohttp.typedefs import Middleware

from asynckubelet import errors, httpbounds
from asynckubelet._logging import logger
from asynckubelet.api import objects, podlog, resourcemetrics
from asynckubelet.api.answers import (
    MAX_REQUEST_BYTES,
    SERVICES_KEY,
    STARTED_KEY,
    TERMINATING_KEY,
    status,
    status_body,
    wants_table,
)
from asynckubelet.api.apply import apply as apply_files
from asynckubelet.api.endpoints import DEFAULT_LIMITS, NODE_KEY, bound_port, flag_param, serve_site
from asynckubelet.api.kube import (
    cached,
    deletes,
    discovery,
    kubeconfigs,
    lists,
    openapi,
    pki,
    slices,
    streams,
    subresources,
    verbs,
    watchcache,
    writes,
)
from asynckubelet.api.kube.history import PodHistory, Versions
from asynckubelet.api.kube.nodes import ThisNode, this_node
from asynckubelet.api.kube.pods import (
    HISTORY_KEY,
    THIS_NODE_KEY,
    field_terms,
    get_node,
    get_pod,
    list_nodes,
    list_pods,
    not_allowed,
)
from asynckubelet.api.kube.watches import OBJECTS_KEY
from asynckubelet.api.restarts import restart as restart_containers
from asynckubelet.api.rows import event_table
from asynckubelet.kubectl import times
from asynckubelet.kubectl.objects import event_seen
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.workloads.services import ServiceController

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6443
PORT_TRIES = 20
"""Ports tried from the default one up when it is taken; then any free port."""
CLIENT_KEY = web.AppKey("client_fingerprint", bytes)
ADDRESS_KEY = web.AppKey("server_address", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class KubeAPI:
    """The API as it listens: its URL and the kubeconfig that reaches it."""

    url: str
    port: int
    kubeconfig: Path


# -- authentication and answers -----------------------------------------------------------


def unauthorized() -> web.Response:
    return status(401, "Unauthorized", "Unauthorized")


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve only the client certificate of the node's kubeconfig."""
    tls = request.transport.get_extra_info("ssl_object") if request.transport else None
    der = tls.getpeercert(binary_form=True) if isinstance(tls, ssl.SSLObject) else None
    if not der or not hmac.compare_digest(hashlib.sha256(der).digest(), request.app[CLIENT_KEY]):
        return unauthorized()
    return await handler(request)


@web.middleware
async def api_statuses(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404 and 405 as the API server's ``Status`` objects."""
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed:
        return not_allowed()
    except web.HTTPNotFound as e:
        if e.content_type == "application/json":
            raise
        # Empty details, as the API server's: kubectl debug reads them to tell a missing
        # subresource from a missing pod.
        body = status_body(404, "NotFound", "the server could not find the requested resource")
        return web.json_response({**body, "details": {}}, status=404)


# -- discovery ------------------------------------------------------------------------------


def _json(body: Any, content_type: str = "application/json") -> web.Response:
    return web.Response(body=json.dumps(body).encode(), headers={"Content-Type": content_type})


async def version(request: web.Request) -> web.Response:
    return _json(discovery.version_info())


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def core_root(request: web.Request) -> web.Response:
    if discovery.wants_aggregated(request.headers.get("Accept", "")):
        return _json(discovery.aggregated(core=True), discovery.AGGREGATED)
    return _json(discovery.api_versions(request.app[ADDRESS_KEY]))


async def groups_root(request: web.Request) -> web.Response:
    if discovery.wants_aggregated(request.headers.get("Accept", "")):
        return _json(discovery.aggregated(core=False), discovery.AGGREGATED)
    return _json(discovery.api_group_list())


async def group(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    if name not in discovery.GROUPS:
        raise web.HTTPNotFound()
    return _json(discovery.api_group(name))


async def group_version(request: web.Request) -> web.Response:
    name = request.match_info.get("group")
    version_text = request.match_info.get("version", "v1")
    found = discovery.resource_list(f"{name}/{version_text}" if name else version_text)
    if found is None:
        raise web.HTTPNotFound()
    return _json(found)


# -- the kinds the local API reads ----------------------------------------------------------


def _delegated(served: discovery.Served, handler: Handler, *, many: bool) -> Handler:
    """The local API's ``handler`` for ``served`` (of a list when ``many``, else of one
    object), with the API machinery it leaves out: ``watch`` refused (not served for this
    kind yet), the API server's field selectors applied to a list it answers."""

    async def answer(request: web.Request) -> web.StreamResponse:
        if flag_param(request, "watch"):
            return not_allowed()
        if not many:
            response = await handler(_without_fields(request))
            if response.status != 200 or not isinstance(response, web.Response):
                return response
            body = json.loads(response.text or "{}")
            return _json(writes.versioned(request.app, served.kind, body))
        if served.name == "events":
            return await _events(request, handler)
        terms = field_terms(request, "", namespaced=served.namespaced)
        response = await handler(_without_fields(request))
        if not terms or response.status != 200 or not isinstance(response, web.Response):
            return response
        return _json(_filtered(json.loads(response.text or "{}"), terms))

    return answer


def _without_fields(request: web.Request, **headers: str) -> web.Request:
    """``request`` without its field selector (applied here, not by the handler)."""
    if "fieldSelector" not in request.query and not headers:
        return request
    query = {k: v for k, v in request.query.items() if k != "fieldSelector"}
    replaced = {name.lower() for name in headers}
    kept = [(k, v) for k, v in request.headers.items() if k.lower() not in replaced]
    sent = [*kept, *headers.items()]
    return request.clone(rel_url=request.rel_url.with_query(query), headers=sent)


async def _events(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The local API's Events with the API server's field selectors (``kubectl describe``
    asks by ``involvedObject`` kind, namespace, name and uid): the handler lists them,
    then they are selected and, for a table, printed."""
    terms = field_terms(request, "events", namespaced=True)
    if not terms:
        return await handler(request)
    response = await handler(_without_fields(request, Accept="application/json"))
    if response.status != 200 or not isinstance(response, web.Response):
        return response
    body = _filtered(json.loads(response.text or "{}"), terms)
    if wants_table(request):
        return _json(event_table(sorted(body["items"], key=event_seen)))
    return _json(body)


def _filtered(body: dict[str, Any], terms: list[Any]) -> dict[str, Any]:
    """A list's items, or a table's rows, that the field selector's ``terms`` select."""
    from asynckubelet.api.kube.fields import matcher

    match = matcher(terms)
    if "items" in body:
        body["items"] = [i for i in body["items"] if match(i)]
    elif "rows" in body:
        body["rows"] = [r for r in body["rows"] if match(r.get("object") or {})]
    return body


def _handlers(served: discovery.Served) -> tuple[Handler, Handler]:
    """(list, get) of a served resource."""
    name = served.name
    found = cached.of(served)
    if found is not None:
        return cached.handlers(served, found)
    if name == "pods":
        return list_pods, get_pod
    if name == "nodes":
        return list_nodes, get_node
    special: dict[str, tuple[Handler, Handler]] = {
        "services": (objects.list_services, objects.get_service),
        "endpoints": (objects.list_endpoints, objects.get_endpoints),
        "events": (objects.list_events, objects.get_event),
    }
    pair = special.get(name) or (
        objects.list_objects(served.kind),
        objects.get_object(served.kind),
    )
    return _delegated(served, pair[0], many=True), _delegated(served, pair[1], many=False)


def create_app(
    node: Kubelet,
    *,
    client_fingerprint: bytes = b"",
    gate: Middleware | None = None,
    this: ThisNode,
    server_address: str,
    services: ServiceController | None = None,
) -> web.Application:
    """The Kubernetes API of ``node``, for the one client certificate whose SHA-256 is
    ``client_fingerprint``, or for the clients ``gate`` lets through (the unix socket's
    peer credentials) when given; ``server_address`` is the ``HOST:PORT`` legacy
    discovery names; ``services`` answers Services and Endpoints."""
    app = web.Application(
        client_max_size=MAX_REQUEST_BYTES, middlewares=[gate or authenticate, api_statuses]
    )
    app[NODE_KEY] = node
    app[SERVICES_KEY] = services
    app[TERMINATING_KEY] = set()
    app[STARTED_KEY] = times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")
    app[CLIENT_KEY] = client_fingerprint
    app[ADDRESS_KEY] = server_address
    app[THIS_NODE_KEY] = this
    versions = Versions(node.status.version)
    history = PodHistory(node.status, versions=versions)
    app[HISTORY_KEY] = history
    app[OBJECTS_KEY] = watched = watchcache.ObjectHistory(versions)
    watched.follow_store(node.objects)
    watched.follow_events(node.recorder)
    slices.follow_services(watched, services)

    async def close_history(app: web.Application) -> None:
        history.close()
        watched.close()

    app.on_cleanup.append(close_history)
    app.on_response_prepare.append(slices.warn_of_endpoints)
    app[deletes.COLLECTING_KEY] = {}
    app.on_startup.append(deletes.resume_collections)
    app.on_cleanup.append(deletes.cancel_collections)
    r = app.router
    for path in ("/healthz", "/livez", "/readyz"):
        r.add_get(path, healthz)
    r.add_get("/version", version)
    r.add_get("/api", core_root)
    r.add_get("/api/{version}", group_version)
    r.add_get("/apis", groups_root)
    r.add_get("/apis/{group}", group)
    r.add_get("/apis/{group}/{version}", group_version)
    openapi.add_routes(r)
    resourcemetrics.add_routes(r)
    for served in discovery.SERVED:
        if served.group == discovery.METRICS:
            continue
        base = f"/apis/{served.group_version}" if served.group else "/api/v1"
        listing, one = _handlers(served)
        listing = lists.listed(served, listing)
        r.add_get(f"{base}/{served.name}", listing)
        if served.namespaced:
            r.add_get(f"{base}/namespaces/{{namespace}}/{served.name}", listing)
            r.add_get(f"{base}/namespaces/{{namespace}}/{served.name}/{{name}}", one)
            if served.kind in discovery.CONTROLLED:
                r.add_get(f"{base}/namespaces/{{namespace}}/{served.name}/{{name}}/status", one)
        else:
            r.add_get(f"{base}/{served.name}/{{name}}", one)
        verbs.add_routes(r, served, base)
    r.add_get("/api/v1/namespaces/{namespace}/pods/{name}/log", podlog.pod_log)
    own = {"applies": apply_files, "restarts": restart_containers}
    for served in discovery.OWN:
        r.add_post(f"/apis/{served.group_version}/{served.name}", own[served.name])
    subresources.add_routes(app, node)
    streams.add_routes(r)
    return app


# -- serving --------------------------------------------------------------------------------


def server_url(host: str, port: int) -> str:
    """The URL a client uses (loopback for a wildcard address)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"https://{host}:{port}"
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    shown = f"[{address}]" if address.version == 6 else str(address)
    return f"https://{shown}:{port}"


def tls_context(credentials: pki.Credentials) -> ssl.SSLContext:
    """TLS with the serving pair; a client certificate is verified against the node's CA
    when one is sent (a request without one gets the API server's 401)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    cert, key = credentials.server_files
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cadata=credentials.ca_cert.decode("ascii"))
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


async def node_of(node: Kubelet) -> ThisNode:
    """The Node object's parts that do not change while ``node`` runs, its engine's
    version among them."""
    engine = await node.runtime.docker.version()
    return this_node(
        node,
        runtime_version=f"docker://{engine.get('Version', 'unknown')}",
        kubelet_version=discovery.version_info()["gitVersion"],
    )


async def serve_kube_api(
    node: Kubelet,
    *,
    state_dir: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    next_free: bool = False,
    context_name: str = kubeconfigs.CONTEXT,
    services: ServiceController | None = None,
    limits: httpbounds.Limits = DEFAULT_LIMITS,
    task_status: anyio.abc.TaskStatus[KubeAPI] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the Kubernetes API on ``host:port`` until cancelled (``next_free``: the next
    free port when that one is taken, any free port when the next ones are); reports the
    URL, port and kubeconfig once listening and the kubeconfig is written (its cluster,
    user and context named ``context_name``)."""
    credentials = await pki.credentials(state_dir, hosts=[host])
    try:
        context = tls_context(credentials)
    except (ssl.SSLError, OSError) as e:
        raise errors.DaemonError(f"the API's serving certificate cannot be used: {e}") from None
    this = await node_of(node)
    candidates = [port]
    if next_free and port:
        candidates = [*range(port, min(port + PORT_TRIES, 65536)), 0]
    for candidate in candidates:
        listening = False

        def started(site: web.BaseSite, candidate: int = candidate) -> None:
            nonlocal listening
            listening = True
            bound = bound_port(site, candidate)
            url = server_url(host, bound)
            path = kubeconfigs.write_kubeconfig(
                state_dir, kubeconfigs.kubeconfig(credentials, server=url, name=context_name)
            )
            logger.info("Kubernetes API on {} (kubeconfig {})", url, path)
            task_status.started(KubeAPI(url=url, port=bound, kubeconfig=path))

        app = create_app(
            node,
            client_fingerprint=credentials.client_fingerprint,
            this=this,
            server_address=f"{host}:{candidate}",
            services=services,
        )
        try:
            await serve_site(
                app, httpbounds.TCP(host, candidate, ssl=context), started, limits=limits
            )
            return
        except OSError as e:
            if listening or e.errno != errno.EADDRINUSE or candidate == candidates[-1]:
                raise
            logger.debug("port {} is taken; trying the next one", candidate)


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "KubeAPI",
    "create_app",
    "node_of",
    "serve_kube_api",
    "server_url",
    "tls_context",
    "unauthorized",
]
