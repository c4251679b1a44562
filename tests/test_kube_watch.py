"""The API machinery of every kind: one resourceVersion sequence across kinds, watches of
the stored kinds with selectors and bookmarks, 410 for versions older than the window,
lists in chunks with ``limit``/``continue``, and ``resourceVersionMatch``."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anyio
import pytest
from kube_helpers import Served, pod, served, watch_lines
from lightkube.models.core_v1 import PodStatus

from asynckubelet.api.kube import history, openapi, openapi_proto, paging, watches
from asynckubelet.api.kube.history import PodHistory, Versions
from asynckubelet.api.kube.watchcache import ObjectHistory
from asynckubelet.node.objects import ObjectStore
from asynckubelet.node.status_manager import StatusManager

__all__ = ["served"]
"""The fixtures this module takes from its helpers."""


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": {"k": name},
    }


def test_pods_and_stored_objects_take_their_versions_from_one_sequence() -> None:
    status, store = StatusManager(), ObjectStore()
    versions = Versions(status.version)
    pods = PodHistory(status, versions=versions)
    objects = ObjectHistory(versions)
    objects.follow_store(store)
    status.set(pod("web"), PodStatus(phase="Pending"))
    store.put_object(configmap("settings"), source="test")
    status.set(pod("web"), PodStatus(phase="Running"))
    assert objects.version_of("ConfigMap", ("default", "settings")) == 3
    [web] = status.list()
    assert pods.version_of(web.uid) == pods.version == versions.value == 4
    with objects.watch("ConfigMap", "2") as watch:
        assert [(c.type, c.key, c.version) for c in watch.initial] == [
            ("ADDED", ("default", "settings"), 3)
        ]


def test_an_object_changed_to_the_same_body_is_no_new_version() -> None:
    store = ObjectStore()
    objects = ObjectHistory(Versions())
    objects.follow_store(store)
    store.put_object(configmap("settings"), source="test")
    before = objects.versions.value
    objects.record("ConfigMap", ("default", "settings"), store.list("ConfigMap")[0].body)
    assert objects.versions.value == before


def test_a_stored_kinds_version_older_than_its_window_is_expired() -> None:
    store = ObjectStore()
    objects = ObjectHistory(Versions(), window=2)
    objects.follow_store(store)
    for round_ in range(4):
        store.put_object({**configmap("c"), "data": {"k": str(round_)}}, source="test")
    too_old = pytest.raises(history.Expired, match=r"too old resource version: 2 \(4\)")
    with too_old, objects.watch("ConfigMap", "2"):
        pass
    with objects.watch("ConfigMap", "3") as watch:
        assert [c.version for c in watch.initial] == [4, 5]


@pytest.mark.parametrize(
    ("change", "was", "now", "sent"),
    [
        ("ADDED", False, True, "ADDED"),
        ("ADDED", False, False, None),
        ("MODIFIED", True, True, "MODIFIED"),
        ("MODIFIED", True, False, "DELETED"),
        ("MODIFIED", False, True, "ADDED"),
        ("MODIFIED", False, False, None),
        ("DELETED", True, False, "DELETED"),
        ("DELETED", False, False, None),
    ],
)
def test_a_selective_watch_is_sent_what_upstreams_watch_cache_sends(
    change: str, was: bool, now: bool, sent: str | None
) -> None:
    assert watches.event_type(change, was=was, now=now) == sent


@pytest.mark.anyio
async def test_a_configmap_watch_from_a_lists_version_sees_a_later_change(
    served: Served,
) -> None:
    served.node.objects.put_object(configmap("old"), source="api")
    _, _, listed = await served.request("/api/v1/namespaces/default/configmaps")
    version = listed["metadata"]["resourceVersion"]
    [item] = listed["items"]
    assert int(item["metadata"]["resourceVersion"]) <= int(version)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            got: list[dict[str, Any]] = []

            async def watch() -> None:
                path = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={version}"
                got.extend(await watch_lines(served, path, 1))

            tg.start_soon(watch)
            await anyio.sleep(0.2)
            served.node.objects.put_object(configmap("new"), source="api")
    [event] = got
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "new")
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(version)


@pytest.mark.anyio
async def test_an_object_leaving_the_label_selector_is_a_deleted_event(served: Served) -> None:
    served.node.objects.put_object(configmap("c", tier="web"), source="api")
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            got: list[dict[str, Any]] = []

            async def watch() -> None:
                path = "/api/v1/configmaps?watch=1&labelSelector=tier%3Dweb"
                got.extend(await watch_lines(served, path, 2))

            tg.start_soon(watch)
            await anyio.sleep(0.2)
            served.node.objects.put_object(configmap("c", tier="db"), source="api")
    assert [(e["type"], e["object"]["metadata"]["labels"]["tier"]) for e in got] == [
        ("ADDED", "web"),
        ("DELETED", "db"),
    ]


@pytest.mark.anyio
async def test_a_secrets_watch_carries_no_values(served: Served) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default"},
        "data": {"password": "c2VjcmV0"},
    }
    served.node.objects.put_object(body, source="api")
    with anyio.fail_after(20):
        [event] = await watch_lines(served, "/api/v1/secrets?watch=1", 1)
    assert event["type"] == "ADDED"
    assert "data" not in event["object"]


@pytest.mark.anyio
async def test_a_quiet_watch_that_allows_bookmarks_gets_one(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watches, "BOOKMARK_SECONDS", 0.05)
    _, _, listed = await served.request("/apis/apps/v1/deployments")
    version = listed["metadata"]["resourceVersion"]
    path = f"/apis/apps/v1/deployments?watch=1&allowWatchBookmarks=true&resourceVersion={version}"
    with anyio.fail_after(20):
        [event] = await watch_lines(served, path, 1)
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "Deployment"
    assert event["object"]["apiVersion"] == "apps/v1"
    assert int(event["object"]["metadata"]["resourceVersion"]) >= int(version)


@pytest.mark.anyio
async def test_the_node_is_watched_with_one_added_event(served: Served) -> None:
    with anyio.fail_after(20):
        [event] = await watch_lines(served, "/api/v1/nodes?watch=1", 1)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "n1")


@pytest.mark.anyio
async def test_a_list_comes_in_chunks_following_its_continue_token(served: Served) -> None:
    await served.node.apply([pod("a"), pod("b"), pod("c")])
    names: list[str] = []
    remaining: list[int] = []
    token = ""
    for _ in range(5):
        path = "/api/v1/namespaces/default/pods?limit=1" + (f"&continue={token}" if token else "")
        code, _, page = await served.request(path)
        assert code == 200
        names.extend(i["metadata"]["name"] for i in page["items"])
        token = page["metadata"].get("continue", "")
        remaining.append(page["metadata"].get("remainingItemCount", 0))
        if not token:
            break
    assert names == ["a", "b", "c"]
    assert remaining == [2, 1, 0]


@pytest.mark.anyio
async def test_a_continue_token_older_than_the_window_is_expired(served: Served) -> None:
    await served.node.apply([pod("a"), pod("b")])
    _, _, first = await served.request("/api/v1/namespaces/default/pods?limit=1")
    ghost = pod("ghost")
    assert ghost.metadata is not None
    ghost.metadata.uid = "uid-ghost"
    for round_ in range(history.WINDOW + 2):
        served.node.status.set(ghost, PodStatus(phase="Pending", message=str(round_)))
    token = first["metadata"]["continue"]
    code, _, body = await served.request(f"/api/v1/namespaces/default/pods?continue={token}")
    assert (code, body["reason"], body["message"]) == (410, "Expired", paging.TOO_OLD_CONTINUE)


@pytest.mark.anyio
async def test_a_continue_token_that_does_not_decode_is_a_bad_request(served: Served) -> None:
    code, _, body = await served.request("/api/v1/configmaps?continue=bm90LWpzb24")
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"].startswith("continue key is not valid: ")


@pytest.mark.anyio
async def test_a_resource_version_match_without_a_version_is_refused(served: Served) -> None:
    code, _, body = await served.request("/api/v1/pods?resourceVersionMatch=NotOlderThan")
    assert (code, body["reason"]) == (400, "BadRequest")
    assert "resourceVersionMatch is forbidden unless resourceVersion is provided" in body["message"]


@pytest.mark.anyio
async def test_an_exact_match_of_an_old_version_is_expired(served: Served) -> None:
    served.node.objects.put_object(configmap("a"), source="api")
    _, _, listed = await served.request("/api/v1/configmaps")
    current = int(listed["metadata"]["resourceVersion"])
    code, _, exact = await served.request(
        f"/api/v1/configmaps?resourceVersion={current}&resourceVersionMatch=Exact"
    )
    assert code == 200
    assert exact["metadata"]["resourceVersion"] == str(current)
    served.node.objects.put_object(configmap("b"), source="api")
    code, _, old = await served.request(
        f"/api/v1/configmaps?resourceVersion={current}&resourceVersionMatch=Exact"
    )
    assert (code, old["reason"]) == (410, "Expired")


def test_the_openapi_v3_documents_name_each_kind_with_its_group_version_kind() -> None:
    index = json.loads(openapi.index())
    assert set(index["paths"]) == {
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/discovery.k8s.io/v1",
        "apis/events.k8s.io/v1",
    }
    assert index["paths"]["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    schemas = json.loads(openapi.document("api/v1") or b"")["components"]["schemas"]
    pod_schema = schemas["io.k8s.api.core.v1.Pod"]
    assert pod_schema["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}
    ]
    image = schemas["io.k8s.api.core.v1.Container"]["properties"]["image"]
    assert image["type"] == "string"
    assert image["description"].startswith("Container image name.")
    assert openapi.document("apis/nope/v1") is None


def test_the_openapi_schema_carries_upstreams_strategic_merge_keys() -> None:
    v2 = json.loads(openapi.swagger())["definitions"]
    containers = v2["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    v3 = json.loads(openapi.document("api/v1") or b"")["components"]["schemas"]
    ports = v3["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["port", "protocol"]
    assert v3["io.k8s.api.core.v1.ServicePort"]["properties"]["targetPort"] == {
        "x-kubernetes-int-or-string": True,
        "description": v3["io.k8s.api.core.v1.ServicePort"]["properties"]["targetPort"][
            "description"
        ],
    }


@pytest.mark.anyio
async def test_the_openapi_documents_are_served_as_json(served: Served) -> None:
    code, kind, index = await served.request("/openapi/v3")
    assert (code, kind) == (200, "application/json")
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    code, _, apps = await served.request(url)
    assert code == 200
    assert "io.k8s.api.apps.v1.Deployment" in apps["components"]["schemas"]
    code, _, swagger = await served.request("/openapi/v2")
    assert (code, swagger["swagger"]) == (200, "2.0")


def test_the_v2_protobuf_is_gnostics_document_wire_format() -> None:
    body = openapi_proto.document(
        {"swagger": "2.0", "info": {"title": "T", "version": "v"}, "definitions": {}}
    )
    assert body == b"\x0a\x032.0" + b"\x12\x06\x0a\x01T\x12\x01v" + b"\x4a\x00"
    one = openapi_proto.schema({"type": "string", "x-kubernetes-patch-merge-key": "name"})
    assert one.startswith(b"\xb2\x01\x08\x0a\x06string")
    assert b'x-kubernetes-patch-merge-key\x12\x08\x12\x06"name"' in one


@pytest.mark.anyio
async def test_the_openapi_v2_is_served_as_protobuf_when_asked(served: Served) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            served.api.url + "/openapi/v2",
            ssl=served.admin(),
            headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
        ) as response,
    ):
        body = await response.read()
    assert response.headers["Content-Type"] == openapi_proto.CONTENT_TYPE
    assert body.startswith(b"\x0a\x032.0")
    assert b"io.k8s.api.core.v1.Pod" in body
