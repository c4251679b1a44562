"""DaemonSets and CronJobs on a real engine, through ``serve``, its CLI and real kubectl:
a DaemonSet's pod runs on the node with the daemon controller's name, labels and owner,
a template change rolls it (``rollout status`` waits for it), a node selector the node
does not match runs nothing; a CronJob makes its Job at the scheduled minute, named and
annotated as upstream's controller names them, and deleting it takes its Jobs and pods;
``asynckubelet describe`` prints kubectl's page of each, and kubectl's NotFound for a name
the node does not have."""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.harness import BUSYBOX_IMAGE, Engine
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl, unique
from integration.serve_helpers import Daemon, manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
        env: [{name: VERSION, value: "VERSION_VALUE"}]
"""
ELSEWHERE = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      nodeSelector: {disktype: ssd}
      containers: [{name: agent, image: BUSYBOX}]
"""
CRONJOB = """
apiVersion: batch/v1
kind: CronJob
metadata: {name: NAME}
spec:
  schedule: "* * * * *"
  timeZone: Europe/Paris
  jobTemplate:
    metadata: {labels: {app: NAME}}
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: tick, image: BUSYBOX, command: [echo, tick]}]
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("daemons")
    yield from api_daemon(tmp, docker_engine)


def _file(tmp_path: Path, template: str, name: str, **values: str) -> str:
    text = template.replace("NAME", name).replace("BUSYBOX", BUSYBOX_IMAGE)
    for key, value in values.items():
        text = text.replace(key, value)
    return manifest(tmp_path, f"{name}.yaml", text)


def _get(node: Daemon, *args: str) -> dict[str, Any]:
    done = node.cli("get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _pods(node: Daemon, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _get(node, "pods")["items"]
    return [
        p
        for p in items
        if (p["metadata"].get("labels") or {}).get("app") == app
        and not p["metadata"].get("deletionTimestamp")
    ]


def _eventually(check: Callable[[], bool], *, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never came true: {check.__doc__}"
        time.sleep(0.5)


def test_a_daemonset_runs_one_pod_here_and_a_template_change_rolls_it(
    node: Daemon, kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("ds")
    path = _file(tmp_path, DAEMONSET, name, VERSION_VALUE="1")
    done = node.cli("apply", "-f", path, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr + node.log()
    assert f"daemonset.apps/{name} created" in done.stdout
    (pod,) = _pods(node, name)
    meta = pod["metadata"]
    assert pod["status"]["phase"] == "Running"
    assert re.fullmatch(rf"{name}-[a-z0-9]{{5}}", meta["name"])
    assert meta["labels"]["pod-template-generation"] == "1"
    assert meta["labels"]["controller-revision-hash"]
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("DaemonSet", name, True)
    status = _get(node, "daemonsets", name)["status"]
    counts = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
    assert [status[k] for k in counts] == [1, 1, 1]

    rolled = _file(tmp_path, DAEMONSET, name, VERSION_VALUE="2")
    assert node.cli("apply", "-f", rolled).returncode == 0
    done = kubectl("rollout", "status", f"ds/{name}", "--timeout=120s", timeout=150)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f'daemon set "{name}" successfully rolled out'

    def replaced() -> bool:
        """the old pod is gone and its replacement of generation 2 runs"""
        found = _pods(node, name)
        return [p["metadata"]["labels"]["pod-template-generation"] for p in found] == ["2"] and (
            found[0]["status"]["phase"] == "Running"
        )

    _eventually(replaced)
    (new,) = _pods(node, name)
    assert new["metadata"]["name"] != meta["name"]
    assert (
        new["metadata"]["labels"]["controller-revision-hash"]
        != (meta["labels"]["controller-revision-hash"])
    )
    listed = kubectl.ok("get", "daemonsets", name).splitlines()
    assert listed[0].split() == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE",
        "SELECTOR",
        "AGE",
    ]
    assert listed[1].split()[:7] == [name, "1", "1", "1", "1", "1", "kubernetes.io/os=linux"]
    described = kubectl.ok("describe", "ds", name)
    assert re.search(r"Desired Number of Nodes Scheduled:\s+1\n", described), described
    assert re.search(r"Pods Status:\s+1 Running / 0 Waiting", described), described
    assert re.search(r"SuccessfulCreate\s+.*Created pod: ", described), described
    deleted = kubectl("delete", "ds", name, "--timeout=60s", timeout=90)
    assert deleted.returncode == 0, deleted.stderr
    _eventually(lambda: not _pods(node, name))


def test_a_daemonset_whose_node_selector_the_node_lacks_runs_nothing(
    node: Daemon, kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("dx")
    applied = kubectl.ok("apply", "-f", _file(tmp_path, ELSEWHERE, name))
    assert applied.strip() == f"daemonset.apps/{name} created"

    def observed() -> bool:
        """the controller wrote the DaemonSet's status"""
        return "observedGeneration" in (_get(node, "daemonsets", name).get("status") or {})

    _eventually(observed)
    status = _get(node, "daemonsets", name)["status"]
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"]) == (0, 0)
    assert not _pods(node, name)


