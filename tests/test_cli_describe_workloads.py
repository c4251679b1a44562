"""``asynckubelet describe cronjob|daemonset|deployment|job|replicaset|statefulset``: the
page of the object the node API serves (through the daemon, or without one from the objects the node
kept), every one of the namespace without a name, and kubectl's NotFound naming the kind
and name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import Daemon, invoke, running_daemon

from asynckubelet.api.inprocess import InProcessNode
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.objects import ObjectStore

WORKLOADS = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: busybox:1.35, command: [sleep, "1000"]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: tick, image: busybox:1.35, command: [echo, tick]}]
"""
SECOND = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: tock}
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: tock, image: busybox:1.35}]
"""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path, tmp_path: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="n1", pod_security="privileged") as d:
        path = tmp_path / "workloads.yaml"
        path.write_text(WORKLOADS + "---\n" + SECOND)
        code, _, err = invoke(state, "apply", "-f", str(path))
        assert code == 0, err
        yield d


def _field(out: str, label: str) -> str:
    (value,) = [
        line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith(label + ":")
    ]
    return value


@pytest.mark.parametrize("kind", ["daemonset", "daemonsets", "ds", "daemonset.apps"])
def test_describe_daemonset_by_any_of_its_names_shows_its_page(
    state: Path, node: Daemon, kind: str
) -> None:
    code, out, err = invoke(state, "describe", kind, "agent")
    assert (code, err) == (0, "")
    assert _field(out, "Name") == "agent"
    assert _field(out, "Selector") == "app=agent"
    assert "Pod Template:" in out.splitlines()


@pytest.mark.parametrize("kind", ["cronjob", "cronjobs", "cj", "cronjobs.batch"])
def test_describe_cronjob_by_any_of_its_names_shows_its_page(
    state: Path, node: Daemon, kind: str
) -> None:
    code, out, err = invoke(state, "describe", f"{kind}/tick")
    assert (code, err) == (0, "")
    assert _field(out, "Name") == "tick"
    assert _field(out, "Schedule") == "*/5 * * * *"
    assert _field(out, "Concurrency Policy") == "Allow"


def test_describe_cronjobs_without_a_name_shows_every_one_of_the_namespace(
    state: Path, node: Daemon
) -> None:
    code, out, _ = invoke(state, "describe", "cronjobs")
    assert code == 0
    assert [line.split()[1] for line in out.splitlines() if line.startswith("Name:")] == [
        "tick",
        "tock",
    ]


@pytest.mark.parametrize(
    ("kind", "shown"),
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
    state: Path, node: Daemon, kind: str, shown: str
) -> None:
    code, out, err = invoke(state, "describe", kind, "nope")
    assert (code, out) == (1, "")
    assert err.strip() == f'Error from server (NotFound): {shown} "nope" not found'


def test_without_a_daemon_describe_reads_the_kept_objects_and_names_what_is_missing(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pods(node: InProcessNode) -> list[Any]:
        return []

    monkeypatch.setattr(InProcessNode, "read_pods", no_pods)
    kept = ObjectStore(directory=state / "objects")
    kept.put(load_manifests_text(WORKLOADS, node_name="n"), source="api")
    code, out, _ = invoke(state, "describe", "ds", "agent")
    assert code == 0
    assert _field(out, "Pods Status") == "0 Running / 0 Waiting / 0 Succeeded / 0 Failed"
    code, out, _ = invoke(state, "describe", "cj", "tick")
    assert (code, _field(out, "Name")) == (0, "tick")
    code, _, err = invoke(state, "describe", "cronjob", "gone")
    assert code == 1
    assert err.splitlines()[-1] == 'Error from server (NotFound): cronjobs.batch "gone" not found'


HOSTILE = """\
apiVersion: v1
kind: Pod
metadata:
  name: sly
  annotations: {note: "\\e[2J\\e]0;owned\\a\\rfake line"}
spec:
  containers: [{name: app, image: busybox:1.35}]
"""


def test_a_pod_page_shows_terminal_escapes_harmless(state: Path, tmp_path: Path) -> None:
    with running_daemon(state, node_name="n1", pod_security="privileged"):
        path = tmp_path / "sly.yaml"
        path.write_text(HOSTILE)
        code, _, err = invoke(state, "apply", "-f", str(path))
        assert code == 0, err
        code, out, err = invoke(state, "describe", "pod", "sly")
    assert code == 0, err
    assert "\x1b" not in out
    assert "\r" not in out
    assert "^[[2J" in out
    assert "\\rfake line" in out
