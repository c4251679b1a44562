"""Real kubectl driving a Deployment's rollouts and waiting on objects, against a real
``serve``: ``rollout status`` returns once the rollout is complete, ``rollout restart``
rolls every pod anew, ``rollout history`` lists the ReplicaSets' revisions with their
``CHANGE-CAUSE``, ``rollout undo`` takes the old ReplicaSet back under a new revision, and
``wait`` for a condition, a jsonpath value and a deletion, with both kubectls (the
machine's and PyPI's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine, eventually
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl, unique
from integration.serve_helpers import LONG, Daemon, manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
  labels: {app: NAME}
  annotations: {kubernetes.io/change-cause: first}
spec:
  replicas: 2
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    yield from api_daemon(tmp_path_factory.mktemp("kuberollout"), docker_engine)


def rolled_out(kubectl: Kubectl, name: str) -> None:
    done = kubectl("rollout", "status", f"deploy/{name}", "--timeout=120s", timeout=150)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f'deployment "{name}" successfully rolled out'


def pods_of(kubectl: Kubectl, name: str) -> dict[str, str]:
    """The Deployment's pods still running: name -> pod-template-hash."""
    listed = json.loads(kubectl.ok("get", "pods", "-l", f"app={name}", "-o", "json"))["items"]
    return {
        p["metadata"]["name"]: p["metadata"]["labels"]["pod-template-hash"]
        for p in listed
        if "deletionTimestamp" not in p["metadata"] and p["status"].get("phase") == "Running"
    }


def template_hashes(kubectl: Kubectl, name: str) -> set[str]:
    """The pod-template-hash of every ReplicaSet the Deployment owns."""
    listed = json.loads(kubectl.ok("get", "rs", "-l", f"app={name}", "-o", "json"))["items"]
    return {rs["metadata"]["labels"]["pod-template-hash"] for rs in listed}


def history(kubectl: Kubectl, name: str) -> list[list[str]]:
    """``rollout history``'s rows: revision and change cause."""
    lines = kubectl.ok("rollout", "history", f"deploy/{name}").splitlines()
    assert lines[0] == f"deployment.apps/{name} "
    assert lines[1].split() == ["REVISION", "CHANGE-CAUSE"]
    return [line.split(None, 1) for line in lines[2:] if line.strip()]


def test_rollout_restart_rolls_every_pod_and_status_waits_for_it(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("rr")
    path = manifest(tmp_path, "d.yaml", DEPLOYMENT.replace("NAME", name))
    kubectl.ok("apply", "-f", path)
    rolled_out(kubectl, name)
    before = pods_of(kubectl, name)
    assert len(before) == 2
    restarted = kubectl.ok("rollout", "restart", f"deploy/{name}")
    assert restarted.strip() == f"deployment.apps/{name} restarted"
    rolled_out(kubectl, name)

    def replaced() -> bool:
        """every pod of the Deployment is a new one"""
        now = pods_of(kubectl, name)
        return len(now) == 2 and not set(now) & set(before)

    eventually(replaced, timeout=90)
    template = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    assert history(kubectl, name) == [["1", "first"], ["2", "first"]]
    status = kubectl.ok(
        "get", "deploy", name, "--subresource=status", "-o", "jsonpath={.status.readyReplicas}"
    )
    assert status == "2"
    kubectl.ok("delete", "-f", path)


def test_rollout_undo_takes_the_old_replicaset_back_under_a_new_revision(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("ru")
    path = manifest(tmp_path, "d.yaml", DEPLOYMENT.replace("NAME", name))
    kubectl.ok("apply", "-f", path)
    rolled_out(kubectl, name)
    first = set(pods_of(kubectl, name).values())
    assert len(first) == 1
    change = {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}}
    kubectl.ok("patch", "deploy", name, "-p", json.dumps(change))
    kubectl.ok("annotate", "deploy", name, "kubernetes.io/change-cause=second", "--overwrite")
    rolled_out(kubectl, name)
    eventually(lambda: history(kubectl, name) == [["1", "first"], ["2", "second"]], timeout=90)
    assert set(pods_of(kubectl, name).values()) != first

    undone = kubectl("rollout", "undo", f"deploy/{name}")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.strip() == f"deployment.apps/{name} rolled back"
    rolled_out(kubectl, name)
    eventually(lambda: set(pods_of(kubectl, name).values()) == first, timeout=90)
    # kubectl's undo gives the Deployment the old revision's annotations back.
    eventually(lambda: history(kubectl, name) == [["2", "second"], ["3", "first"]], timeout=90)
    assert len(template_hashes(kubectl, name)) == 2
    annotations = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))["metadata"][
        "annotations"
    ]
    assert annotations["deployment.kubernetes.io/revision"] == "3"

    back = kubectl("rollout", "undo", f"deploy/{name}", "--to-revision=2")
    assert back.returncode == 0, back.stderr
    rolled_out(kubectl, name)
    eventually(lambda: set(pods_of(kubectl, name).values()) != first, timeout=90)
    missing = kubectl("rollout", "undo", f"deploy/{name}", "--to-revision=9")
    assert missing.returncode == 1
    assert "error: unable to find specified revision 9 in history" in missing.stderr
    kubectl.ok("delete", "-f", path)


