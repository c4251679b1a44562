"""The resources the node derives or issues: EndpointSlices named and labelled as
upstream's controller makes them, ``events.k8s.io`` Events, their discovery and tables,
the windows of derived kinds, ``pods/status``, and ``TokenRequest`` tokens that verify
with the node's public key."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import anyio
import jwt
import pytest
from kube_helpers import Served, pod, served, watch_lines
from lightkube.models.core_v1 import PodReadinessGate

from asynckubelet.api.kube import discovery, eventsv1, protowire, slices
from asynckubelet.api.kube.history import Versions
from asynckubelet.api.kube.watchcache import ObjectHistory
from asynckubelet.kubectl.objects import endpointslice_row
from asynckubelet.node.tokens import TokenIssuer, TokenRequest
from asynckubelet.workloads.services import Endpoint, EndpointPort

pytestmark = pytest.mark.anyio
__all__ = ["served"]
"""The fixtures this module takes from its helpers."""

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "api",
        "namespace": "default",
        "uid": "5b1c",
        "labels": {"app": "api"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    },
}
HTTP = (EndpointPort(name="http", port=8080, protocol="TCP"),)


def endpoint(ip: str, *, ready: bool = True, ports: tuple[EndpointPort, ...] = HTTP) -> Endpoint:
    return Endpoint(
        ip=ip, ready=ready, pod=f"api-{ip[-1]}", uid=f"uid-{ip}", ports=ports, node_name="n1"
    )


# -- EndpointSlices --------------------------------------------------------------------------


def test_a_slice_is_named_labelled_and_owned_as_upstreams_controller_makes_it() -> None:
    [body] = slices.endpoint_slices(SERVICE, (endpoint("10.0.0.2"),))
    meta = body["metadata"]
    assert (body["apiVersion"], body["kind"], body["addressType"]) == (
        "discovery.k8s.io/v1",
        "EndpointSlice",
        "IPv4",
    )
    assert meta["generateName"] == "api-"
    assert meta["name"].startswith("api-")
    assert len(meta["name"]) == len("api-") + 5
    assert set(meta["name"][4:]) <= set(slices.SUFFIX_ALPHABET)
    assert meta["labels"] == {
        "app": "api",
        "kubernetes.io/service-name": "api",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    assert meta["ownerReferences"][0] | {"uid": ""} == {
        "apiVersion": "v1",
        "kind": "Service",
        "name": "api",
        "uid": "",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert body["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert body["endpoints"] == [
        {
            "addresses": ["10.0.0.2"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "n1",
            "targetRef": {
                "kind": "Pod",
                "namespace": "default",
                "name": "api-2",
                "uid": "uid-10.0.0.2",
            },
        }
    ]


def test_a_slices_name_stays_while_its_endpoints_change() -> None:
    [first] = slices.endpoint_slices(SERVICE, (endpoint("10.0.0.2"),))
    [second] = slices.endpoint_slices(SERVICE, (endpoint("10.0.0.2", ready=False),))
    assert first["metadata"]["name"] == second["metadata"]["name"]
    assert second["endpoints"][0]["conditions"]["ready"] is False


def test_a_placeholder_slice_that_fills_keeps_its_name() -> None:
    [placeholder] = slices.endpoint_slices(SERVICE, ())
    name = placeholder["metadata"]["name"]
    [filled] = slices.endpoint_slices(SERVICE, (endpoint("10.0.0.2"),), [name])
    assert filled["metadata"]["name"] == name
    assert filled["endpoints"][0]["addresses"] == ["10.0.0.2"]
    [fresh] = slices.endpoint_slices(SERVICE, (endpoint("10.0.0.2"),))
    assert fresh["metadata"]["name"] != name


def test_endpoints_with_other_ports_go_to_another_slice() -> None:
    other = (EndpointPort(name="http", port=9090, protocol="TCP"),)
    found = slices.endpoint_slices(
        SERVICE, (endpoint("10.0.0.2"), endpoint("10.0.0.3", ports=other))
    )
    assert sorted(b["ports"][0]["port"] for b in found) == [8080, 9090]
    assert len({b["metadata"]["name"] for b in found}) == 2


def test_a_service_without_endpoints_has_upstreams_placeholder_slice() -> None:
    [body] = slices.endpoint_slices(SERVICE, ())
    assert (body["endpoints"], body["ports"]) == ([], None)
    row = endpointslice_row(body, now=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    assert row == [body["metadata"]["name"], "IPv4", "<unset>", "<unset>", "5m"]


def test_a_long_service_name_is_cut_as_a_generated_name_is() -> None:
    long = {**SERVICE, "metadata": {**SERVICE["metadata"], "name": "a" * 63}}
    [body] = slices.endpoint_slices(long, ())
    assert len(body["metadata"]["name"]) == 63
    assert body["metadata"]["name"].startswith("a" * 58)


def test_kubectls_slice_row_lists_three_endpoints_then_how_many_more() -> None:
    many = tuple(endpoint(f"10.0.0.{i}") for i in range(2, 7))
    [body] = slices.endpoint_slices(SERVICE, many)
    cells = endpointslice_row(body, now=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    assert cells[2:4] == ["8080", "10.0.0.2,10.0.0.3,10.0.0.4 + 2 more..."]


@pytest.mark.parametrize(
    ("path", "about"),
    [
        ("/api/v1/endpoints", True),
        ("/api/v1/namespaces/default/endpoints", True),
        ("/api/v1/namespaces/default/endpoints/api", True),
        ("/api/v1/namespaces/endpoints/pods", False),
        ("/apis/discovery.k8s.io/v1/endpointslices", False),
        ("/api/v1/services", False),
    ],
)
def test_the_endpoints_warning_goes_on_answers_about_endpoints(path: str, about: bool) -> None:
    assert slices.about_endpoints(path) is about


async def test_an_endpoints_answer_carries_the_deprecation_warning(served: Served) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(served.api.url + "/api/v1/endpoints", ssl=served.admin()) as response,
    ):
        assert response.headers.getall("Warning") == [
            '299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"'
        ]


def test_a_derived_kind_replaced_without_an_object_deletes_it() -> None:
    history = ObjectHistory(Versions())
    body = {"metadata": {"name": "api", "namespace": "default"}}
    history.replace("Endpoints", {("default", "api"): body})
    with history.watch("Endpoints", str(history.versions.value)) as watch:
        history.replace("Endpoints", {})
        change = watch.changes.receive_nowait()
    assert (change.type, change.key) == ("DELETED", ("default", "api"))
    assert history.body_of("Endpoints", ("default", "api")) is None


# -- events.k8s.io ---------------------------------------------------------------------------


CORE_EVENT = {
    "kind": "Event",
    "apiVersion": "v1",
    "metadata": {"name": "web.1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u1"},
    "reason": "Started",
    "message": "Started container app",
    "type": "Normal",
    "count": 2,
    "firstTimestamp": "2026-01-01T00:00:00+00:00",
    "lastTimestamp": "2026-01-01T00:01:00+00:00",
    "source": {"component": "kubelet", "host": "n1"},
}


def test_a_core_event_in_the_events_group_shape() -> None:
    body = eventsv1.to_events_v1(CORE_EVENT)
    assert body == {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "web.1", "namespace": "default"},
        "eventTime": None,
        "reportingController": "kubelet",
        "reportingInstance": "n1",
        "reason": "Started",
        "regarding": CORE_EVENT["involvedObject"],
        "note": "Started container app",
        "type": "Normal",
        "deprecatedSource": {"component": "kubelet", "host": "n1"},
        "deprecatedFirstTimestamp": "2026-01-01T00:00:00+00:00",
        "deprecatedLastTimestamp": "2026-01-01T00:01:00+00:00",
        "deprecatedCount": 2,
    }


def test_discovery_names_the_new_groups_and_the_tokens_kind() -> None:
    assert discovery.GROUPS == (
        "apps",
        "events.k8s.io",
        "batch",
        "discovery.k8s.io",
        "metrics.k8s.io",
        "local.asynckubelet",
    )
    legacy = discovery.resource_list("v1")
    assert legacy is not None
    token = next(r for r in legacy["resources"] if r["name"] == "serviceaccounts/token")
    assert (token["group"], token["version"], token["kind"], token["verbs"]) == (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        ["create"],
    )
    [core] = discovery.aggregated(core=True)["items"]
    accounts = next(
        r for r in core["versions"][0]["resources"] if r["resource"] == "serviceaccounts"
    )
    assert accounts["subresources"][0]["responseKind"] == {
        "group": "authentication.k8s.io",
        "version": "v1",
        "kind": "TokenRequest",
    }


async def test_events_of_both_groups_are_the_same_events(served: Served) -> None:
    await served.node.apply([pod("web")])
    while not served.node.recorder.list():
        await served.node.status.changed()
    code, _, grouped = await served.request(
        "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dweb"
    )
    _, _, core = await served.request("/api/v1/namespaces/default/events")
    assert (code, grouped["kind"], grouped["apiVersion"]) == (200, "EventList", "events.k8s.io/v1")
    messages = {e["metadata"]["name"]: e["message"] for e in core["items"]}
    assert grouped["items"]
    for item in grouped["items"]:
        assert item["regarding"]["name"] == "web"
        assert item["note"] == messages[item["metadata"]["name"]]
    name = grouped["items"][0]["metadata"]["name"]
    _, _, one = await served.request(f"/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    assert one["note"] == messages[name]
    assert one["metadata"]["resourceVersion"].isdigit()


async def test_the_events_group_refuses_the_core_groups_field_names(served: Served) -> None:
    code, _, body = await served.request(
        "/apis/events.k8s.io/v1/events?fieldSelector=involvedObject.name%3Dweb"
    )
    assert (code, body["message"]) == (400, "field label not supported: involvedObject.name")


async def test_a_missing_slice_is_worded_with_its_group(served: Served) -> None:
    code, _, body = await served.request(
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/api-x"
    )
    assert (code, body["message"]) == (404, 'endpointslices.discovery.k8s.io "api-x" not found')
    code, _, listed = await served.request("/apis/discovery.k8s.io/v1/endpointslices")
    assert (code, listed["kind"], listed["items"]) == (200, "EndpointSliceList", [])


async def test_an_endpoints_watch_of_a_node_without_services_ends_at_its_timeout(
    served: Served,
) -> None:
    found = await watch_lines(served, "/api/v1/endpoints?watch=1&timeoutSeconds=1", 1)
    assert found == []


# -- pods/status and nodes/status -----------------------------------------------------------


async def test_a_pods_status_subresource_is_the_pod(served: Served) -> None:
    await served.node.apply([pod("web")])
    code, _, body = await served.request("/api/v1/namespaces/default/pods/web/status")
    assert (code, body["kind"], body["metadata"]["name"]) == (200, "Pod", "web")
    code, _, body = await served.request("/api/v1/namespaces/default/pods/nope/status")
    assert (code, body["message"]) == (404, 'pods "nope" not found')


async def test_the_nodes_status_subresource_is_the_node(served: Served) -> None:
    code, _, body = await served.request("/api/v1/nodes/n1/status")
    assert (code, body["kind"]) == (200, "Node"), body
    assert body["metadata"]["name"] == "n1"
    assert body["status"]["conditions"]
    code, _, body = await served.request("/api/v1/nodes/other/status")
    assert (code, body["message"]) == (404, 'nodes "other" not found')


# -- TokenRequest ----------------------------------------------------------------------------


def _public_key(issuer: TokenIssuer) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(issuer.public_key_path.read_bytes())


def test_an_unbound_token_verifies_and_names_no_pod(tmp_path: Any) -> None:
    issuer = TokenIssuer(directory=tmp_path / "sa", node_name="n1")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    wanted = TokenRequest("default", "builder", "", "", ("vault",), 600)
    token = issuer.issue(wanted, now=now)
    claims = jwt.decode(
        token.value,
        _public_key(issuer),
        algorithms=["RS256"],
        audience="vault",
        options={"verify_exp": False, "verify_nbf": False, "verify_iat": False},
    )
    assert claims["sub"] == "system:serviceaccount:default:builder"
    assert claims["exp"] - claims["iat"] == 600
    assert claims["nbf"] == claims["iat"]
    assert set(claims["kubernetes.io"]) == {"namespace", "serviceaccount"}
    assert (tmp_path / "sa" / "signing-key.pem").stat().st_mode & 0o777 == 0o600
    assert token.expires_at - token.issued_at == timedelta(seconds=600)


def test_a_tampered_token_is_rejected(tmp_path: Any) -> None:
    issuer = TokenIssuer(directory=tmp_path / "sa", node_name="n1")
    token = issuer.issue(
        TokenRequest("default", "builder", "", "", (), 3600), now=datetime.now(UTC)
    )
    head, body, signature = token.value.split(".")
    claims = json.loads(jwt.utils.base64url_decode(body))
    claims["sub"] = "system:serviceaccount:kube-system:admin"
    forged = jwt.utils.base64url_encode(json.dumps(claims).encode()).decode()
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(
            f"{head}.{forged}.{signature}",
            _public_key(issuer),
            algorithms=["RS256"],
            options={"verify_aud": False},
        )


async def _token(served: Served, name: str, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{served.api.url}/api/v1/namespaces/default/serviceaccounts/{name}/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            ssl=served.admin(),
        ) as response,
    ):
        return response.status, json.loads(await response.text())


ACCOUNT = {
    "apiVersion": "v1",
    "kind": "ServiceAccount",
    "metadata": {"name": "builder", "namespace": "default"},
}


async def test_a_token_request_returns_a_token_bound_to_the_pod(served: Served) -> None:
    web = pod("web")
    assert web.spec is not None
    web.spec.serviceAccountName = "builder"
    served.node.objects.put_object(ACCOUNT, source="test")
    await served.node.apply([web])
    bound = {"kind": "Pod", "apiVersion": "v1", "name": "web"}
    code, body = await _token(served, "builder", {"audiences": ["api"], "boundObjectRef": bound})
    assert (code, body["kind"], body["spec"]["expirationSeconds"]) == (201, "TokenRequest", 3600)
    assert body["metadata"] == {
        "name": "builder",
        "namespace": "default",
        "creationTimestamp": None,
    }
    volumes = served.node.runtime.volumes
    issuer = TokenIssuer(directory=served.state / "serviceaccount", node_name="n1")
    if volumes is not None:
        issuer = volumes.tokens  # type: ignore[attr-defined]
    claims = jwt.decode(
        body["status"]["token"], _public_key(issuer), algorithms=["RS256"], audience="api"
    )
    record = served.node.status.find("default", "web")
    assert record is not None
    assert claims["kubernetes.io"]["pod"] == {"name": "web", "uid": record.uid}
    assert claims["kubernetes.io"]["node"]["name"] == "n1"
    expires = datetime.fromisoformat(body["status"]["expirationTimestamp"])
    assert int(expires.timestamp()) == claims["exp"]


async def test_a_token_request_is_refused_as_the_api_server_refuses_it(served: Served) -> None:
    code, body = await _token(served, "ghost", {})
    assert (code, body["message"]) == (404, 'serviceaccounts "ghost" not found')
    served.node.objects.put_object(ACCOUNT, source="test")
    code, body = await _token(served, "builder", {"expirationSeconds": 599})
    assert (code, body["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "builder" is invalid: spec.expirationSeconds: '
        "Invalid value: 599: may not specify a duration less than 10 minutes",
    )
    code, body = await _token(
        served, "builder", {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "x"}}
    )
    assert (code, body["message"]) == (404, 'pods "x" not found')
    code, body = await _token(
        served, "builder", {"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1"}}
    )
    assert (code, body["message"]) == (
        400,
        "cannot bind token to object of type v1, Kind=ConfigMap",
    )


# -- protobuf TokenRequests ------------------------------------------------------------------


def _wire(number: int, value: int | bytes) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out

    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def test_a_protobuf_token_request_reads_as_its_json_form() -> None:
    bound = _wire(1, b"Pod") + _wire(2, b"v1") + _wire(3, b"web") + _wire(4, b"u1")
    spec = _wire(1, b"vault") + _wire(1, b"api") + _wire(3, bound) + _wire(4, 900)
    message = _wire(1, b"") + _wire(2, spec)
    envelope = _wire(1, _wire(1, b"authentication.k8s.io/v1") + _wire(2, b"TokenRequest"))
    body = protowire.MAGIC + envelope + _wire(2, message)
    version, kind, raw = protowire.unwrap(body)
    assert (version, kind) == ("authentication.k8s.io/v1", "TokenRequest")
    assert protowire.token_request(raw)["spec"] == {
        "audiences": ["vault", "api"],
        "expirationSeconds": 900,
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "u1"},
    }


@pytest.mark.parametrize(
    "body", [b"k8s\x00\x0a\xff", b"k8s\x00\x80", b"{}", b"k8s\x00\x0d\x00\x00\x00\x00"]
)
def test_a_malformed_protobuf_body_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError, match=r"varint|runs past|wire type|magic"):
        protowire.unwrap(body)


# -- pods/status writes ---------------------------------------------------------------------


async def _send(
    served: Served, method: str, path: str, body: Any, content_type: str
) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            served.api.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": content_type},
            ssl=served.admin(),
        ) as response,
    ):
        return response.status, json.loads(await response.text())


def _condition(served: Served, name: str, kind: str) -> Any:
    record = served.node.status.find("default", name)
    if record is None or record.view.status is None:
        return None
    return next((c for c in record.view.status.conditions or [] if c.type == kind), None)


async def test_a_readiness_gates_condition_written_to_the_status_makes_the_pod_ready(
    served: Served,
) -> None:
    gated = pod("gated")
    assert gated.spec is not None
    gated.spec.readinessGates = [PodReadinessGate(conditionType="example.com/lb")]
    await served.node.apply([gated])
    with anyio.fail_after(20):
        while (found := _condition(served, "gated", "Ready")) is None or (
            found.reason != "ReadinessGatesNotReady"
        ):
            await served.node.status.changed()
    path = "/api/v1/namespaces/default/pods/gated/status"
    patch = {"status": {"conditions": [{"type": "example.com/lb", "status": "True"}]}}
    code, body = await _send(served, "PATCH", path, patch, "application/strategic-merge-patch+json")
    assert code == 200
    assert {"type": "example.com/lb", "status": "True"}.items() <= body["status"]["conditions"][
        -1
    ].items()
    with anyio.fail_after(20):
        while (found := _condition(served, "gated", "Ready")) is None or found.status != "True":
            await served.node.status.changed()
    assert _condition(served, "gated", "example.com/lb").status == "True"


async def test_a_status_write_is_checked_as_the_api_server_checks_it(served: Served) -> None:
    await served.node.apply([pod("web")])
    path = "/api/v1/namespaces/default/pods/web/status"
    bad = {"status": {"conditions": [{"type": "example.com/lb", "status": "Maybe"}]}}
    code, body = await _send(served, "PATCH", path, bad, "application/merge-patch+json")
    assert (code, body["message"]) == (
        422,
        'Pod "web" is invalid: status.conditions[0].status: Unsupported value: "Maybe": '
        'supported values: "False", "True", "Unknown"',
    )
    stale = {"kind": "Pod", "metadata": {"name": "web", "resourceVersion": "1"}, "status": {}}
    code, body = await _send(served, "PUT", path, stale, "application/json")
    assert (code, body["reason"]) == (409, "Conflict")
    code, body = await _send(
        served,
        "PATCH",
        "/api/v1/namespaces/default/pods/nope/status",
        {},
        "application/merge-patch+json",
    )
    assert (code, body["message"]) == (404, 'pods "nope" not found')


@pytest.mark.parametrize(
    ("patch", "content_type", "code", "reason"),
    [
        ({}, "text/plain", 415, "UnsupportedMediaType"),
        ([{"op": "remove", "path": "/nope"}], "application/json-patch+json", 422, "BadRequest"),
        ([1], "application/strategic-merge-patch+json", 400, "BadRequest"),
    ],
)
async def test_a_status_patch_of_an_unknown_type_or_that_does_not_apply_is_refused(
    served: Served, patch: Any, content_type: str, code: int, reason: str
) -> None:
    await served.node.apply([pod("web")])
    path = "/api/v1/namespaces/default/pods/web/status"
    found, body = await _send(served, "PATCH", path, patch, content_type)
    assert (found, body["reason"]) == (code, reason)
