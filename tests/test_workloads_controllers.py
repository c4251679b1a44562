"""The controllers on a node over a fake engine, through the local API: pods made as a
ReplicaSet or a Job makes them and run by the node, an unchanged re-apply that touches
nothing on the engine, scaling by re-apply, refused updates that leave nothing behind,
prune, and cascading deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient
from apply_helpers import post_apply
from controller_helpers import controllers_node
from lightkube.models.core_v1 import Pod
from polling import until
from remote_helpers import delete_remotely

from asynckubelet.node.kubelet import API_SOURCE, Kubelet
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads import WORKLOADS_SOURCE

pytestmark = pytest.mark.anyio

LOCAL = "/apis/local.asynckubelet/v1"
MUTATIONS = (
    "create_container",
    "start_container",
    "stop_container",
    "kill_container",
    "remove_container",
)
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: web, image: IMAGE}]
"""
JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox:1.35}]
"""
CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: NAME, labels: {app: web}}
data: {a: b}
"""

Client = TestClient[Any, Any]


def deployment(replicas: int = 2, image: str = "busybox:1.35") -> str:
    return DEPLOYMENT.replace("REPLICAS", str(replicas)).replace("IMAGE", image)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet, FakeDocker]]:
    async with controllers_node(tmp_path) as (client, node, docker):
        yield client, node, docker


