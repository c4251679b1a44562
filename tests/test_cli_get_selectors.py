"""kubectl's forms of ``get`` a kubectl user types at once: ``-l``/``--selector``,
``--show-labels``, ``get events`` and ``get namespaces``, through the daemon and without
one; and ``apply -n``."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import builders
import pytest
from daemon_helpers import Daemon, invoke, running_daemon
from lightkube.models.core_v1 import Pod

from asynckubelet.api.inprocess import InProcessNode
from asynckubelet.cli.commands import get_args, get_output
from asynckubelet.manifests import load_manifests_text
from asynckubelet.manifests.selectors import parse_label_selector
from asynckubelet.node.objects import ObjectStore

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web, tier: front}}
spec: {containers: [{name: app, image: busybox:1.35}]}
---
apiVersion: v1
kind: Pod
metadata: {name: db, labels: {app: db, tier: back}}
spec: {containers: [{name: app, image: busybox:1.35}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec: {containers: [{name: app, image: busybox:1.35}]}
"""
CONFIGS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: one, labels: {app: web}}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two}
data: {a: "2"}
"""
UNPLACED = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: loose}
data: {a: "1"}
"""
PLACED = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: placed, namespace: a}
data: {a: "1"}
"""
BAD_KEY = (
    'Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label '
    'selector "-x=1", field selector "": unable to parse requirement: key: Invalid value: '
    "\"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
    "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def names(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:]]


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="sel-node", pod_security="privileged") as d:
        yield d


@pytest.fixture
def pods(tmp_path: Path, state: Path, node: Daemon) -> Daemon:
    path = tmp_path / "pods.yaml"
    path.write_text(PODS)
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    for name in ("web", "db", "bare"):
        node.portal.call(functools.partial(node.node.wait, "default", name, "Running", timeout=10))
    return node


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web"]),
        ("app==web", ["web"]),
        ("app!=web", ["bare", "db"]),
        ("app in (web,db)", ["db", "web"]),
        ("app notin (web)", ["bare", "db"]),
        ("tier", ["db", "web"]),
        ("!tier", ["bare"]),
        ("app,tier=back", ["db"]),
        ("app=web,app=db", []),
    ],
)
def test_get_pods_l_lists_only_the_pods_the_selector_matches(
    state: Path, pods: Daemon, selector: str, expected: list[str]
) -> None:
    code, out, err = invoke(state, "get", "pods", "-l", selector)
    assert code == 0
    assert names(out) == expected
    if not expected:
        assert err == "No resources found in default namespace.\n"


def test_get_selector_long_form_and_o_name_select_alike(state: Path, pods: Daemon) -> None:
    assert invoke(state, "get", "pods", "--selector", "tier=front", "-o", "name")[1] == (
        "pod/web\n"
    )
    assert invoke(state, "get", "po", "-l", "tier=back", "-A")[1].splitlines()[1].split()[:2] == [
        "default",
        "db",
    ]


def test_a_selector_the_server_cannot_parse_is_kubectls_bad_request(
    state: Path, pods: Daemon
) -> None:
    code, out, err = invoke(state, "get", "pods", "-l", "-x=1")
    assert (code, out) == (1, "")
    assert err.replace("\n", " ").strip() == BAD_KEY


def test_fast_path_reports_a_bad_selector_in_kubectls_words(
    state: Path, pods: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert get_output.through_daemon(["get", "pods", "-l", "a b=1", "--state-dir", str(state)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        'Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match '
        'label selector "a b=1", field selector "": unable to parse requirement: key: '
        'Invalid value: "a b": '
    )


def test_a_name_and_a_selector_together_are_refused_as_kubectl_does(
    state: Path, pods: Daemon
) -> None:
    code, _, err = invoke(state, "get", "pods", "web", "-l", "app=web")
    assert (code, err) == (1, "error: name cannot be provided when a selector is specified\n")


def test_show_labels_adds_a_labels_column_sorted_by_key(state: Path, pods: Daemon) -> None:
    code, out, _ = invoke(state, "get", "pods", "--show-labels")
    assert code == 0
    lines = out.splitlines()
    assert columns(lines[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"]
    labels = {line.split()[0]: line.split()[-1] for line in lines[1:]}
    assert labels == {"bare": "<none>", "db": "app=db,tier=back", "web": "app=web,tier=front"}
    wide = invoke(state, "get", "pods", "-o", "wide", "--show-labels", "-l", "app=web")[1]
    assert columns(wide.splitlines()[0])[-2:] == ["READINESS GATES", "LABELS"]
    assert wide.splitlines()[1].split()[-1] == "app=web,tier=front"


def test_selector_and_show_labels_work_for_every_type_get_lists(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(CONFIGS)
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    code, out, _ = invoke(state, "get", "cm", "-l", "app=web", "--show-labels")
    assert code == 0
    assert [columns(line) for line in out.splitlines()] == [
        ["NAME", "DATA", "AGE", "LABELS"],
        ["one", "1", columns(out.splitlines()[1])[2], "app=web"],
    ]
    assert names(invoke(state, "get", "cm", "-l", "!app")[1]) == ["two"]
    assert invoke(state, "get", "cm", "-l", "app=web", "-o", "name")[1] == "configmap/one\n"
    assert names(invoke(state, "get", "pods,cm", "-l", "app=web")[1]) == ["configmap/one"]


def test_get_events_lists_them_as_kubectl_oldest_first(state: Path, pods: Daemon) -> None:
    code, out, err = invoke(state, "get", "events")
    assert code == 0, err
    lines = out.splitlines()
    assert columns(lines[0]) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    rows = [columns(line) for line in lines[1:]]
    assert ["Normal", "Started", "pod/web", "Started container app"] in [r[1:] for r in rows]
    assert {r[3] for r in rows} == {"pod/web", "pod/db", "pod/bare"}
    assert len(rows) == len(pods.node.recorder.list())
    assert invoke(state, "get", "ev")[1] == out
    everywhere = invoke(state, "get", "events", "-A")[1].splitlines()
    assert columns(everywhere[0])[:2] == ["NAMESPACE", "LAST SEEN"]
    assert everywhere[1].split()[0] == "default"
    wide = invoke(state, "get", "events", "-o", "wide")[1].splitlines()[0]
    assert columns(wide) == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]


def test_get_events_of_a_quiet_namespace_says_none_were_found(state: Path, node: Daemon) -> None:
    code, out, err = invoke(state, "get", "events", "-n", "quiet")
    assert (code, out, err) == (0, "", "No resources found in quiet namespace.\n")


def test_get_events_sorts_by_last_seen() -> None:
    from datetime import UTC, datetime, timedelta

    from asynckubelet.kubectl.objects import EVENT_COLUMNS, event_row, event_seen

    now = datetime(2024, 1, 1, tzinfo=UTC)

    def event(reason: str, minutes: int) -> dict[str, object]:
        at = (now - timedelta(minutes=minutes)).isoformat()
        return {
            "metadata": {"name": reason},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": reason,
            "type": "Normal",
            "message": " m ",
            "firstTimestamp": at,
            "lastTimestamp": at,
            "source": {"component": "kubelet", "host": "h"},
        }

    events = sorted([event("B", 1), event("A", 5)], key=event_seen)
    assert [e["reason"] for e in events] == ["A", "B"]
    row = event_row(events[0], now=now)
    assert len(row) == len(EVENT_COLUMNS)
    assert row == ["5m", "Normal", "A", "pod/p", "", "kubelet, h", "m", "5m", "1", "A"]


def test_get_namespaces_always_lists_default_with_kubectls_columns(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    code, out, err = invoke(state, "get", "namespaces")
    assert code == 0, err
    lines = out.splitlines()
    assert columns(lines[0]) == ["NAME", "STATUS", "AGE"]
    assert columns(lines[1])[:2] == ["default", "Active"]
    path = tmp_path / "ns.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {x: y}}\n")
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    assert names(invoke(state, "get", "ns")[1]) == ["default", "team"]
    assert names(invoke(state, "get", "ns", "-A")[1]) == ["default", "team"]
    assert names(invoke(state, "get", "ns", "-l", "x=y")[1]) == ["team"]
    shown = invoke(state, "get", "ns", "team", "--show-labels")[1].splitlines()
    assert columns(shown[0]) == ["NAME", "STATUS", "AGE", "LABELS"]
    assert shown[1].split()[-1] == "kubernetes.io/metadata.name=team,x=y"
    assert invoke(state, "get", "ns/default", "-o", "name")[1] == "namespace/default\n"


def test_a_namespace_being_deleted_shows_terminating() -> None:
    from datetime import UTC, datetime

    from asynckubelet.kubectl.objects import namespace_row

    body = {"metadata": {"name": "going", "creationTimestamp": "2024-01-01T00:00:00Z"}}
    now = datetime(2024, 1, 1, 0, 3, tzinfo=UTC)
    assert namespace_row(body, terminating=True, now=now) == ["going", "Terminating", "3m"]
    assert namespace_row(body, terminating=False, now=now) == ["going", "Active", "3m"]


def test_apply_n_puts_objects_without_a_namespace_in_it(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(UNPLACED)
    code, out, err = invoke(state, "apply", "-n", "b", "-f", str(path))
    assert (code, out, err) == (0, "configmap/loose created\n", "")
    assert names(invoke(state, "get", "cm", "-n", "b")[1]) == ["loose"]
    assert invoke(state, "get", "cm", "-n", "default")[2] == (
        "No resources found in default namespace.\n"
    )


def test_apply_n_refuses_an_object_of_another_namespace_and_applies_nothing(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(UNPLACED + "---\n" + PLACED)
    code, out, err = invoke(state, "apply", "--namespace", "b", "-f", str(path))
    assert (code, out) == (1, "")
    assert err == (
        'error: the namespace from the provided object "a" does not match the namespace "b". '
        "You must pass '--namespace=a' to perform this operation.\n"
    )
    assert invoke(state, "get", "cm", "-A")[1] == ""
    code, out, _ = invoke(state, "apply", "-n", "a", "-f", str(path))
    assert (code, out) == (0, "configmap/loose created\nconfigmap/placed created\n")


def _labelled_pod(name: str, labels: dict[str, str] | None) -> Pod:
    return builders.pod(name, uid=name, labels=labels)


def test_without_a_daemon_get_pods_l_and_show_labels_filter_what_docker_holds(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def labelled(node: object) -> list[Pod]:
        return [_labelled_pod("web", {"app": "web"}), _labelled_pod("db", None)]

    monkeypatch.setattr(InProcessNode, "read_pods", labelled)
    code, out, _ = invoke(state, "get", "pods", "-l", "app=web", "--show-labels")
    assert code == 0
    lines = out.splitlines()
    assert columns(lines[0])[-1] == "LABELS"
    assert [line.split()[0] for line in lines[1:]] == ["web"]
    assert lines[1].split()[-1] == "app=web"
    code, _, err = invoke(state, "get", "pods", "-l", "-x=1")
    assert code == 1
    assert err.splitlines()[-1].startswith('Error from server (BadRequest): Unable to find "/v1')


def test_without_a_daemon_get_reads_kept_namespaces(state: Path) -> None:
    kept = ObjectStore(directory=state / "objects")
    kept.put(
        load_manifests_text(
            CONFIGS + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n",
            node_name="n",
        ),
        source="api",
    )
    code, out, _ = invoke(state, "get", "ns")
    assert code == 0
    assert [columns(line)[:2] for line in out.splitlines()] == [
        ["NAME", "STATUS"],
        ["default", "Active"],
        ["team", "Active"],
    ]
    assert names(invoke(state, "get", "cm", "-l", "app")[1]) == ["one"]
    assert invoke(state, "get", "cm", "--show-labels")[1].splitlines()[2].split()[-1] == "<none>"


def test_without_a_daemon_get_events_reads_the_events_the_node_kept(state: Path) -> None:
    import json
    from datetime import UTC, datetime, timedelta

    from asynckubelet.node.access import StateDir
    from asynckubelet.node.events import PodEvent

    now = datetime.now(UTC)
    kept = [
        PodEvent(
            "default",
            "web",
            "u1",
            "Normal",
            "Started",
            "Started container app",
            now - timedelta(seconds=30),
            now - timedelta(seconds=20),
            container="app",
        ),
        PodEvent(
            "team",
            "db",
            "u2",
            "Warning",
            "BackOff",
            "Back-off restarting failed container",
            now - timedelta(seconds=50),
            now - timedelta(seconds=10),
            count=3,
        ),
        PodEvent(
            "default",
            "old",
            "u3",
            "Normal",
            "Pulled",
            "gone by now",
            now - timedelta(hours=2),
            now - timedelta(hours=2),
        ),
        PodEvent(
            "default",
            "bare",
            "u4",
            "Normal",
            "Scheduled",
            "Assigned to sel-node",
            now - timedelta(seconds=40),
            now - timedelta(seconds=40),
        ),
    ]
    path = StateDir(state).events
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e.to_json()) + "\n" for e in kept))
    code, out, err = invoke(state, "get", "events")
    assert code == 0, err
    assert err.splitlines() == [f"no node daemon for state dir {state}: reading the events it kept"]
    lines = out.splitlines()
    assert columns(lines[0]) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [columns(line)[1:] for line in lines[1:]] == [
        ["Normal", "Scheduled", "pod/bare", "Assigned to sel-node"],
        ["Normal", "Started", "pod/web", "Started container app"],
    ]
    everywhere = [columns(line) for line in invoke(state, "get", "ev", "-A")[1].splitlines()]
    assert [(r[0], r[4]) for r in everywhere[1:]] == [
        ("default", "pod/bare"),
        ("default", "pod/web"),
        ("team", "pod/db"),
    ]
    assert everywhere[3][1:3] == ["10s", "Warning"]
    listed = json.loads(invoke(state, "get", "events", "-n", "team", "-o", "json")[1])
    assert [(e["involvedObject"]["name"], e["count"]) for e in listed["items"]] == [("db", 3)]
    code, out, err = invoke(state, "get", "events", "-n", "quiet")
    assert (code, out, err.splitlines()[-1]) == (0, "", "No resources found in quiet namespace.")


def test_fast_path_reads_selector_and_show_labels() -> None:
    found = get_args.plain(["get", "pods", "-l", "app=web", "--show-labels"])
    assert found is not None
    assert (found["selector"], found["show_labels"]) == ("app=web", True)
    assert get_args.plain(["get", "ev"]) is not None
    assert get_args.plain(["get", "ns"]) is not None
    assert get_args.plain(["get", "pods", "web", "-l", "app=web"]) is None


def test_the_shared_selector_parser_ands_two_values_of_one_key() -> None:
    assert parse_label_selector("app=web,app=db") == {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}],
    }


def test_the_shared_selector_parser_words_a_bad_value_as_the_api_server() -> None:
    with pytest.raises(ValueError, match=r"^unable to parse requirement: values\[0\]\[app\]: "):
        parse_label_selector("app=a b!")
