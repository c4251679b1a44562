"""The API machinery of the node's Kubernetes API over real TLS on a node over a fake
engine: optimistic concurrency for every kind, server-side apply's field ownership and
foreground deletion."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_helpers import IMAGES
from kube_helpers import Served, served_node, watch_lines
from polling import until
from test_kube_write import CONFIGMAPS, DEPLOYMENTS, call, configmap, deployment

from asynckubelet.api.kube.server import serve_kube_api
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

SERVICES = "/api/v1/namespaces/default/services"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Served]:
    async with served_node(tmp_path) as found:
        yield found


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "protocol": "TCP"}]},
    }


def _changed(body: dict[str, Any], plural: str) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed["metadata"].setdefault("labels", {})["touched"] = plural
    return changed


@pytest.mark.parametrize(
    ("path", "plural", "body"),
    [
        (CONFIGMAPS, "configmaps", configmap("x", a="1")),
        (DEPLOYMENTS, "deployments.apps", deployment("x")),
        (SERVICES, "services", service("x")),
    ],
)
async def test_a_stale_resource_version_is_a_conflict_for_every_kind(
    api: Served, path: str, plural: str, body: dict[str, Any]
) -> None:
    code, created, _ = await call(api, "POST", path, body)
    assert code == 201, created
    stale = created["metadata"]["resourceVersion"]
    code, updated, _ = await call(api, "PUT", f"{path}/x", _changed(created, "first"))
    assert code == 200, updated
    assert int(updated["metadata"]["resourceVersion"]) > int(stale)

    code, refused, _ = await call(api, "PUT", f"{path}/x", _changed(created, "second"))

    assert code == 409
    assert refused["reason"] == "Conflict"
    assert refused["message"] == (
        f'Operation cannot be fulfilled on {plural} "x": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    code, again, _ = await call(api, "PUT", f"{path}/x", _changed(updated, "second"))
    assert code == 200, again
    assert again["metadata"]["labels"]["touched"] == "second"


async def test_a_read_answers_the_resource_version_an_update_checks(api: Served) -> None:
    await call(api, "POST", CONFIGMAPS, configmap("x", a="1"))
    code, read, _ = await call(api, "GET", f"{CONFIGMAPS}/x")
    assert code == 200
    code, listed, _ = await call(api, "GET", CONFIGMAPS)
    assert read["metadata"]["resourceVersion"] == listed["items"][0]["metadata"]["resourceVersion"]
    read["data"] = {"a": "2"}
    code, _, _ = await call(api, "PUT", f"{CONFIGMAPS}/x", read)
    assert code == 200
    code, refused, _ = await call(api, "PUT", f"{CONFIGMAPS}/x", read)
    assert code == 409, refused


async def test_an_apply_conflicting_with_a_scale_is_409_until_forced(api: Served) -> None:
    apply_type = "application/apply-patch+yaml"
    path = f"{DEPLOYMENTS}/x?fieldManager=kubectl"
    code, body, _ = await call(api, "PATCH", path, deployment("x"), content_type=apply_type)
    assert code == 201, body
    scale = {"spec": {"replicas": 3}}
    code, body, _ = await call(
        api,
        "PATCH",
        f"{DEPLOYMENTS}/x/scale",
        scale,
        content_type="application/merge-patch+json",
    )
    assert code == 200, body

    code, refused, _ = await call(api, "PATCH", path, deployment("x"), content_type=apply_type)

    assert code == 409
    assert refused["reason"] == "Conflict"
    assert refused["message"] == (
        'Apply failed with 1 conflict: conflict with "Python" with subresource "scale" using '
        "apps/v1: .spec.replicas"
    )
    assert refused["details"]["causes"] == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "Python" with subresource "scale" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    code, forced, _ = await call(
        api, "PATCH", path + "&force=true", deployment("x"), content_type=apply_type
    )
    assert code == 200
    assert forced["spec"]["replicas"] == 1
    assert [e["manager"] for e in forced["metadata"]["managedFields"]] == ["kubectl"]


async def test_field_manager_and_force_are_validated_as_the_api_server_does(api: Served) -> None:
    long = "m" * 129
    code, body, _ = await call(api, "POST", f"{CONFIGMAPS}?fieldManager={long}", configmap("x"))
    assert code == 422
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
        "than 128 bytes"
    )
    code, body, _ = await call(api, "POST", f"{CONFIGMAPS}?fieldManager=a%07b", configmap("x"))
    assert code == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "a\\ab": invalid character U+0007 (at position 1)',
            "field": "fieldManager",
        }
    ]
    code, _, _ = await call(api, "POST", CONFIGMAPS, configmap("x"))
    assert code == 201
    code, body, _ = await call(
        api,
        "PATCH",
        f"{CONFIGMAPS}/x?force=true",
        {"data": {"a": "1"}},
        content_type="application/merge-patch+json",
    )
    assert code == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for '
        "non-apply patch"
    )


async def test_an_apply_that_changes_only_the_owners_is_kept(api: Served) -> None:
    apply_type = "application/apply-patch+yaml"
    body = configmap("x", a="1")
    for manager in ("first", "second"):
        path = f"{CONFIGMAPS}/x?fieldManager={manager}"
        code, answer, _ = await call(api, "PATCH", path, body, content_type=apply_type)
        assert code in (200, 201), answer

    code, read, _ = await call(api, "GET", f"{CONFIGMAPS}/x")

    assert [e["manager"] for e in read["metadata"]["managedFields"]] == ["first", "second"]
    assert all(e["fieldsV1"] == {"f:data": {"f:a": {}}} for e in read["metadata"]["managedFields"])


async def test_a_foreground_delete_is_seen_modified_then_deleted(api: Served) -> None:
    code, created, _ = await call(api, "POST", DEPLOYMENTS, deployment("x"))
    assert code == 201
    version = created["metadata"]["resourceVersion"]

    code, answer, _ = await call(api, "DELETE", f"{DEPLOYMENTS}/x?propagationPolicy=Foreground")

    assert code == 200
    assert answer["kind"] == "Deployment"
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    path = f"{DEPLOYMENTS}?watch=1&resourceVersion={version}"
    events = await watch_lines(api, path, 2)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert all(e["object"]["metadata"]["deletionTimestamp"] for e in events)
    code, _, _ = await call(api, "GET", f"{DEPLOYMENTS}/x")
    assert code == 404


def owned_by(body: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    reference = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "controller": True}
    body["metadata"]["ownerReferences"] = [{**reference, "name": meta["name"], "uid": meta["uid"]}]
    return body


async def test_a_foreground_delete_waits_for_a_rollouts_old_pods_still_stopping(
    api: Served,
) -> None:
    node, docker = api.node, api.node.runtime.docker
    assert isinstance(docker, FakeDocker)
    code, owner, _ = await call(api, "POST", DEPLOYMENTS, deployment("x"))
    assert code == 201, owner
    rs = owned_by(deployment("x-1"), owner)
    rs["kind"] = "ReplicaSet"
    code, rs, _ = await call(api, "POST", "/apis/apps/v1/namespaces/default/replicasets", rs)
    assert code == 201, rs
    old = owned_by(deployment("x-1-old")["spec"]["template"], rs)
    old = {"apiVersion": "v1", "kind": "Pod", **old}
    old["metadata"]["name"] = "x-1-old"
    code, made, _ = await call(api, "POST", "/api/v1/namespaces/default/pods", old)
    assert code == 201, made
    await node.wait("default", "x-1-old", "Running", timeout=10)
    (app,) = [c for c in docker.containers.values() if c.labels.get(naming.LABEL_CONTAINER_NAME)]
    app.ignores_stop_signal = True
    path = "/api/v1/namespaces/default/pods/x-1-old?gracePeriodSeconds=3600"
    code, _, _ = await call(api, "DELETE", path)
    assert code == 200
    assert node.objects.get("Pod", "default", "x-1-old") is None

    code, _, _ = await call(api, "DELETE", f"{DEPLOYMENTS}/x?propagationPolicy=Foreground")

    assert code == 200
    await anyio.sleep(0.5)
    assert node.objects.get("Deployment", "default", "x") is not None
    docker.exit(app.id, exit_code=0)
    await until(lambda: node.objects.get("Deployment", "default", "x") is None, interval=0.05)
    assert node.status.find("default", "x-1-old") is None


async def test_an_orphan_delete_leaves_dependents_without_the_reference(api: Served) -> None:
    code, owner, _ = await call(api, "POST", DEPLOYMENTS, deployment("x"))
    reference = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "x",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    body = deployment("x-1")
    body["kind"] = "ReplicaSet"
    body["metadata"]["ownerReferences"] = [reference]
    code, made, _ = await call(api, "POST", "/apis/apps/v1/namespaces/default/replicasets", body)
    assert code == 201, made

    code, _, _ = await call(api, "DELETE", f"{DEPLOYMENTS}/x?propagationPolicy=Orphan")

    assert code == 200
    code, left, _ = await call(api, "GET", "/apis/apps/v1/namespaces/default/replicasets/x-1")
    assert code == 200
    assert "ownerReferences" not in left["metadata"]


async def test_an_apply_of_only_metadata_leaves_the_spec_to_its_owner(api: Served) -> None:
    apply_type = "application/apply-patch+yaml"
    path = f"{DEPLOYMENTS}/x?fieldManager=kubectl"
    code, _, _ = await call(api, "PATCH", path, deployment("x"), content_type=apply_type)
    assert code == 201
    labels = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": {"a": "b"}}}

    code, body, _ = await call(
        api, "PATCH", f"{DEPLOYMENTS}/x?fieldManager=labeller", labels, content_type=apply_type
    )

    assert code == 200, body
    assert body["metadata"]["labels"] == {"a": "b"}
    assert body["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    owners = {e["manager"]: e["fieldsV1"] for e in body["metadata"]["managedFields"]}
    assert owners["labeller"] == {"f:metadata": {"f:labels": {"f:a": {}}}}


async def test_a_foreground_delete_left_by_a_stopped_node_is_finished_at_start(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    config = KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600)
    node = Kubelet(config, docker=FakeDocker(images=IMAGES))
    body = deployment("x")
    body["metadata"].update(
        namespace="default",
        deletionTimestamp="2026-01-01T00:00:00Z",
        finalizers=["foregroundDeletion"],
    )
    async with node, anyio.create_task_group() as tg:
        node.objects.put_object(body, source=API_SOURCE)
        gone = anyio.Event()

        def seen(key: tuple[str, str, str]) -> None:
            if node.objects.get("Deployment", "default", "x") is None:
                gone.set()

        stop = node.objects.observe(seen)
        await tg.start(
            lambda task_status: serve_kube_api(
                node, state_dir=state, host="127.0.0.1", port=0, task_status=task_status
            )
        )
        with anyio.fail_after(30):
            await gone.wait()
        stop()
        tg.cancel_scope.cancel()
