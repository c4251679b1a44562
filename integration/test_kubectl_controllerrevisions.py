"""Real kubectl (the newest from PyPI) driving the history of a DaemonSet and of a
StatefulSet against a real ``serve`` on a real engine: each template kept as a
``ControllerRevision`` owned by its workload, ``rollout history`` listing them with their
``CHANGE-CAUSE`` and showing one revision's template, ``rollout undo`` (to the previous
revision and ``--to-revision``) putting an earlier template back under the next number,
and the revisions deleted with their owner; the ``controllerrevisions`` resource in
discovery, listed, watched and deleted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.harness import Engine, eventually
from integration.kubectl_helpers import (
    PYPI_KUBECTL,
    Kubectl,
    api_daemon,
    seen_until,
    streaming,
    unique,
)
from integration.serve_helpers import Daemon, manifest

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: NAME
  annotations: {kubernetes.io/change-cause: CAUSE}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
        env: [{name: VERSION, value: "CAUSE"}]
"""
STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: NAME
  annotations: {kubernetes.io/change-cause: CAUSE}
spec:
  replicas: 1
  serviceName: NAME
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
        env: [{name: VERSION, value: "CAUSE"}]
"""
WAIT = 120
"""Seconds a rollout's pods, revisions and history get to show a change."""
RESOURCES = {"DaemonSet": ("daemonset", DAEMONSET), "StatefulSet": ("statefulset", STATEFULSET)}


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    yield from api_daemon(tmp_path_factory.mktemp("kuberevisions"), docker_engine)


@pytest.fixture
def kubectl(node: Daemon, tmp_path: Path) -> Kubectl:
    return Kubectl(PYPI_KUBECTL, node, home=tmp_path / "home")


def rolled_out(kubectl: Kubectl, resource: str, name: str) -> None:
    done = kubectl("rollout", "status", f"{resource}/{name}", "--timeout=120s", timeout=150)
    assert done.returncode == 0, done.stderr


def history(kubectl: Kubectl, resource: str, name: str) -> list[list[str]]:
    """``rollout history``'s rows: revision and change-cause."""
    lines = kubectl.ok("rollout", "history", f"{resource}/{name}").splitlines()
    assert lines[0] == f"{resource}.apps/{name} "
    assert lines[1].split() == ["REVISION", "CHANGE-CAUSE"]
    return [line.split(None, 1) for line in lines[2:] if line.strip()]