def test_a_cronjob_makes_its_job_at_the_minute_and_delete_takes_jobs_and_pods(
    node: Daemon, kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("cj")
    path = _file(tmp_path, CRONJOB, name)
    done = node.cli("apply", "-f", path, "--wait", "--timeout", "10")
    assert done.returncode == 0, done.stderr + node.log()
    assert f"cronjob.batch/{name} created" in done.stdout

    def scheduled() -> bool:
        """the CronJob ran once and its Job completed"""
        status = _get(node, "cronjobs", name).get("status") or {}
        return bool(status.get("lastSuccessfulTime"))

    _eventually(scheduled, timeout=150)
    status = _get(node, "cronjobs", name)["status"]
    jobs = [j for j in _get(node, "jobs")["items"] if j["metadata"]["name"].startswith(f"{name}-")]
    (job,) = jobs
    minutes = int(job["metadata"]["name"].rpartition("-")[2])
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert stamp.endswith(("+01:00", "+02:00"))
    assert status["lastScheduleTime"].endswith(":00Z")
    assert job["metadata"]["labels"]["app"] == name
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("CronJob", name)
    assert minutes * 60 == calendar.timegm(
        time.strptime(status["lastScheduleTime"], "%Y-%m-%dT%H:%M:%SZ")
    )
    both = kubectl.ok("get", "cronjobs,daemonsets")
    assert f"cronjob.batch/{name}" in both, both
    listed = kubectl.ok("get", "cronjobs", name).splitlines()
    assert listed[0].split() == [
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "SCHEDULE",
        "AGE",
    ]
    assert listed[1].split()[:7] == [name, "*", "*", "*", "*", "*", "Europe/Paris"]
    described = kubectl.ok("describe", "cronjob", name)
    assert re.search(r"Schedule:\s+\* \* \* \* \*\n", described), described
    assert re.search(r"Concurrency Policy:\s+Allow\n", described), described
    assert re.search(r"SuccessfulCreate\s+.*Created job " + job["metadata"]["name"], described)
    deleted = kubectl("delete", "cronjob", name, "--timeout=60s", timeout=90)
    assert deleted.returncode == 0, deleted.stderr

    def cascaded() -> bool:
        """the CronJob's Jobs and pods are gone"""
        left = [
            j
            for j in _get(node, "jobs")["items"]
            if j["metadata"]["name"] == job["metadata"]["name"]
        ]
        pods = [
            p
            for p in _get(node, "pods")["items"]
            if p["metadata"]["name"].startswith(job["metadata"]["name"])
        ]
        return not left and not pods

    _eventually(cascaded)


SUSPENDED = """
apiVersion: batch/v1
kind: CronJob
metadata: {name: NAME, labels: {team: ops}, annotations: {note: nightly}}
spec:
  schedule: "0 3 * * *"
  suspend: true
  startingDeadlineSeconds: 30
  successfulJobsHistoryLimit: 2
  jobTemplate:
    spec:
      parallelism: 1
      template:
        metadata: {labels: {app: NAME}}
        spec:
          restartPolicy: Never
          containers: [{name: nightly, image: BUSYBOX, command: [echo, nightly]}]
"""


def _page(text: str) -> list[str]:
    """A describe page's lines up to its events (whose ages move between two asks)."""
    lines = text.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith("Events:"))]


def test_describe_shows_a_daemonset_and_a_cronjob_as_kubectl_describes_them(
    node: Daemon, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Line for line the page kubectl prints, up to the events (whose ages move between
    the two asks); a kubectl that prints no CronJob ``Time Zone`` or DaemonSet
    ``Namespace`` line (1.32) is matched without them."""
    ds, cj = unique("dd"), unique("dc")
    done = node.cli("apply", "-f", _file(tmp_path, DAEMONSET, ds, VERSION_VALUE="1"), "--wait")
    assert done.returncode == 0, done.stderr + node.log()
    assert node.cli("apply", "-f", _file(tmp_path, SUSPENDED, cj)).returncode == 0

    def settled() -> bool:
        """the DaemonSet's pod is up and every counter of its status says so"""
        status = _get(node, "daemonsets", ds).get("status") or {}
        keys = ("currentNumberScheduled", "updatedNumberScheduled", "numberAvailable")
        return [status.get(k) for k in keys] == [1, 1, 1] and bool(_pods(node, ds))

    _eventually(settled)
    (pod,) = _pods(node, ds)
    ours = node.cli("describe", "ds", ds)
    assert ours.returncode == 0, ours.stderr
    theirs = _page(kubectl.ok("describe", "ds", ds))
    page = _page(ours.stdout)
    if not any(line.startswith("Namespace:") for line in theirs):
        # kubectl 1.32 prints no DaemonSet's namespace.
        page = [line for line in page if not line.startswith("Namespace:")]
    assert page == theirs
    assert re.search(r"Pods Status:\s+1 Running / 0 Waiting", ours.stdout), ours.stdout
    created = f"Created pod: {pod['metadata']['name']}"
    assert re.search(r"SuccessfulCreate\s+.*" + created, ours.stdout), ours.stdout

    ours = node.cli("describe", f"cronjob/{cj}")
    assert ours.returncode == 0, ours.stderr
    theirs = _page(kubectl.ok("describe", "cronjob", cj))
    page = _page(ours.stdout)
    if not any(line.startswith("Time Zone:") for line in theirs):
        page = [line for line in page if not line.startswith("Time Zone:")]
    assert page == theirs
    assert re.search(r"Suspend:\s+True\n", ours.stdout), ours.stdout
    assert re.search(r"Starting Deadline Seconds:\s+30s\n", ours.stdout), ours.stdout
    assert kubectl("delete", "ds", ds, "--timeout=60s", timeout=90).returncode == 0
    assert kubectl("delete", "cronjob", cj, "--timeout=60s", timeout=90).returncode == 0
