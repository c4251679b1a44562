"""ControllerRevisions kept by the node's controllers over a fake engine: a DaemonSet's and
a StatefulSet's templates stored as revisions their pods carry the hash of, the
StatefulSet's status naming them, the revisions removed with their owner; and the kind as
the API server takes it (validation, an unchangeable ``data``, read back after a
restart)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer
from apply_helpers import post_apply
from controller_helpers import controllers_node
from daemon_helpers import IMAGES
from polling import until

from asynckubelet.api.localapi import create_local_app
from asynckubelet.errors import ManifestError
from asynckubelet.manifests import inspect_manifests_text, load_manifests_text
from asynckubelet.manifests.revisions import validate_controllerrevision_update
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore, manifest_bodies
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads import WORKLOADS_SOURCE, Controllers

pytestmark = pytest.mark.anyio

WORKLOAD = """\
apiVersion: apps/v1
kind: KIND
metadata: {name: w}
spec:
  selector: {matchLabels: {app: w}}
  serviceName: w
  template:
    metadata: {labels: {app: w}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: IMAGE}]
"""
REVISION = """\
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: w-1}
revision: NUMBER
data: DATA
"""

Client = TestClient[Any, Any]


def workload(kind: str, image: str = "busybox:1.35") -> str:
    text = WORKLOAD.replace("KIND", kind).replace("IMAGE", image)
    return text if kind == "StatefulSet" else text.replace("  serviceName: w\n", "")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet]]:
    async with controllers_node(tmp_path) as (client, node, _docker):
        yield client, node


def revisions(node: Kubelet) -> list[dict[str, Any]]:
    found = [dict(o.body) for o in node.objects.list("ControllerRevision", "default")]
    return sorted(found, key=lambda r: int(r["revision"]))


def pod_hashes(node: Kubelet) -> set[str]:
    return {
        str((p.metadata.labels or {}).get("controller-revision-hash"))
        for p in node.list()
        if p.metadata is not None
        and p.metadata.deletionTimestamp is None
        and p.status is not None
        and p.status.phase == "Running"
    }


async def test_a_daemonset_s_templates_are_kept_as_revisions_its_pods_carry_the_hash_of(
    cluster: tuple[Client, Kubelet],
) -> None:
    client, node = cluster
    assert (await post_apply(client, workload("DaemonSet")))[0] == 201
    await until(lambda: len(revisions(node)) == 1 and len(pod_hashes(node)) == 1)
    first = revisions(node)[0]
    assert pod_hashes(node) == {first["metadata"]["labels"]["controller-revision-hash"]}
    assert (await post_apply(client, workload("DaemonSet", "busybox:2")))[0] == 201
    await until(lambda: len(revisions(node)) == 2)
    second = revisions(node)[1]
    assert second["revision"] == 2
    wanted = second["metadata"]["labels"]["controller-revision-hash"]
    await until(lambda: pod_hashes(node) == {wanted})
    status = dict(node.objects.get("DaemonSet", "default", "w").body["status"])  # type: ignore[union-attr]
    assert "currentRevision" not in status
    assert "collisionCount" not in status


async def test_a_statefulset_s_status_names_its_current_and_update_revisions(
    cluster: tuple[Client, Kubelet],
) -> None:
    client, node = cluster
    assert (await post_apply(client, workload("StatefulSet")))[0] == 201
    await until(lambda: len(revisions(node)) == 1 and len(pod_hashes(node)) == 1)
    name = revisions(node)[0]["metadata"]["name"]
    assert pod_hashes(node) == {name}

    def status() -> dict[str, Any]:
        found = node.objects.get("StatefulSet", "default", "w")
        return dict((found.body if found is not None else {}).get("status") or {})

    await until(lambda: status().get("updateRevision") == name)
    assert (status()["currentRevision"], status()["collisionCount"]) == (name, 0)


async def test_deleting_the_owner_deletes_its_revisions(
    cluster: tuple[Client, Kubelet],
) -> None:
    client, node = cluster
    assert (await post_apply(client, workload("DaemonSet")))[0] == 201
    await until(lambda: len(revisions(node)) == 1)
    node.objects.remove("DaemonSet", "default", "w")
    await until(lambda: revisions(node) == [])


async def test_a_restarted_node_takes_its_revisions_back(tmp_path: Path) -> None:
    state = tmp_path / "state"

    def node() -> Kubelet:
        config = KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600)
        objects = ObjectStore(
            directory=state / OBJECTS_DIR,
            persistent_source=API_SOURCE,
            also_persistent=(WORKLOADS_SOURCE,),
        )
        return Kubelet(config, docker=FakeDocker(images=IMAGES), objects=objects)

    first = node()
    async with (
        first,
        TestClient(TestServer(create_local_app(first, uids=()))) as client,
        anyio.create_task_group() as tg,
    ):
        await tg.start(Controllers(first).run)
        assert (await post_apply(client, workload("StatefulSet")))[0] == 201
        await until(lambda: len(revisions(first)) == 1)
        kept = revisions(first)
        tg.cancel_scope.cancel()
    again = node()
    async with again:
        assert revisions(again) == kept


def test_a_revision_with_a_negative_number_is_refused_naming_the_field() -> None:
    text = REVISION.replace("NUMBER", "-1").replace("DATA", "{spec: {}}")
    with pytest.raises(ManifestError) as refused:
        load_manifests_text(text, node_name="n")
    assert "revision" in str(refused.value)
    assert "greater than or equal to 0" in str(refused.value)


@pytest.mark.parametrize("data", ["'a string'", "[1, 2]", "null"])
def test_a_revision_whose_data_is_not_an_object_is_refused(data: str) -> None:
    text = REVISION.replace("NUMBER", "1").replace("DATA", data)
    with pytest.raises(ManifestError) as refused:
        load_manifests_text(text, node_name="n")
    assert "data" in str(refused.value)


def test_a_revision_s_data_cannot_change() -> None:
    old = {"data": {"spec": {"template": {"a": 1}}}, "revision": 1}
    assert validate_controllerrevision_update({**old, "revision": 2}, old) == []
    [error] = validate_controllerrevision_update({**old, "data": {"spec": {}}}, old)
    assert error.field == "data"
    assert "field is immutable" in error.detail


def test_a_kept_revision_is_read_back_with_its_data_and_number() -> None:
    data = {"spec": {"template": {"$patch": "replace", "spec": {"containers": []}}}}
    kept = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "w-1", "namespace": "default", "labels": {"app": "w"}},
        "data": data,
        "revision": 3,
    }
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [kept]})
    report = inspect_manifests_text(text, node_name="n")
    assert not report.errors
    [(key, body)] = manifest_bodies(report.manifests)
    assert key == ("ControllerRevision", "default", "w-1")
    assert (body["data"], body["revision"]) == (data, 3)
