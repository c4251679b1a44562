"""``pods/NAME/resize`` on the node's Kubernetes API: resources changed as the API server
lets them change (``dropNonResizeUpdates``, ``ValidatePodResize``), refusals in its words."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from kube_helpers import Served, call, served_with_pod

from asynckubelet.api.kube import patches

pytestmark = pytest.mark.anyio

PODS = "/api/v1/namespaces/default/pods"
SUB = PODS + "/web/resize"
LIMITS = {"cpu": "100m", "memory": "32Mi"}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Served]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "resources": {"requests": dict(LIMITS), "limits": dict(LIMITS)},
                }
            ]
        },
    }
    async with served_with_pod(tmp_path, pod) as found:
        yield found


def _resources(cpu: str, memory: str, **more: str) -> dict[str, Any]:
    both = {"cpu": cpu, "memory": memory, **more}
    return {
        "spec": {"containers": [{"name": "app", "resources": {"requests": both, "limits": both}}]}
    }


@pytest.mark.parametrize("kind", [patches.MERGE_PATCH, patches.STRATEGIC_PATCH])
async def test_a_patch_changes_the_cpu_and_memory_of_a_container(api: Served, kind: str) -> None:
    code, body = await call(api, "PATCH", SUB, _resources("200m", "64Mi"), kind=kind)
    assert code == 200, body["message"]
    (ctr,) = body["spec"]["containers"]
    assert ctr["resources"]["limits"] == {"cpu": "200m", "memory": "64Mi"}
    assert {p["resourceName"] for p in ctr["resizePolicy"]} == {"cpu", "memory"}
    wanted = {"cpu": "200m", "memory": "64Mi"}
    got = await _until(api, lambda pod: _applied(pod) == wanted)
    assert got["spec"]["containers"][0]["resources"]["requests"] == wanted
    (status,) = got["status"]["containerStatuses"]
    assert status["allocatedResources"] == wanted
    assert status["restartCount"] == 0
    assert "PodResizeInProgress" not in [c["type"] for c in got["status"]["conditions"]]


def _applied(pod: dict[str, Any]) -> Any:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return (statuses[0].get("resources") or {}).get("limits")


async def _until(api: Served, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The pod once ``done`` holds of it (its worker syncs after the write)."""
    with anyio.fail_after(10):
        while True:
            _code, body = await call(api, "GET", SUB)
            if done(body):
                return body
            await anyio.sleep(0.05)


async def test_a_resize_beyond_the_node_is_pending_as_infeasible(api: Served) -> None:
    code, body = await call(
        api, "PATCH", SUB, _resources("100000", "32Mi"), kind=patches.MERGE_PATCH
    )
    assert code == 200, body["message"]

    def pending(pod: dict[str, Any]) -> bool:
        return any(c["type"] == "PodResizePending" for c in pod["status"].get("conditions") or [])

    got = await _until(api, pending)
    (condition,) = [c for c in got["status"]["conditions"] if c["type"] == "PodResizePending"]
    assert condition["reason"] == "Infeasible"
    assert condition["message"].startswith(
        "Node didn't have enough capacity: cpu, requested: 100000000, capacity: "
    )
    assert got["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "100000"
    assert _applied(got) == LIMITS


async def test_a_json_patch_changes_a_limit(api: Served) -> None:
    ops = [
        {"op": "replace", "path": f"/spec/containers/0/resources/{part}/cpu", "value": "300m"}
        for part in ("requests", "limits")
    ]
    code, body = await call(api, "PATCH", SUB, ops, kind=patches.JSON_PATCH)
    assert code == 200, body["message"]
    assert body["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "300m"


async def test_a_put_keeps_only_the_resources_of_what_is_sent(api: Served) -> None:
    code, pod = await call(api, "GET", PODS + "/web")
    assert code == 200
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "150m"
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "150m"
    pod["spec"]["containers"][0]["image"] = "busybox:other"
    pod["spec"]["activeDeadlineSeconds"] = 30
    code, body = await call(api, "PUT", SUB, pod)
    assert code == 200, body["message"]
    (ctr,) = body["spec"]["containers"]
    assert ctr["resources"]["limits"]["cpu"] == "150m"
    assert ctr["image"] == "busybox:1.35"
    assert "activeDeadlineSeconds" not in body["spec"]


async def test_a_change_of_the_qos_class_is_refused_in_the_api_server_words(api: Served) -> None:
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "50m"}}}]}}
    code, body = await call(api, "PATCH", SUB, patch, kind=patches.STRATEGIC_PATCH)
    assert code == 422, body
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'Pod "web" is invalid: spec: Invalid value: "Burstable": '
        "Pod QOS Class may not change as a result of resizing"
    )
    code, got = await call(api, "GET", PODS + "/web")
    assert got["spec"]["containers"][0]["resources"]["requests"] == LIMITS


async def test_a_resource_other_than_cpu_and_memory_is_refused(api: Served) -> None:
    patch = _resources("100m", "32Mi", **{"ephemeral-storage": "1Gi"})
    code, body = await call(api, "PATCH", SUB, patch, kind=patches.MERGE_PATCH)
    assert code == 422, body
    assert body["message"] == (
        'Pod "web" is invalid: spec: Forbidden: only cpu and memory resources are mutable'
    )


async def test_a_renamed_container_is_refused(api: Served) -> None:
    patch = [{"op": "replace", "path": "/spec/containers/0/name", "value": "other"}]
    code, body = await call(api, "PATCH", SUB, patch, kind=patches.JSON_PATCH)
    assert code == 422, body
    assert "containers may not be renamed or reordered on resize" in body["message"]


async def test_an_unknown_patch_type_is_415(api: Served) -> None:
    code, body = await call(api, "PATCH", SUB, {}, kind="text/plain")
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"


async def test_a_pod_that_is_not_there_is_404(api: Served) -> None:
    code, body = await call(api, "PATCH", PODS + "/nope/resize", {}, kind=patches.MERGE_PATCH)
    assert code == 404
    assert body["reason"] == "NotFound"
