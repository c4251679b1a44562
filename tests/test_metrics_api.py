"""``metrics.k8s.io`` on the node's local API over a fake engine: a pod's running
containers as ``PodMetrics``, the node as ``NodeMetrics``, and the API server's NotFound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from asynckubelet.api.localapi import create_local_app
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

BASE = "/apis/metrics.k8s.io/v1beta1"
Client = TestClient[Any, Any]


def _stats(cpu: int, precpu: int, memory: int) -> dict[str, Any]:
    return {
        "read": "2026-12-07T01:00:01Z",
        "preread": "2026-12-07T01:00:00Z",
        "cpu_stats": {"cpu_usage": {"total_usage": cpu}},
        "precpu_stats": {"cpu_usage": {"total_usage": precpu}},
        "memory_stats": {"usage": memory, "stats": {"total_inactive_file": 0}},
    }


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Client]:
    # A remote engine: a local one's node figures are this machine's (the cgroup root).
    docker = FakeDocker(url="tcp://engine:2376")
    for pod, namespace in (("web", "default"), ("db", "data")):
        labels = {
            naming.LABEL_NODE: "n1",
            naming.LABEL_TYPE: naming.TYPE_CONTAINER,
            naming.LABEL_POD_NAME: pod,
            naming.LABEL_POD_NAMESPACE: namespace,
            naming.LABEL_POD_UID: f"uid-{pod}",
            naming.LABEL_CONTAINER_NAME: "app",
        }
        cid = docker.add_container(labels=labels, state="running").id
        docker.stats[cid] = _stats(2 * 10**9, 10**9 + 5 * 10**8, 64 * 2**20)
    config = KubeletConfig(node_name="n1", state_dir=tmp_path, housekeeping_period=3600)
    node = Kubelet(config, docker=docker)
    async with node, TestClient(TestServer(create_local_app(node, uids=()))) as client:
        yield client


async def test_pods_of_a_namespace_are_listed_as_pod_metrics(served: Client) -> None:
    answer = await served.get(f"{BASE}/namespaces/default/pods")
    assert answer.status == 200
    body = await answer.json()
    assert body["kind"] == "PodMetricsList"
    (item,) = body["items"]
    assert item["metadata"]["name"] == "web"
    assert item["containers"] == [{"name": "app", "usage": {"cpu": "500m", "memory": "64Mi"}}]


async def test_every_namespace_is_listed_without_one(served: Client) -> None:
    body = await (await served.get(f"{BASE}/pods")).json()
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]] == [
        ("data", "db"),
        ("default", "web"),
    ]


async def test_a_remote_engines_node_is_the_sum_of_its_pods(served: Client) -> None:
    body = await (await served.get(f"{BASE}/nodes/n1")).json()
    assert body["kind"] == "NodeMetrics"
    assert body["usage"] == {"cpu": "1", "memory": "128Mi"}
    assert body["window"] == "1s"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/nodes/n2", 'nodemetrics.metrics.k8s.io "n2" not found'),
        ("/namespaces/default/pods/gone", 'podmetrics.metrics.k8s.io "gone" not found'),
    ],
)
async def test_an_object_not_there_is_the_api_servers_not_found(
    served: Client, path: str, message: str
) -> None:
    answer = await served.get(BASE + path)
    assert answer.status == 404
    body = await answer.json()
    assert (body["kind"], body["reason"], body["message"]) == ("Status", "NotFound", message)
