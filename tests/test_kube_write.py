"""Writes of the node's Kubernetes API over real TLS on a node over a fake engine: each
verb through the node's one admission, answered with the API server's objects and words."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kube_helpers import Served, answered, served_node

from asynckubelet.api.kube import patches

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Served]:
    async with served_node(tmp_path) as found:
        yield found


PODS = "/api/v1/namespaces/default/pods"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def call(
    api: Served,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any], list[str]]:
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
    return await answered(api, method, path, data, kind=content_type)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def pod_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]},
    }


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]},
            },
        },
    }


async def test_create_answers_201_then_already_exists(api: Served) -> None:
    code, body, _ = await call(api, "POST", CONFIGMAPS, configmap("c1", a="1"))
    assert code == 201
    assert body["data"] == {"a": "1"}
    assert body["metadata"]["uid"]
    code, body, _ = await call(api, "POST", CONFIGMAPS, configmap("c1", a="2"))
    assert code == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "c1" already exists'
    stored = api.node.objects.get("ConfigMap", "default", "c1")
    assert stored is not None
    assert stored.body["data"] == {"a": "1"}


async def test_create_with_generate_name_and_dry_run(api: Served) -> None:
    made = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    code, body, _ = await call(api, "POST", CONFIGMAPS, made)
    name = body["metadata"]["name"]
    assert code == 201
    assert name.startswith("gen-")
    assert len(name) == len("gen-") + 5
    code, body, _ = await call(api, "POST", CONFIGMAPS + "?dryRun=All", configmap("dry"))
    assert code == 201
    assert body["metadata"]["name"] == "dry"
    assert api.node.objects.get("ConfigMap", "default", "dry") is None


async def test_field_validation_strict_warn_ignore(api: Served) -> None:
    bad = configmap("fv")
    bad["spec"] = {"x": 1}
    code, body, _ = await call(api, "POST", CONFIGMAPS + "?fieldValidation=Strict", bad)
    assert code == 400
    assert body["message"] == 'strict decoding error: unknown field "spec"'
    code, body, warnings = await call(api, "POST", CONFIGMAPS + "?fieldValidation=Warn", bad)
    assert code == 201
    assert "spec" not in body
    assert warnings == ['299 - "unknown field \\"spec\\""']
    bad["metadata"]["name"] = "fv2"
    code, _, warnings = await call(api, "POST", CONFIGMAPS + "?fieldValidation=Ignore", bad)
    assert code == 201
    assert warnings == []


async def test_an_invalid_pod_is_worded_as_the_api_server_words_it(api: Served) -> None:
    bad = pod_body("bad")
    del bad["spec"]["containers"][0]["image"]
    bad["spec"]["containers"].append({"name": "app", "image": "busybox:1.35"})
    code, body, _ = await call(api, "POST", PODS, bad)
    assert code == 422
    assert body["message"] == (
        'Pod "bad" is invalid: [spec.containers[0].image: Required value, '
        'spec.containers[1].name: Duplicate value: "app"]'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value",
            "field": "spec.containers[0].image",
        },
        {
            "reason": "FieldValueDuplicate",
            "message": 'Duplicate value: "app"',
            "field": "spec.containers[1].name",
        },
    ]


async def test_a_secret_written_is_answered_without_its_values(api: Served) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}}
    secret["stringData"] = {"password": "hunter2"}
    code, body, _ = await call(api, "POST", "/api/v1/namespaces/default/secrets", secret)
    assert code == 201
    assert "data" not in body
    assert "hunter2" not in json.dumps(body)
    stored = api.node.objects.get("Secret", "default", "s1")
    assert stored is not None
    assert stored.secret_data() == {"password": b"hunter2"}
    path = "/api/v1/namespaces/default/secrets/s1?dryRun=All"
    code, body, _ = await call(api, "DELETE", path)
    assert code == 200
    assert "data" not in body
    assert api.node.objects.get("Secret", "default", "s1") is not None


async def test_update_and_stale_resource_version(api: Served) -> None:
    code, _made, _ = await call(api, "POST", PODS, pod_body("u1"))
    assert code == 201
    changed = pod_body("u1")
    changed["metadata"]["labels"]["tier"] = "web"
    changed["metadata"]["resourceVersion"] = "999999"
    code, body, _ = await call(api, "PUT", PODS + "/u1", changed)
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "u1": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    code, body, _ = await call(api, "PUT", PODS + "/missing", pod_body("missing"))
    assert code == 404
    assert body["message"] == 'pods "missing" not found'
    code, body, _ = await call(api, "GET", PODS + "/u1")
    changed["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
    code, body, _ = await call(api, "PUT", PODS + "/u1", changed)
    assert code == 200
    assert body["metadata"]["labels"]["tier"] == "web"


async def test_pod_spec_is_immutable_on_update(api: Served) -> None:
    await call(api, "POST", PODS, pod_body("imm"))
    changed = pod_body("imm")
    changed["spec"]["containers"][0]["command"] = ["sleep", "1"]
    code, body, _ = await call(api, "PUT", PODS + "/imm", changed)
    assert code == 422
    assert body["reason"] == "Invalid"
    assert body["message"].startswith(
        'Pod "imm" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,"
    )
    image = pod_body("imm")
    image["spec"]["containers"][0]["image"] = "busybox:1.36"
    code, body, _ = await call(api, "PUT", PODS + "/imm", image)
    assert code == 200


async def test_patch_in_each_type(api: Served) -> None:
    await call(api, "POST", CONFIGMAPS, configmap("p1", a="1", b="2"))
    path = CONFIGMAPS + "/p1"
    ops = [{"op": "replace", "path": "/data/a", "value": "x"}, {"op": "remove", "path": "/data/b"}]
    code, body, _ = await call(api, "PATCH", path, ops, content_type=patches.JSON_PATCH)
    assert code == 200
    assert body["data"] == {"a": "x"}
    merge = {"data": {"c": "3", "a": None}, "metadata": {"labels": {"l": "v"}}}
    code, body, _ = await call(api, "PATCH", path, merge, content_type=patches.MERGE_PATCH)
    assert code == 200
    assert body["data"] == {"c": "3"}
    assert body["metadata"]["labels"] == {"l": "v"}
    strategic = {"metadata": {"annotations": {"k": "v"}}}
    code, body, _ = await call(api, "PATCH", path, strategic, content_type=patches.STRATEGIC_PATCH)
    assert code == 200
    assert body["metadata"]["annotations"]["k"] == "v"
    code, body, _ = await call(api, "PATCH", path, {}, content_type="text/plain")
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"


async def test_server_side_apply_creates_and_records_its_manager(api: Served) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: '1'\n"
    path = CONFIGMAPS + "/ssa"
    code, body, _ = await call(api, "PATCH", path, text, content_type=patches.APPLY_PATCH)
    assert code == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
        "for apply patch"
    )
    url = path + "?fieldManager=me&force=true"
    code, body, _ = await call(api, "PATCH", url, text, content_type=patches.APPLY_PATCH)
    assert code == 201
    assert body["data"] == {"a": "1"}
    assert body["metadata"]["managedFields"][0]["manager"] == "me"
    code, body, _ = await call(
        api, "PATCH", url, text.replace("'1'", "'2'"), content_type=patches.APPLY_PATCH
    )
    assert code == 200
    assert body["data"] == {"a": "2"}
    code, body, _ = await call(api, "GET", path)
    assert [m["manager"] for m in body["metadata"]["managedFields"]] == ["me"]


async def test_delete_one_and_collection(api: Served) -> None:
    await call(api, "POST", CONFIGMAPS, configmap("d1"))
    code, body, _ = await call(api, "DELETE", CONFIGMAPS + "/d1", {"gracePeriodSeconds": 0})
    assert code == 200
    assert body["status"] == "Success"
    assert body["details"]["name"] == "d1"
    code, body, _ = await call(api, "DELETE", CONFIGMAPS + "/d1")
    assert code == 404
    assert body["message"] == 'configmaps "d1" not found'
    for name in ("k1", "k2"):
        made = configmap(name)
        made["metadata"]["labels"] = {"set": "k"}
        await call(api, "POST", CONFIGMAPS, made)
    await call(api, "POST", CONFIGMAPS, configmap("k3"))
    code, body, _ = await call(api, "DELETE", CONFIGMAPS + "?labelSelector=set%3Dk")
    assert code == 200
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["k1", "k2"]
    assert api.node.objects.get("ConfigMap", "default", "k3") is not None
    bad = {"propagationPolicy": "Sideways"}
    code, body, _ = await call(api, "DELETE", CONFIGMAPS + "/k3", bad)
    assert code == 400
    assert 'propagationPolicy: Unsupported value: "Sideways"' in body["message"]


async def test_delete_orphan_keeps_the_dependents(api: Served) -> None:
    code, _, _ = await call(api, "POST", DEPLOYMENTS, deployment("orph"))
    assert code == 201
    code, body, _ = await call(
        api, "DELETE", DEPLOYMENTS + "/orph", {"propagationPolicy": "Orphan"}
    )
    assert code == 200
    assert body["status"] == "Success"
    assert api.node.objects.get("Deployment", "default", "orph") is None


async def test_a_status_sent_is_ignored(api: Served) -> None:
    made = deployment("st")
    made["status"] = {"replicas": 99}
    code, _, _ = await call(api, "POST", DEPLOYMENTS, made)
    assert code == 201
    stored = api.node.objects.get("Deployment", "default", "st")
    assert stored is not None
    assert (stored.body.get("status") or {}).get("replicas") != 99


async def test_scale_subresource(api: Served) -> None:
    await call(api, "POST", DEPLOYMENTS, deployment("sc"))
    code, body, _ = await call(api, "GET", DEPLOYMENTS + "/sc/scale")
    assert code == 200
    assert body["kind"] == "Scale"
    assert body["spec"]["replicas"] == 1
    assert body["status"]["selector"] == "app=sc"
    patch = {"spec": {"replicas": 2}}
    code, body, _ = await call(
        api, "PATCH", DEPLOYMENTS + "/sc/scale", patch, content_type=patches.MERGE_PATCH
    )
    assert code == 200
    assert body["spec"]["replicas"] == 2
    stored = api.node.objects.get("Deployment", "default", "sc")
    assert stored is not None
    assert stored.body["spec"]["replicas"] == 2
    code, body, _ = await call(api, "PUT", DEPLOYMENTS + "/sc/scale", {"spec": {"replicas": -1}})
    assert code == 422
    assert "spec.replicas: Invalid value: -1" in body["message"]


def test_strategic_merge_by_key_and_directives() -> None:
    original = {
        "spec": {
            "containers": [
                {"name": "a", "image": "one", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "two"},
            ],
            "volumes": [{"name": "v", "emptyDir": {}}],
        }
    }
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "b", "$patch": "delete"},
            ],
            "volumes": [{"name": "w", "emptyDir": {}}, {"$patch": "replace"}],
        }
    }
    got = patches.strategic_merge_patch(original, patch)
    assert got["spec"]["containers"] == [
        {
            "name": "a",
            "image": "one",
            "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
        }
    ]
    assert got["spec"]["volumes"] == [{"name": "w", "emptyDir": {}}]
    retained = patches.strategic_merge_patch(
        {"s": {"a": 1, "b": 2}}, {"s": {"$retainKeys": ["a", "c"], "c": 3}}
    )
    assert retained == {"s": {"a": 1, "c": 3}}
    replaced = patches.strategic_merge_patch({"m": {"a": 1}}, {"m": {"$patch": "replace", "b": 2}})
    assert replaced == {"m": {"b": 2}}
    with pytest.raises(ValueError, match="does not contain declared merge key: name"):
        patches.strategic_merge_patch({}, {"containers": [{"image": "x"}]})


def test_json_patch_errors_as_upstream() -> None:
    assert patches.json_patch({"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}]) == {
        "a": [1, 2]
    }
    with pytest.raises(ValueError, match="test failed"):
        patches.json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    with pytest.raises(ValueError, match="missing path"):
        patches.json_patch({}, [{"op": "replace", "path": "/a/b", "value": 2}])
    doubling = [{"op": "copy", "from": "/a", "path": f"/a/{i}"} for i in range(64)]
    with pytest.raises(ValueError, match="Unable to copy, would exceed limit"):
        patches.json_patch({"a": {"x": "y" * 100}}, doubling)


async def test_a_watch_list_ends_its_initial_events_with_a_bookmark(api: Served) -> None:
    await call(api, "POST", PODS, pod_body("wl"))
    query = "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    async with (
        aiohttp.ClientSession() as session,
        session.get(api.api.url + PODS + query, ssl=api.admin()) as response,
    ):
        events = [json.loads(line) async for line in response.content if line.strip()]
    kinds = [e["type"] for e in events]
    assert kinds[: kinds.index("BOOKMARK") + 1] == ["ADDED", "BOOKMARK"]
    assert events[0]["object"]["metadata"]["name"] == "wl"
    bookmark = events[1]["object"]["metadata"]
    assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["resourceVersion"].isdigit()


async def test_a_hostile_body_is_a_bad_request(api: Served) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    code, body, _ = await call(api, "POST", CONFIGMAPS, deep)
    assert code == 400
    assert body["reason"] == "BadRequest"
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    code, body, _ = await call(
        api,
        "PATCH",
        CONFIGMAPS + "/x?fieldManager=me",
        laughs,
        content_type=patches.APPLY_PATCH,
    )
    assert code == 400
    assert body["message"].startswith("the body of the request was in an unknown format")
