"""The CronJob and DaemonSet controllers on a node over a fake engine, with the
controllers' clock faked: nothing runs before the scheduled minute, the Job made at it
runs its pod, and deleting the CronJob takes the Job and its pod; a DaemonSet's pod is
made with its labels and rolled on a template change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer
from apply_helpers import post_apply
from daemon_helpers import IMAGES
from polling import until
from remote_helpers import delete_remotely

from asynckubelet.api.localapi import create_local_app
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads import WORKLOADS_SOURCE, Controllers

pytestmark = pytest.mark.anyio

LOCAL = "/apis/local.asynckubelet/v1"
CRONJOB = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/10 * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers: [{name: c, image: busybox:1.35}]
"""
DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: IMAGE}]
"""

Client = TestClient[Any, Any]


class Clock:
    """The store's and the controllers' time, which a test moves on."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 3, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def stamp(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
async def cluster(
    tmp_path: Path,
) -> AsyncIterator[tuple[Client, Kubelet, Controllers, Clock]]:
    state = tmp_path / "state"
    config = KubeletConfig(
        node_name="n1", state_dir=state, housekeeping_period=3600, resync_period=0.1
    )
    clock = Clock()
    objects = ObjectStore(
        directory=state / OBJECTS_DIR,
        persistent_source=API_SOURCE,
        also_persistent=(WORKLOADS_SOURCE,),
        clock=clock.stamp,
    )
    node = Kubelet(config, docker=FakeDocker(images=(*IMAGES, "busybox:2")), objects=objects)
    controllers = Controllers(node, clock=clock)
    async with (
        node,
        TestClient(TestServer(create_local_app(node, uids=()))) as client,
        anyio.create_task_group() as tg,
    ):
        await tg.start(controllers.run)
        yield client, node, controllers, clock
        tg.cancel_scope.cancel()


async def apply(client: Client, text: str) -> list[str]:
    code, body = await post_apply(client, text)
    assert code == 201, body
    return [f"{i['resource']}/{i['name']} {i['verdict']}" for i in body["items"]]


def pods(node: Kubelet, prefix: str) -> list[Any]:
    return [
        p
        for p in node.list()
        if p.metadata is not None
        and (p.metadata.name or "").startswith(prefix)
        and p.metadata.deletionTimestamp is None
    ]


async def test_a_cronjob_runs_its_job_at_the_scheduled_minute_and_delete_takes_it_all(
    cluster: tuple[Client, Kubelet, Controllers, Clock],
) -> None:
    client, node, controllers, clock = cluster
    assert await apply(client, CRONJOB) == ["cronjob.batch/tick created"]
    passes = controllers.passes
    controllers.poke()
    await until(lambda: controllers.passes > passes)
    assert node.objects.list("Job") == []
    due = datetime(2026, 11, 30, 12, 10, 0, tzinfo=UTC)
    clock.now = due + timedelta(seconds=1)
    controllers.poke()
    await until(lambda: len(node.objects.list("Job")) == 1)
    (job,) = node.objects.list("Job")
    assert job.name == f"tick-{int(due.timestamp()) // 60}"
    await until(lambda: len(pods(node, f"{job.name}-")) == 1)
    cronjob = node.objects.get("CronJob", "default", "tick")
    assert cronjob is not None
    status = cronjob.body["status"]
    assert status["lastScheduleTime"] == due.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [a["uid"] for a in status["active"]] == [job.uid]

    items = await delete_remotely(client, [{"kind": "CronJob", "name": "tick"}], timeout=30)
    assert [i["status"] for i in items] == ["deleted"]
    await until(lambda: not node.objects.list("Job") and not pods(node, f"{job.name}-"))


async def test_a_daemonset_runs_one_labelled_pod_and_a_new_template_replaces_it(
    cluster: tuple[Client, Kubelet, Controllers, Clock],
) -> None:
    client, node, _, _ = cluster
    assert await apply(client, DAEMONSET.replace("IMAGE", "busybox:1.35")) == [
        "daemonset.apps/agent created"
    ]
    await until(lambda: len(pods(node, "agent-")) == 1)
    (first,) = pods(node, "agent-")
    assert first.metadata.labels["pod-template-generation"] == "1"
    tolerations = {t.key for t in first.spec.tolerations}
    assert "node.kubernetes.io/unschedulable" in tolerations
    (term,) = (
        first.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
    )
    assert [(f.key, f.values) for f in term.matchFields] == [("metadata.name", ["n1"])]
    assert await apply(client, DAEMONSET.replace("IMAGE", "busybox:2")) == [
        "daemonset.apps/agent configured"
    ]

    def rolled() -> bool:
        found = pods(node, "agent-")
        return len(found) == 1 and found[0].metadata.labels["pod-template-generation"] == "2"

    await until(rolled)
    (second,) = pods(node, "agent-")
    assert second.spec.containers[0].image == "busybox:2"
    assert second.metadata.name != first.metadata.name