def revisions(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    listed = kubectl.ok("get", "controllerrevisions", "-l", f"app={name}", "-o", "json")
    return sorted(json.loads(listed)["items"], key=lambda r: r["revision"])


def versions_running(kubectl: Kubectl, name: str) -> set[str]:
    """The VERSION of each running pod of the workload not being deleted."""
    listed = json.loads(kubectl.ok("get", "pods", "-l", f"app={name}", "-o", "json"))["items"]
    return {
        p["spec"]["containers"][0]["env"][0]["value"]
        for p in listed
        if "deletionTimestamp" not in p["metadata"] and p["status"].get("phase") == "Running"
    }


def apply_version(kubectl: Kubectl, tmp_path: Path, kind: str, name: str, version: str) -> str:
    resource, text = RESOURCES[kind]
    path = manifest(
        tmp_path, f"{version}.yaml", text.replace("NAME", name).replace("CAUSE", version)
    )
    kubectl.ok("apply", "-f", path)
    rolled_out(kubectl, resource, name)
    eventually(lambda: versions_running(kubectl, name) == {version}, timeout=WAIT)
    return path


@pytest.mark.parametrize("kind", ["DaemonSet", "StatefulSet"])
def test_rollout_history_lists_and_shows_the_revisions_and_undo_puts_one_back(
    kubectl: Kubectl, tmp_path: Path, kind: str
) -> None:
    resource, _ = RESOURCES[kind]
    name = unique("rv")
    apply_version(kubectl, tmp_path, kind, name, "v1")
    path = apply_version(kubectl, tmp_path, kind, name, "v2")

    kept = revisions(kubectl, name)
    assert [r["revision"] for r in kept] == [1, 2]
    owner = json.loads(kubectl.ok("get", resource, name, "-o", "json"))
    for revision in kept:
        meta = revision["metadata"]
        assert meta["name"].startswith(f"{name}-")
        assert meta["labels"]["controller-revision-hash"] == meta["name"][len(name) + 1 :]
        assert meta["labels"]["app"] == name
        [ref] = meta["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            kind,
            name,
            owner["metadata"]["uid"],
            True,
        )
        assert revision["data"]["spec"]["template"]["$patch"] == "replace"
    table = kubectl.ok("get", "controllerrevisions", "-l", f"app={name}").splitlines()
    assert table[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert sorted(row.split()[1:3] for row in table[1:]) == [
        [f"{resource}.apps/{name}", "1"],
        [f"{resource}.apps/{name}", "2"],
    ]
    assert history(kubectl, resource, name) == [["1", "v1"], ["2", "v2"]]
    shown = kubectl.ok("rollout", "history", f"{resource}/{name}", "--revision=1")
    assert shown.splitlines()[0] == f"{resource}.apps/{name} with revision #1"
    assert re.search(r"VERSION:\s+v1", shown), shown
    if kind == "StatefulSet":
        status = owner["status"]
        assert status["currentRevision"] == status["updateRevision"] == kept[1]["metadata"]["name"]
        assert status["collisionCount"] == 0

    undone = kubectl("rollout", "undo", f"{resource}/{name}")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.strip() == f"{resource}.apps/{name} rolled back"
    rolled_out(kubectl, resource, name)
    eventually(lambda: versions_running(kubectl, name) == {"v1"}, timeout=WAIT)
    eventually(lambda: history(kubectl, resource, name) == [["2", "v2"], ["3", "v1"]], timeout=WAIT)
    assert {r["metadata"]["name"] for r in revisions(kubectl, name)} == {
        r["metadata"]["name"] for r in kept
    }
    if kind == "StatefulSet":
        first = kept[0]["metadata"]["name"]

        def rolled_back() -> bool:
            """the StatefulSet's current and update revisions are the first one"""
            status = json.loads(kubectl.ok("get", resource, name, "-o", "json"))["status"]
            return bool(status["currentRevision"] == status["updateRevision"] == first)

        eventually(rolled_back, timeout=WAIT)

    back = kubectl("rollout", "undo", f"{resource}/{name}", "--to-revision=2")
    assert back.returncode == 0, back.stderr
    rolled_out(kubectl, resource, name)
    eventually(lambda: versions_running(kubectl, name) == {"v2"}, timeout=WAIT)
    eventually(lambda: history(kubectl, resource, name) == [["3", "v1"], ["4", "v2"]], timeout=WAIT)
    missing = kubectl("rollout", "undo", f"{resource}/{name}", "--to-revision=9")
    assert missing.returncode == 1
    assert "unable to find specified revision 9 in history" in missing.stderr

    kubectl.ok("delete", "-f", path)
    eventually(lambda: revisions(kubectl, name) == [], timeout=WAIT)


def test_controllerrevisions_are_discovered_watched_and_deleted(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    rows = kubectl.ok("api-resources", "--api-group=apps", "--no-headers", "-o", "wide")
    [row] = [r.split() for r in rows.splitlines() if r.startswith("controllerrevisions ")]
    assert row[1:4] == ["apps/v1", "true", "ControllerRevision"]
    assert {"delete", "get", "list", "watch"} <= set(row[4].strip("[]").split(","))

    name = unique("rw")
    with streaming(kubectl, "get", "controllerrevisions", "-l", f"app={name}", "-w") as lines:
        apply_version(kubectl, tmp_path, "DaemonSet", name, "v1")
        path = apply_version(kubectl, tmp_path, "DaemonSet", name, "v2")
        first, second = (r["metadata"]["name"] for r in revisions(kubectl, name))
        seen = seen_until(lines, [second, f"daemonset.apps/{name}", "2"])
        assert [first, f"daemonset.apps/{name}", "1"] in [r[:3] for r in seen], seen
        assert [second, f"daemonset.apps/{name}", "2"] in [r[:3] for r in seen], seen

    deleted = kubectl.ok("delete", "controllerrevision", first)
    assert deleted.startswith(f'controllerrevision.apps "{first}" deleted'), deleted
    gone = kubectl("get", "controllerrevision", first)
    assert gone.returncode == 1
    assert f'controllerrevisions.apps "{first}" not found' in gone.stderr
    assert [r["metadata"]["name"] for r in revisions(kubectl, name)] == [second]
    assert history(kubectl, "daemonset", name) == [["2", "v2"]]
    kubectl.ok("delete", "-f", path)
    eventually(lambda: revisions(kubectl, name) == [], timeout=WAIT)
