"""``asynckubelet describe`` of a Job, ReplicaSet, StatefulSet and Deployment on a real engine,
through ``serve``: line for line the page real kubectl prints of the same objects (up to
the events, whose ages move between the two asks), and kubectl's NotFound for a name the
node does not have."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.harness import BUSYBOX_IMAGE, Engine, eventually
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl, unique
from integration.serve_helpers import Daemon, manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

WORKLOADS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME-web, labels: {tier: front}}
spec:
  replicas: 1
  selector: {matchLabels: {app: NAME-web}}
  template:
    metadata: {labels: {app: NAME-web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
        env: [{name: MODE, value: fast}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: NAME-once}
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: once, image: BUSYBOX, command: [echo, done]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: NAME-db}
spec:
  serviceName: NAME-db
  replicas: 1
  selector: {matchLabels: {app: NAME-db}}
  template:
    metadata: {labels: {app: NAME-db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("describe")
    yield from api_daemon(tmp, docker_engine)


def _get(node: Daemon, *args: str) -> dict[str, Any]:
    done = node.cli("get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _page(text: str) -> list[str]:
    """A describe page's lines up to its events."""
    lines = text.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith("Events:"))]


def _fields(page: list[str]) -> dict[str, str]:
    """The top-level ``Label:  value`` lines of a page, by label."""
    return {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip()
        for line in page
        if line and not line[0].isspace() and ":" in line
    }


def _same_page(ours: list[str], theirs: list[str]) -> None:
    """``ours`` is kubectl's page; against a kubectl that prints fewer fields (1.32 has no
    StatefulSet ``Service Name``, ``Pod Management Policy`` or claim retention lines, so
    its labels line up narrower), every field it prints is ours with the same value and
    the pod template on are the same lines."""
    if [line.split(":")[0] for line in ours] == [line.split(":")[0] for line in theirs]:
        assert ours == theirs
        return
    assert _fields(theirs).items() <= _fields(ours).items()
    start = ours.index("Pod Template:")
    assert ours[start:] == theirs[theirs.index("Pod Template:") :]


def test_describe_shows_a_job_replicaset_statefulset_and_deployment_as_kubectl_does(
    node: Daemon, kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("dw")
    text = WORKLOADS.replace("NAME", name).replace("BUSYBOX", BUSYBOX_IMAGE)
    done = node.cli("apply", "-f", manifest(tmp_path, f"{name}.yaml", text))
    assert done.returncode == 0, done.stderr + node.log()

    def settled() -> bool:
        """the Job completed and the ReplicaSet's and StatefulSet's pods are ready"""
        job = _get(node, "jobs", f"{name}-once").get("status") or {}
        sts = _get(node, "statefulsets", f"{name}-db").get("status") or {}
        sets = [
            r
            for r in _get(node, "replicasets")["items"]
            if r["metadata"]["name"].startswith(f"{name}-web-")
        ]
        return (
            bool(job.get("completionTime"))
            and sts.get("readyReplicas") == 1
            and len(sets) == 1
            and (sets[0].get("status") or {}).get("availableReplicas") == 1
        )

    eventually(settled, timeout=120)
    (rs,) = [
        r["metadata"]["name"]
        for r in _get(node, "replicasets")["items"]
        if r["metadata"]["name"].startswith(f"{name}-web-")
    ]
    described = (
        ("job", f"{name}-once"),
        ("rs", rs),
        ("sts", f"{name}-db"),
        ("deploy", f"{name}-web"),
    )
    for kind, object_name in described:
        ours = node.cli("describe", kind, object_name)
        assert ours.returncode == 0, ours.stderr
        _same_page(_page(ours.stdout), _page(kubectl.ok("describe", kind, object_name)))
    for kind, object_name in (("deploy", f"{name}-web"), ("job", f"{name}-once")):
        assert kubectl("delete", kind, object_name, "--timeout=60s", timeout=90).returncode == 0
    assert kubectl("delete", "sts", f"{name}-db", "--timeout=60s", timeout=90).returncode == 0


@pytest.mark.parametrize(
    ("kind", "resource"),
    [
        ("cj", "cronjobs.batch"),
        ("ds", "daemonsets.apps"),
        ("job", "jobs.batch"),
        ("rs", "replicasets.apps"),
        ("sts", "statefulsets.apps"),
        ("deploy", "deployments.apps"),
    ],
)
def test_describe_of_an_unknown_name_is_kubectls_not_found(
    node: Daemon, kubectl: Kubectl, kind: str, resource: str
) -> None:
    ours = node.cli("describe", kind, "no-such-one")
    theirs = kubectl("describe", kind, "no-such-one")
    assert (ours.returncode, ours.stdout) == (1, "")
    assert (
        ours.stderr.strip() == f'Error from server (NotFound): {resource} "no-such-one" not found'
    )
    assert ours.stderr.strip() == theirs.stderr.strip()
