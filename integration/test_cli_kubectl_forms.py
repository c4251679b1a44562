"""kubectl's everyday forms end to end on Docker, against a running ``serve``: ``get -l``,
``get --show-labels``, ``get events``, ``get namespaces`` and ``apply -n``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.serve_helpers import Daemon, manifest, serve_daemon, wait_running

PODS = """
apiVersion: v1
kind: Pod
metadata: {name: front, labels: {app: web, tier: front}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: back, labels: {app: db}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""
LOOSE = """
apiVersion: v1
kind: ConfigMap
metadata: {name: loose}
data: {a: "1"}
"""
ELSEWHERE = """
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: a}
data: {a: "1"}
"""


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def test_get_l_show_labels_and_events_of_running_pods(node: Daemon, tmp_path: Path) -> None:
    applied = node.cli("apply", "-f", manifest(tmp_path, "pods.yaml", PODS))
    assert applied.returncode == 0, applied.stderr
    wait_running(node, "front")
    wait_running(node, "back")

    selected = node.cli("get", "pods", "-l", "app=web")
    assert [line.split()[0] for line in selected.stdout.splitlines()] == ["NAME", "front"]
    assert node.cli("get", "pods", "-l", "app in (db),!tier", "-o", "name").stdout == ("pod/back\n")
    bad = node.cli("get", "pods", "-l", "-x=1")
    assert bad.returncode == 1
    assert bad.stderr.startswith(
        'Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match '
        'label selector "-x=1", field selector "": unable to parse requirement: key: '
    )

    labelled = node.cli("get", "pods", "--show-labels").stdout.splitlines()
    assert columns(labelled[0])[-1] == "LABELS"
    assert {line.split()[0]: line.split()[-1] for line in labelled[1:]} == {
        "back": "app=db",
        "front": "app=web,tier=front",
    }

    deadline = time.monotonic() + 30
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        listed = node.cli("get", "events")
        rows = [columns(line) for line in listed.stdout.splitlines()]
        if ["Normal", "Started", "pod/front", "Started container c"] in [r[1:] for r in rows]:
            break
        time.sleep(0.5)
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert ["Normal", "Started", "pod/front", "Started container c"] in [r[1:] for r in rows]
    everywhere = node.cli("get", "ev", "-A").stdout.splitlines()
    assert columns(everywhere[0])[:2] == ["NAMESPACE", "LAST SEEN"]
    quiet = node.cli("get", "events", "-n", "quiet")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (
        0,
        "",
        "No resources found in quiet namespace.\n",
    )


def test_get_namespaces_and_apply_n(node: Daemon, tmp_path: Path) -> None:
    listed = node.cli("get", "ns")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert columns(lines[0]) == ["NAME", "STATUS", "AGE"]
    assert columns(lines[1])[:2] == ["default", "Active"]

    both = manifest(tmp_path, "both.yaml", LOOSE + "---\n" + ELSEWHERE)
    refused = node.cli("apply", "-n", "b", "-f", both)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        'error: the namespace from the provided object "a" does not match the namespace "b". '
        "You must pass '--namespace=a' to perform this operation.\n"
    )
    assert node.cli("get", "cm", "-A").stdout == ""

    namespace = manifest(
        tmp_path, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"
    )
    assert node.cli("apply", "-f", namespace).returncode == 0
    placed = node.cli("apply", "-n", "b", "-f", manifest(tmp_path, "loose.yaml", LOOSE))
    assert (placed.returncode, placed.stdout) == (0, "configmap/loose created\n"), placed.stderr
    assert node.cli("get", "cm", "-n", "b", "-o", "name").stdout == "configmap/loose\n"

    spaces = node.cli("get", "namespaces", "--show-labels").stdout.splitlines()
    assert columns(spaces[0]) == ["NAME", "STATUS", "AGE", "LABELS"]
    assert [columns(line)[:2] for line in spaces[1:]] == [["b", "Active"], ["default", "Active"]]
    assert spaces[1].split()[-1] == "kubernetes.io/metadata.name=b"
