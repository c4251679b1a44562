"""Every route of every server the node runs has its authorization case (the kubelet's
``TestAuthzCoverage``): a route added without one fails here.

- the kubelet API (cluster mode): each route is in :data:`KUBELET_API` with the
  ``nodes/<subresource>`` verb a request to it is authorized for, and an anonymous
  request to it is 401;
- the local API (the state dir's unix socket): the Kubernetes API's routes, every one
  answering 401 to a client that is not a unix-socket peer of an allowed user;
- the unauthenticated TCP endpoint: exactly ``/healthz`` and ``/metrics``;
- the node's Kubernetes API: every route answers 401 to a client without the
  kubeconfig's client certificate, and refuses one with another CA's certificate.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request
from kube_helpers import Served, served_node

from asynckubelet import KubeletConfig
from asynckubelet.api import server
from asynckubelet.api.kube import pki
from asynckubelet.api.kube.nodes import this_node
from asynckubelet.api.kube.server import create_app
from asynckubelet.api.localapi import create_local_app
from asynckubelet.cluster import kubeletapi, kubeletauth
from asynckubelet.node import Kubelet
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

KUBELET_API: dict[tuple[str, str], tuple[str, str]] = {
    ("GET", "/healthz"): ("get", "proxy"),
    ("GET", "/pods"): ("get", "proxy"),
    ("GET", "/pods/"): ("get", "proxy"),
    ("GET", "/containerLogs/{namespace}/{pod}/{container}"): ("get", "proxy"),
    ("GET", "/metrics/resource"): ("get", "metrics"),
    ("GET", "/stats/summary"): ("get", "stats"),
    ("GET", "/exec/{namespace}/{pod}/{container}"): ("create", "proxy"),
    ("POST", "/exec/{namespace}/{pod}/{container}"): ("create", "proxy"),
    ("GET", "/exec/{namespace}/{pod}/{uid}/{container}"): ("create", "proxy"),
    ("POST", "/exec/{namespace}/{pod}/{uid}/{container}"): ("create", "proxy"),
    ("GET", "/portForward/{namespace}/{pod}"): ("create", "proxy"),
    ("POST", "/portForward/{namespace}/{pod}"): ("create", "proxy"),
    ("GET", "/portForward/{namespace}/{pod}/{uid}"): ("create", "proxy"),
    ("POST", "/portForward/{namespace}/{pod}/{uid}"): ("create", "proxy"),
    ("GET", "/attach/{tail}"): ("create", "proxy"),
    ("POST", "/attach/{tail}"): ("create", "proxy"),
    ("GET", "/run/{tail}"): ("create", "proxy"),
    ("POST", "/run/{tail}"): ("create", "proxy"),
}
"""(method, route) -> (verb, subresource) of ``nodes`` a request is authorized for."""


def _routes(app: web.Application) -> Iterator[tuple[str, str]]:
    """(method, canonical path) of every route, the HEAD twins of GET routes left out;
    a regex placeholder ``{tail:.*}`` is written ``{tail}``."""
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        canonical = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", route.resource.canonical)  # type: ignore[union-attr]
        yield route.method, canonical


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: "x" + m.group(1), path)


class _NoNode:
    def list_json(self) -> list[str]:
        raise AssertionError("an unauthenticated request reached a handler")


def test_every_kubelet_api_route_has_its_authorization_case() -> None:
    app = kubeletapi.create_app(_NoNode(), node_name="n1", authorizer=None)  # type: ignore[arg-type]
    assert sorted(set(_routes(app))) == sorted(KUBELET_API)


@pytest.mark.parametrize(("method", "path"), sorted(KUBELET_API))
def test_each_kubelet_api_route_is_authorized_as_the_kubelet_maps_it(
    method: str, path: str
) -> None:
    request = make_mocked_request(method, _concrete(path))
    attrs = kubeletauth.attributes(request, "n1")
    assert (attrs.verb, attrs.subresource, attrs.resource, attrs.name) == (
        *KUBELET_API[(method, path)],
        "nodes",
        "n1",
    )


async def test_no_kubelet_api_route_answers_an_anonymous_client() -> None:
    app = kubeletapi.create_app(_NoNode(), node_name="n1", authorizer=None)  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for method, path in sorted(set(_routes(app))):
            answer = await client.request(method, _concrete(path))
            assert answer.status == 401, (method, path)


async def test_no_local_api_route_answers_a_client_off_its_socket() -> None:
    node = Kubelet(KubeletConfig(node_name="n1", housekeeping_period=3600), docker=FakeDocker())
    app = create_local_app(node)
    routes = sorted(set(_routes(app)))
    assert len(routes) > 20
    async with node, TestClient(TestServer(app, host="127.0.0.1")) as client:
        for method, path in routes:
            answer: Any = await client.request(method, _concrete(path))
            assert answer.status == 401, (method, path)


def test_the_socket_serves_the_kubernetes_apis_routes_and_only_metrics_of_its_own() -> None:
    node = Kubelet(KubeletConfig(node_name="n1", housekeeping_period=3600), docker=FakeDocker())
    local = set(_routes(create_local_app(node)))
    this = this_node(node, runtime_version="docker://1", kubelet_version="v1")
    tls = set(_routes(create_app(node, client_fingerprint=b"x", this=this, server_address="h")))
    assert local - tls == {("GET", "/metrics")}
    assert tls <= local


def test_the_unauthenticated_endpoint_serves_health_and_metrics_only() -> None:
    app = server.create_app(_NoNode())  # type: ignore[arg-type]
    assert sorted(set(_routes(app))) == [("GET", "/healthz"), ("GET", "/metrics")]
    assert set(server.PUBLIC_ROUTES) == {"/healthz", "/metrics"}


def _kube_routes(served: Served) -> list[tuple[str, str]]:
    this = this_node(served.node, runtime_version="docker://1", kubelet_version="v1.33.0")
    app = create_app(served.node, client_fingerprint=b"", this=this, server_address="127.0.0.1:1")
    return sorted(set(_routes(app)))


async def _status(served: Served, method: str, path: str, context: ssl.SSLContext) -> int | None:
    """The answer's status; None when the TLS handshake refused the client."""
    async with aiohttp.ClientSession() as session:
        try:
            async with session.request(method, served.api.url + path, ssl=context) as answer:
                return answer.status
        except aiohttp.ClientError:
            return None


async def test_no_kube_api_route_answers_a_client_without_the_nodes_certificate(
    tmp_path: Path,
) -> None:
    other = pki.ensure_credentials(tmp_path / "other", hosts=["127.0.0.1"])
    async with served_node(tmp_path) as served:
        routes = _kube_routes(served)
        assert len(routes) > 30
        stranger = served.context(
            cert=other.directory / "admin.crt", key=other.directory / "admin.key"
        )
        for method, path in routes:
            concrete = _concrete(path)
            assert await _status(served, method, concrete, served.context()) == 401, path
            assert await _status(served, method, concrete, stranger) in (None, 401), path
        assert await _status(served, "GET", "/version", served.admin()) == 200