async def apply(
    client: Client, *texts: str, prune: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    return await post_apply(client, *texts, prune=prune)


def verdicts(body: dict[str, Any]) -> list[str]:
    return [f"{i['resource']}/{i['name']} {i['verdict']}" for i in body["items"]]


def name_of(pod: Pod) -> str:
    return (pod.metadata.name if pod.metadata is not None else None) or ""


def named(node: Kubelet, prefix: str) -> list[Pod]:
    return [p for p in node.list() if name_of(p).startswith(prefix)]


def running(node: Kubelet, prefix: str) -> list[Any]:
    return [
        p
        for p in named(node, prefix)
        if p.status is not None
        and p.status.phase == "Running"
        and p.metadata is not None
        and p.metadata.deletionTimestamp is None
    ]


def body_of(node: Kubelet, kind: str, name: str) -> Mapping[str, Any]:
    found = node.objects.get(kind, "default", name)
    if found is None:
        raise AssertionError(f"no {kind} {name} in the store")
    return found.body


def mutations(docker: FakeDocker) -> int:
    return sum(docker.count(m) for m in MUTATIONS)


def app_container(docker: FakeDocker, pod: str) -> str:
    for container in docker.containers.values():
        labels = container.labels
        if (
            labels.get(naming.LABEL_POD_NAME) == pod
            and labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER
            and container.status == "running"
        ):
            return container.id
    raise AssertionError(f"no running container of {pod}")


async def test_a_deployment_runs_its_pods_named_and_labelled_as_a_replicaset_makes_them(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    code, body = await apply(client, deployment(2))
    assert (code, verdicts(body)) == (201, ["deployment.apps/web created"])
    await until(lambda: len(running(node, "web-")) == 2)
    (rs,) = node.objects.list("ReplicaSet")
    pods = running(node, "web-")
    for pod in pods:
        meta = pod.metadata
        assert meta.name.startswith(f"{rs.name}-")
        assert len(meta.name) == len(rs.name) + 6
        assert meta.labels["pod-template-hash"] == rs.name.rsplit("-", 1)[1]
        (owner,) = meta.ownerReferences
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "ReplicaSet",
            rs.name,
            rs.uid,
            True,
        )
    await until(
        lambda: (
            (body_of(node, "Deployment", "web").get("status") or {}).get("availableReplicas") == 2
        )
    )


async def test_reapplying_an_unchanged_deployment_makes_no_engine_call(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, docker = cluster
    await apply(client, deployment(2), CONFIG.replace("NAME", "settings"))
    await until(lambda: len(running(node, "web-")) == 2)
    await anyio.sleep(0.5)
    before = mutations(docker)
    _, body = await apply(client, deployment(2), CONFIG.replace("NAME", "settings"))
    await anyio.sleep(0.5)
    assert verdicts(body) == ["deployment.apps/web unchanged", "configmap/settings unchanged"]
    assert mutations(docker) == before


async def test_a_reapply_with_more_replicas_scales_up_and_fewer_scales_down(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    await apply(client, deployment(1))
    await until(lambda: len(running(node, "web-")) == 1)
    _, body = await apply(client, deployment(3))
    assert verdicts(body) == ["deployment.apps/web configured"]
    await until(lambda: len(running(node, "web-")) == 3)
    await apply(client, deployment(1))
    await until(lambda: len(named(node, "web-")) == 1)
    assert len(node.objects.list("ReplicaSet")) == 1


async def test_a_changed_image_rolls_out_to_a_new_replicaset(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    await apply(client, deployment(2))
    await until(lambda: len(running(node, "web-")) == 2)
    (old,) = node.objects.list("ReplicaSet")
    await apply(client, deployment(2, image="busybox:2"))

    def rolled() -> bool:
        pods = running(node, "web-")
        return len(pods) == 2 and all(p.spec.containers[0].image == "busybox:2" for p in pods)

    await until(rolled)
    new = [rs for rs in node.objects.list("ReplicaSet") if rs.name != old.name]
    assert len(new) == 1
    assert body_of(node, "ReplicaSet", old.name)["spec"]["replicas"] == 0
    deploy = body_of(node, "Deployment", "web")
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


async def test_a_changed_selector_is_refused_and_nothing_of_the_apply_is_stored(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    await apply(client, deployment(1))
    changed = deployment(1).replace("{app: web}}\n  template", "{app: web2}}\n  template")
    changed = changed.replace("labels: {app: web}}\n    spec", "labels: {app: web2}}\n    spec")
    code, body = await apply(client, changed, CONFIG.replace("NAME", "extra"))
    assert code == 422
    causes = body["details"]["causes"]
    assert [
        (c["field"], c["message"].endswith("field is immutable"), c["source"]) for c in causes
    ] == [("spec.selector", True, 'Deployment "web"')]
    assert node.objects.get("ConfigMap", "default", "extra") is None
    stored = body_of(node, "Deployment", "web")
    assert stored["spec"]["selector"] == {"matchLabels": {"app": "web"}}


async def test_prune_deletes_what_the_folder_no_longer_holds_among_the_selected(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    unselected = CONFIG.replace("NAME", "other").replace("labels: {app: web}", "labels: {app: db}")
    await apply(client, deployment(1), CONFIG.replace("NAME", "old"), unselected)
    code, body = await apply(client, deployment(1), prune={"selector": "app=web"})
    assert code == 201
    assert [f"{p['resource']}/{p['name']}" for p in body["pruned"]] == ["configmap/old"]
    assert node.objects.get("ConfigMap", "default", "old") is None
    assert node.objects.get("ConfigMap", "default", "other") is not None
    assert node.objects.get("Deployment", "default", "web") is not None


async def test_deleting_a_deployment_deletes_its_replicasets_and_pods(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    await apply(client, deployment(2))
    await until(lambda: len(running(node, "web-")) == 2)
    items = await delete_remotely(client, [{"kind": "Deployment", "name": "web"}], timeout=0)
    assert items[0]["status"] == "deleted"
    await until(lambda: not node.objects.list("ReplicaSet") and not node.list())
    assert node.objects.list("Pod") == []


async def test_delete_of_a_deployment_answers_once_its_pods_are_gone(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, docker = cluster
    await apply(client, deployment(2))
    await until(lambda: len(running(node, "web-")) == 2)
    items = await delete_remotely(client, [{"kind": "Deployment", "name": "web"}], timeout=30)
    assert [i["status"] for i in items] == ["deleted"]
    assert named(node, "web-") == []
    assert node.objects.list("ReplicaSet") == []
    assert [c for c in docker.containers.values() if "web-" in c.name] == []


async def test_delete_of_a_deployment_waits_for_its_pods_deleted_earlier_and_still_stopping(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, docker = cluster
    await apply(client, deployment(1))
    await until(lambda: len(running(node, "web-")) == 1)
    (old,) = [name_of(p) for p in running(node, "web-")]
    held = docker.hold("stop_container")
    await node.delete("default", old, wait=False)
    await until(lambda: docker.count("stop_container") == 1)
    items = await delete_remotely(client, [{"kind": "Deployment", "name": "web"}], timeout=0.3)
    assert items[0]["status"] == "deleted"
    assert {"kind": "Pod", "namespace": "default", "name": old, "status": "timeout"} in items
    held.set()
    await until(lambda: not named(node, "web-"))


async def test_delete_without_wait_answers_before_the_pods_are_gone(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, _ = cluster
    await apply(client, deployment(1))
    await until(lambda: len(running(node, "web-")) == 1)
    items = await delete_remotely(client, [{"kind": "Deployment", "name": "web"}], wait=False)
    assert [i["status"] for i in items] == ["deleted"]
    assert node.objects.list("ReplicaSet") == []
    assert node.objects.list("Pod") == []
    await until(lambda: not named(node, "web-"))


async def test_a_job_completes_when_its_pod_succeeds(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, docker = cluster
    await apply(client, JOB)
    await until(lambda: len(running(node, "migrate-")) == 1)
    (pod,) = running(node, "migrate-")
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "migrate"
    assert pod.metadata.ownerReferences[0].kind == "Job"
    docker.exit(app_container(docker, pod.metadata.name), exit_code=0)

    def complete() -> bool:
        status = body_of(node, "Job", "migrate").get("status") or {}
        return any(c["type"] == "Complete" for c in status.get("conditions") or [])

    await until(complete)
    status = body_of(node, "Job", "migrate")["status"]
    assert status["succeeded"] == 1
    stored = body_of(node, "Pod", pod.metadata.name)
    assert "batch.kubernetes.io/job-tracking" not in (stored["metadata"].get("finalizers") or [])


async def test_a_job_without_retries_fails_when_its_pod_fails(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    client, node, docker = cluster
    await apply(client, JOB)
    await until(lambda: len(running(node, "migrate-")) == 1)
    (pod,) = running(node, "migrate-")
    docker.exit(app_container(docker, pod.metadata.name), exit_code=3)

    def failed() -> list[str]:
        status = body_of(node, "Job", "migrate").get("status") or {}
        return [c["reason"] for c in status.get("conditions") or [] if c["type"] == "Failed"]

    await until(lambda: bool(failed()))
    assert failed() == ["BackoffLimitExceeded"]
    assert len(named(node, "migrate-")) == 1


def default_accounts(node: Kubelet) -> dict[str, str]:
    """Namespace -> the source of its ``default`` ServiceAccount."""
    return {
        o.namespace: o.source for o in node.objects.list("ServiceAccount") if o.name == "default"
    }


async def test_every_namespace_gets_a_default_service_account_that_goes_with_it(
    cluster: tuple[Client, Kubelet, FakeDocker],
) -> None:
    """As the service-account controller keeps them: ``default`` at once, a new
    namespace's when it is made, again when deleted, and gone with its namespace; one a
    client applied stays the client's."""
    client, node, _ = cluster
    await until(lambda: default_accounts(node) == {"default": WORKLOADS_SOURCE})
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    assert (await apply(client, namespace))[0] == 201
    await until(lambda: "team" in default_accounts(node))
    node.objects.remove("ServiceAccount", "team", "default")
    await until(lambda: "team" in default_accounts(node))
    own = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}\n"
    assert (await apply(client, own))[0] == 201
    assert default_accounts(node)["default"] == API_SOURCE
    node.objects.remove("Namespace", None, "team")
    await until(lambda: "team" not in default_accounts(node))
    assert default_accounts(node) == {"default": API_SOURCE}
