"""``pods/NAME/ephemeralcontainers`` on the node's Kubernetes API: additions stored and
handed to the pod's worker, changes refused as the API server refuses them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from kube_helpers import Served, call, served_with_pod

from asynckubelet.api.kube import patches

pytestmark = pytest.mark.anyio

PODS = "/api/v1/namespaces/default/pods"
SUB = PODS + "/web/ephemeralcontainers"
DEBUGGER = {"name": "debugger-x1", "image": "busybox:1.35", "stdin": True, "tty": True}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Served]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]},
    }
    async with served_with_pod(tmp_path, pod) as found:
        yield found


async def _add(api: Served, container: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    patch = {"spec": {"ephemeralContainers": [container]}}
    return await call(api, "PATCH", SUB, patch, kind=patches.STRATEGIC_PATCH)


async def test_a_strategic_merge_patch_adds_a_container_to_the_pod(api: Served) -> None:
    # kubectl debug sends an empty resources object: the zero value, allowed.
    code, body = await _add(api, dict(DEBUGGER, targetContainerName="app", resources={}))
    assert code == 200, body
    (added,) = body["spec"]["ephemeralContainers"]
    assert (added["name"], added["targetContainerName"]) == ("debugger-x1", "app")
    assert added["terminationMessagePolicy"] == "File"
    body = await _until_running(api)
    assert [c["name"] for c in body["spec"]["ephemeralContainers"]] == ["debugger-x1"]
    (status,) = body["status"]["ephemeralContainerStatuses"]
    assert (status["name"], status["ready"], status["restartCount"]) == ("debugger-x1", False, 0)
    assert status["image"] == "busybox:1.35"
    assert status["containerID"].startswith("docker://")
    assert [c["name"] for c in body["status"]["containerStatuses"]] == ["app"]
    reasons = [(e.reason, e.message) for e in api.node.recorder.list()]
    assert ("Created", "Created container debugger-x1") in reasons
    assert ("Started", "Started container debugger-x1") in reasons


async def _until_running(api: Served) -> dict[str, Any]:
    """The pod once its ephemeral container runs (its worker syncs after the write)."""
    with anyio.fail_after(10):
        while True:
            _code, body = await call(api, "GET", SUB)
            found = (body.get("status") or {}).get("ephemeralContainerStatuses") or []
            if found and "running" in found[0].get("state", {}):
                return body
            await anyio.sleep(0.05)


async def test_json_and_merge_patches_add_after_the_first(api: Served) -> None:
    assert (await _add(api, DEBUGGER))[0] == 200
    ops = [{"op": "add", "path": "/spec/ephemeralContainers/-", "value": dict(DEBUGGER, name="b")}]
    code, body = await call(api, "PATCH", SUB, ops, kind=patches.JSON_PATCH)
    assert code == 200, body
    assert [c["name"] for c in body["spec"]["ephemeralContainers"]] == ["debugger-x1", "b"]


async def test_changing_an_existing_container_is_refused(api: Served) -> None:
    assert (await _add(api, DEBUGGER))[0] == 200
    pod = await _until_running(api)
    pod["spec"]["ephemeralContainers"][0]["image"] = "busybox:1.36"
    code, body = await call(api, "PUT", SUB, pod)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers.debugger-x1: Forbidden: '
        "existing ephemeral containers may not be changed"
    )
    pod["spec"]["ephemeralContainers"] = []
    code, body = await call(api, "PUT", SUB, pod)
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers: Not found: "debugger-x1"'
    )


async def test_forbidden_fields_and_unknown_targets_are_refused(api: Served) -> None:
    code, body = await _add(
        api, dict(DEBUGGER, targetContainerName="nope", ports=[{"containerPort": 80}])
    )
    assert code == 422
    assert body["message"] == (
        'Pod "web" is invalid: [spec.ephemeralContainers[0].targetContainerName: Not found: '
        '"nope", spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an '
        "Ephemeral Container]"
    )
    code, body = await _add(api, dict(DEBUGGER, name="app"))
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers[0].name: Duplicate value: "app"'
    )
    code, body = await call(api, "GET", SUB)
    assert "ephemeralContainers" not in body["spec"]


async def test_a_stale_resource_version_is_a_conflict(api: Served) -> None:
    code, pod = await call(api, "GET", SUB)
    pod["metadata"]["resourceVersion"] = "999999"
    pod["spec"]["ephemeralContainers"] = [DEBUGGER]
    code, body = await call(api, "PUT", SUB, pod)
    assert (code, body["reason"]) == (409, "Conflict")
    assert body["message"].startswith('Operation cannot be fulfilled on pods "web"')


async def test_an_update_of_the_pod_itself_cannot_add_one(api: Served) -> None:
    code, pod = await call(api, "GET", PODS + "/web")
    pod["spec"]["ephemeralContainers"] = [DEBUGGER]
    code, body = await call(api, "PUT", PODS + "/web", pod)
    assert code == 422
    assert "pod updates may not change fields other than" in body["message"]


async def test_other_fields_sent_to_the_subresource_are_dropped(api: Served) -> None:
    patch = {"metadata": {"labels": {"x": "y"}}, "spec": {"ephemeralContainers": [DEBUGGER]}}
    code, body = await call(api, "PATCH", SUB, patch, kind=patches.MERGE_PATCH)
    assert code == 200, body
    assert "x" not in (body["metadata"].get("labels") or {})


async def test_a_pod_cannot_be_created_with_one(api: Served) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "made"},
        "spec": {
            "containers": [{"name": "app", "image": "busybox:1.35"}],
            "ephemeralContainers": [DEBUGGER],
        },
    }
    code, body = await call(api, "POST", PODS, pod)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Pod "made" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create'
    )
