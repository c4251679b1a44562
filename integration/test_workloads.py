"""Workloads on a real engine: a Deployment applied to ``serve`` reaches its replicas and
rolls them on a template change, a Job that keeps failing ends ``Failed`` with its counts,
and ``run`` of a Job file exits with the Job's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine
from integration.serve_helpers import Daemon, serve_daemon

REPO = Path(__file__).resolve().parent.parent

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
        env: [{name: VERSION, value: "VERSION_VALUE"}]
"""
FAILING_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: fails}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      containers:
      - name: step
        image: BUSYBOX
        command: [sh, -c, "echo trying; exit 3"]
"""
GOOD_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: works}
spec:
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: step
        image: BUSYBOX
        command: [sh, -c, "echo done"]
"""


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).replace("BUSYBOX", BUSYBOX_IMAGE))
    return str(path)


def _json(node: Daemon, *args: str) -> dict[str, Any]:
    done = node.cli("get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _web_pods(node: Daemon) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _json(node, "pods")["items"]
    return [
        p
        for p in items
        if (p["metadata"].get("labels") or {}).get("app") == "web"
        and not p["metadata"].get("deletionTimestamp")
    ]


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def test_a_deployment_of_three_reaches_three_running_pods_and_a_new_template_replaces_them(
    node: Daemon, tmp_path: Path
) -> None:
    first = _file(tmp_path, "web.yaml", DEPLOYMENT.replace("VERSION_VALUE", "1"))
    done = node.cli("apply", "-f", first, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr + node.log()
    assert "deployment.apps/web created" in done.stdout
    before = _web_pods(node)
    assert [p["status"]["phase"] for p in before] == ["Running"] * 3
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in before}
    assert len(hashes) == 1
    (old_hash,) = hashes
    assert all(p["metadata"]["name"].startswith(f"web-{old_hash}-") for p in before)

    second = _file(tmp_path, "web.yaml", DEPLOYMENT.replace("VERSION_VALUE", "2"))
    done = node.cli("apply", "-f", second)
    assert done.returncode == 0, done.stderr + node.log()
    assert "deployment.apps/web configured" in done.stdout
    # maxUnavailable 0: every look during the rollout finds three available pods.
    seen: list[tuple[int, int]] = []
    while not seen or seen[-1] != (3, 3):
        status = _json(node, "deployments", "web").get("status") or {}
        seen.append((status.get("updatedReplicas", 0), status.get("availableReplicas", 0)))
        assert len(seen) < 1000, seen
    assert min(available for _, available in seen) == 3, seen
    done = node.cli("apply", "-f", second, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr + node.log()
    assert "deployment.apps/web unchanged" in done.stdout
    after = [p for p in _web_pods(node) if p["status"]["phase"] == "Running"]
    assert len(after) == 3
    assert {p["metadata"]["name"] for p in after}.isdisjoint(p["metadata"]["name"] for p in before)
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in after} != {old_hash}
    status = _json(node, "deployments", "web")["status"]
    assert (status["updatedReplicas"], status["availableReplicas"]) == (3, 3)


def test_a_job_whose_pods_keep_failing_ends_failed_with_its_counts(
    node: Daemon, tmp_path: Path
) -> None:
    job = _file(tmp_path, "job.yaml", FAILING_JOB)
    done = node.cli("apply", "-f", job, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "job.batch/fails failed: BackoffLimitExceeded" in done.stderr
    status = _json(node, "jobs", "fails")["status"]
    assert status.get("failed") == 2
    assert not status.get("succeeded")
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert [(c["status"], c["reason"]) for c in failed] == [("True", "BackoffLimitExceeded")]


def _run(manifest: str, *, node_name: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "asynckubelet", "run", manifest, "--node-name", node_name]
    return subprocess.run(
        [*argv, "--pause-image", PAUSE_IMAGE, "--no-color"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_run_of_a_failed_job_exits_with_its_last_pods_exit_code(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    done = _run(_file(tmp_path, "job.yaml", FAILING_JOB), node_name=node_name)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.count("trying") == 2
    assert "BackoffLimitExceeded" in done.stderr


def test_run_of_a_job_that_completes_exits_0(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    done = _run(_file(tmp_path, "job.yaml", GOOD_JOB), node_name=node_name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("done") == 2


def test_the_example_app_s_web_and_migration_come_up_with_apply_wait(
    node: Daemon, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    for name in ("config.yaml", "web.yaml", "migrate.yaml"):
        text = (REPO / "examples" / "app" / name).read_text()
        (app / name).write_text(text.replace("asynckubelet.local/busybox:1.35", BUSYBOX_IMAGE))
    done = node.cli("apply", "-f", str(app), "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + node.log()
    assert "deployment.apps/web successfully rolled out" in done.stdout
    job = _json(node, "jobs", "migrate")["status"]
    assert (job.get("succeeded"), job.get("failed")) == (1, None)
    pods = [p for p in _json(node, "pods")["items"] if p["metadata"]["name"].startswith("migrate-")]
    (pod,) = pods
    logs = node.cli("logs", pod["metadata"]["name"])
    assert logs.stdout.strip() == "migrating schema to version 2", logs.stderr
