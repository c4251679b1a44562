"""``delete -f FILE`` of an object that is gone names the file, as kubectl's
``AddSourceToErr`` does: ``Error from server (NotFound): error when deleting "FILE":
pods "x" not found``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_helpers import Daemon, invoke, running_daemon

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: gone}
spec:
  containers:
  - {name: app, image: busybox:1.35}
"""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="daemon-node", pod_security="privileged") as d:
        yield d


def test_delete_f_of_a_missing_pod_names_the_file_in_kubectls_words(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    code, out, err = invoke(state, "delete", "-f", str(path))
    assert (code, out) == (1, "")
    assert err == (
        f'Error from server (NotFound): error when deleting "{path}": pods "gone" not found\n'
    )


def test_delete_f_names_the_file_of_each_missing_object_and_reports_the_others(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    (tmp_path / "cm.yaml").write_text(CONFIG)
    (tmp_path / "pod.yaml").write_text(POD)
    assert invoke(state, "apply", "-f", str(tmp_path / "cm.yaml"))[0] == 0
    code, out, err = invoke(state, "delete", "-f", str(tmp_path), "--grace-period", "0")
    assert (code, out) == (1, 'configmap "settings" deleted\n')
    pod_file = tmp_path / "pod.yaml"
    assert err == (
        f'Error from server (NotFound): error when deleting "{pod_file}": pods "gone" not found\n'
    )


def test_delete_f_from_stdin_names_the_source_STDIN(state: Path, node: Daemon) -> None:
    code, _, err = invoke(state, "delete", "-f", "-", stdin=CONFIG)
    assert code == 1
    assert err == (
        'Error from server (NotFound): error when deleting "STDIN": '
        'configmaps "settings" not found\n'
    )


def test_delete_by_name_of_a_missing_object_names_no_file(state: Path, node: Daemon) -> None:
    code, _, err = invoke(state, "delete", "pod", "gone")
    assert code == 1
    assert err == 'Error from server (NotFound): pods "gone" not found\n'


def test_delete_f_ignore_not_found_still_says_nothing(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    assert invoke(state, "delete", "-f", str(path), "--ignore-not-found") == (0, "", "")