def test_wait_for_ready_for_a_jsonpath_value_and_for_deletion(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("wt")
    path = manifest(tmp_path, "p.yaml", LONG.replace("NAME", name))
    kubectl.ok("apply", "-f", path)
    ready = kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=90s", timeout=120)
    assert (ready.returncode, ready.stdout) == (0, f"pod/{name} condition met\n"), ready.stderr
    running = kubectl.ok("wait", "--for=jsonpath={.status.phase}=Running", f"pod/{name}")
    assert running == f"pod/{name} condition met\n"
    succeeded = "--for=jsonpath={.status.phase}=Succeeded"
    other = kubectl("wait", succeeded, f"pod/{name}", "--timeout=1s")
    assert other.returncode == 1
    assert f"error: timed out waiting for the condition on pods/{name}" in other.stderr
    nope = kubectl("wait", "--for=condition=Ready", "pod/nope", "--timeout=1s")
    assert nope.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in nope.stderr

    kubectl.ok("delete", "pod", name, "--wait=false")
    gone = kubectl("wait", "--for=delete", f"pod/{name}", "--timeout=90s", timeout=120)
    assert (gone.returncode, gone.stdout) == (0, f"pod/{name} condition met\n"), gone.stderr
    assert kubectl("get", "pod", name).returncode == 1


def test_wait_for_a_deployments_available_condition_by_label(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("wa")
    path = manifest(tmp_path, "d.yaml", DEPLOYMENT.replace("NAME", name))
    kubectl.ok("apply", "-f", path)
    available = kubectl(
        "wait", "--for=condition=Available", "deploy", "-l", f"app={name}", "--timeout=90s"
    )
    assert available.stdout == f"deployment.apps/{name} condition met\n", available.stderr
    pods = kubectl("wait", "--for=condition=Ready", "pod", "-l", f"app={name}", "--timeout=90s")
    assert pods.returncode == 0, pods.stderr
    assert sorted(pods.stdout.splitlines()) == sorted(
        f"pod/{p} condition met" for p in pods_of(kubectl, name)
    )
    kubectl.ok("delete", "-f", path)


STUCK = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: 1
  progressDeadlineSeconds: 3
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers:
      - {name: c, image: akltest.local/not-there:1, imagePullPolicy: Never}
"""


def test_rollout_status_fails_once_the_progress_deadline_passes(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("rs")
    path = manifest(tmp_path, "d.yaml", STUCK.replace("NAME", name))
    kubectl.ok("apply", "-f", path)
    stuck = kubectl("rollout", "status", f"deploy/{name}", "--timeout=90s", timeout=120)
    assert stuck.returncode == 1
    assert f'error: deployment "{name}" exceeded its progress deadline' in stuck.stderr
    kubectl.ok("delete", "-f", path)
