"""The command line asking the node daemon: tables printed by the daemon, objects of
every kind, Secret values never shown, kubectl's words for delete, one line when there is
no daemon, and ``run`` beside a daemon (its defaults, its host ports, its own UIDs)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import Daemon, invoke, running_daemon
from lightkube.models.core_v1 import Pod

from asynckubelet.api.inprocess import InProcessNode
from asynckubelet.cli import provision
from asynckubelet.cli.commands import get_output
from asynckubelet.cli.commands import run as run_command
from asynckubelet.manifests import load_manifests_text, pod_uid
from asynckubelet.node.objects import ObjectStore

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast, level: "3"}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: db}
type: Opaque
stringData: {password: hunter2-do-not-print}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: NS}
spec:
  containers:
  - name: app
    image: busybox:1.35
    ports: [{containerPort: 80, hostPort: 8080}]
"""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="daemon-node", pod_security="privileged") as d:
        yield d


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def running(node: Daemon, name: str, namespace: str = "default") -> None:
    node.portal.call(lambda: node.node.wait(namespace, name, "Running", timeout=10))


def test_get_pods_lays_out_the_table_the_daemon_printed(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    running(node, "web")
    code, out, err = invoke(state, "get", "pods", "-o", "wide")
    header, row = out.splitlines()
    assert (code, err) == (0, "")
    assert re.split(r"\s{2,}", header) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    assert row.split()[:4] == ["web", "1/1", "Running", "0"]
    assert row.split()[-3:] == ["daemon-node", "<none>", "<none>"]


def test_get_all_namespaces_shows_each_pods_namespace_once(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "a.yaml", POD.replace("NS", "team-a")))
    running(node, "web", "team-a")
    code, out, _ = invoke(state, "get", "pods", "-A")
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["NAMESPACE", "NAME"],
        ["team-a", "web"],
    ]
    assert invoke(state, "get", "pods", "-n", "team-a", "-o", "name")[1] == "pod/web\n"


def test_no_headers_leaves_out_the_header_line_and_sizes_columns_by_the_rows(
    tmp_path: Path, state: Path, node: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "a.yaml", POD.replace("NS", "default")))
    running(node, "web")
    code, out, err = invoke(state, "get", "pods", "--no-headers")
    assert (code, err) == (0, "")
    assert len(out.splitlines()) == 1
    assert out.split()[:3] == ["web", "1/1", "Running"]
    assert out.startswith("web   1/1")
    assert (
        get_output.through_daemon(["get", "pods", "--no-headers", "--state-dir", str(state)]) == 0
    )
    # The same line from the fast path, but for the AGE a second may have moved on.
    assert _without_age(capsys.readouterr().out) == _without_age(out)


def _without_age(text: str) -> str:
    return re.sub(r"\d+s$", "AGE", text.rstrip("\n"))


def test_a_table_without_headers_is_its_rows_sized_by_themselves() -> None:
    from asynckubelet.kubectl.tables import render

    document = {
        "columnDefinitions": [{"name": "name"}, {"name": "ready"}],
        "rows": [{"cells": ["a", "1/1"]}, {"cells": ["bb", "0/1"]}],
    }
    assert render(document) == "NAME   READY\na      1/1\nbb     0/1"
    assert render(document, headers=False) == "a    1/1\nbb   0/1"
    assert render({**document, "rows": []}, headers=False) == ""


def test_get_of_a_missing_pod_is_the_daemons_not_found(state: Path, node: Daemon) -> None:
    code, out, err = invoke(state, "get", "pods", "nope")
    assert (code, out) == (1, "")
    assert err == 'Error from server (NotFound): pods "nope" not found\n'


def test_get_configmaps_and_secrets_have_kubectls_columns(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "objects.yaml", CONFIG + "---\n" + SECRET))
    configmaps = invoke(state, "get", "configmaps")[1].splitlines()
    secrets = invoke(state, "get", "secrets")[1].splitlines()
    assert [line.split()[:2] for line in configmaps] == [["NAME", "DATA"], ["settings", "2"]]
    assert configmaps[0].split()[2] == "AGE"
    assert [line.split()[:3] for line in secrets] == [
        ["NAME", "TYPE", "DATA"],
        ["db", "Opaque", "1"],
    ]
    assert secrets[0].split()[3] == "AGE"


@pytest.mark.parametrize(
    "args",
    [
        ("get", "secrets"),
        ("get", "secrets", "-o", "yaml"),
        ("get", "secrets", "-o", "json"),
        ("get", "secret", "db", "-o", "json"),
        ("get", "secrets", "-A", "-o", "wide"),
    ],
)
def test_get_never_prints_a_secrets_values(
    tmp_path: Path, state: Path, node: Daemon, args: tuple[str, ...]
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "secret.yaml", SECRET))
    code, out, err = invoke(state, *args)
    assert code == 0
    assert "db" in out
    assert "hunter2" not in out + err
    assert "aHVudGVyMi" not in out + err


def test_delete_f_deletes_every_object_the_file_holds_in_kubectls_words(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    text = CONFIG + "---\n" + SECRET + "---\n" + POD.replace("NS", "default")
    path = write(tmp_path, "all.yaml", text)
    invoke(state, "apply", "-f", path)
    running(node, "web")
    code, out, err = invoke(state, "delete", "-f", path, "--grace-period", "0")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        'configmap "settings" deleted',
        'secret "db" deleted',
        'pod "web" deleted',
    ]
    assert node.node.list() == []
    assert not any(node.node.objects.list(k) for k in ("ConfigMap", "Secret", "Pod"))


def test_delete_of_a_missing_object_is_not_found_and_exit_1(state: Path, node: Daemon) -> None:
    code, out, err = invoke(state, "delete", "configmap", "absent")
    assert (code, out) == (1, "")
    assert err == 'Error from server (NotFound): configmaps "absent" not found\n'


def test_delete_ignore_not_found_treats_a_missing_object_as_deleted(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    path = write(tmp_path, "cm.yaml", CONFIG)
    invoke(state, "apply", "-f", path)
    code, out, err = invoke(state, "delete", "configmap", "absent", "--ignore-not-found")
    assert (code, out, err) == (0, "", "")
    code, out, err = invoke(state, "delete", "-f", path, "--ignore-not-found")
    assert (code, out, err) == (0, 'configmap "settings" deleted\n', "")
    code, out, err = invoke(state, "delete", "-f", path, "--ignore-not-found")
    assert (code, out, err) == (0, "", "")


def test_delete_now_stops_pods_with_a_one_second_grace_period(
    tmp_path: Path, state: Path, node: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynckubelet.api.remote import RemoteNode

    asked: list[float | None] = []
    real = RemoteNode.delete

    def delete(self: RemoteNode, objects: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("grace_period"))
        return real(self, objects, **kwargs)

    monkeypatch.setattr(RemoteNode, "delete", delete)
    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    running(node, "web")
    code, out, err = invoke(state, "delete", "pod", "web", "--now")
    assert (code, out, err) == (0, 'pod "web" deleted\n', "")
    assert asked == [1]
    code, _, err = invoke(state, "delete", "pod", "web", "--now", "--grace-period", "3")
    assert code == 2
    assert "--now and --grace-period cannot both be given" in err


def test_delete_wait_false_asks_the_node_not_to_wait_and_a_bad_value_is_refused(
    tmp_path: Path, state: Path, node: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynckubelet.api.remote import RemoteNode

    asked: list[bool | None] = []
    real = RemoteNode.delete

    def delete(self: RemoteNode, objects: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("wait"))
        return real(self, objects, **kwargs)

    monkeypatch.setattr(RemoteNode, "delete", delete)
    path = write(tmp_path, "cm.yaml", CONFIG)
    invoke(state, "apply", "-f", path)
    code, out, err = invoke(state, "delete", "-f", path, "--wait=false")
    assert (code, out, err) == (0, 'configmap "settings" deleted\n', "")
    invoke(state, "apply", "-f", path)
    code, out, err = invoke(state, "delete", "configmap", "settings")
    assert (code, out, err) == (0, 'configmap "settings" deleted\n', "")
    assert asked == [False, True]
    invoke(state, "apply", "-f", path)
    code, _, err = invoke(state, "delete", "configmap", "settings", "--wait=nope")
    assert code == 2
    assert 'invalid argument "nope" for "--wait" flag: want true or false' in err
    assert node.node.objects.get("ConfigMap", "default", "settings") is not None


def test_describe_shows_the_daemons_node_and_the_pods_events(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    running(node, "web")
    code, out, _ = invoke(state, "describe", "pod", "web")
    assert code == 0
    assert "Node:             daemon-node" in out
    assert "kubelet, daemon-node" in out
    assert "Started container app" in out


def test_get_of_several_types_shows_a_table_each_with_kind_prefixed_names(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    """``get pods,cm`` as kubectl shows it; a type it does not know is named alone."""
    pod = POD.replace("NS", "default")
    invoke(state, "apply", "-f", write(tmp_path, "app.yaml", CONFIG + "---\n" + pod))
    code, out, err = invoke(state, "get", "pods,cm")
    assert code == 0, err
    names = [line.split()[0] for line in out.splitlines() if line and not line.startswith("NAME")]
    assert names == ["pod/web", "configmap/settings"]
    assert invoke(state, "get", "pods,cm", "-o", "name")[1].split() == [
        "pod/web",
        "configmap/settings",
    ]
    code, _, err = invoke(state, "get", "pods,sevrices")
    assert (code, err.strip()) == (1, 'error: the server doesn\'t have a resource type "sevrices"')
    code, _, err = invoke(state, "get", "pods,cm", "web")
    assert code == 1
    assert "by name across several types" in err


def test_without_a_daemon_get_says_so_in_one_line_and_reads_docker(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[object] = []

    def no_pods(node: object) -> list[Pod]:
        read.append(node)
        return []

    monkeypatch.setattr(InProcessNode, "read_pods", no_pods)
    code, out, err = invoke(state, "get", "pods")
    assert (code, out) == (0, "")
    assert err.splitlines() == [
        f"no node daemon for state dir {state}: reading Docker directly",
        "No resources found in default namespace.",
    ]
    assert len(read) == 1


def test_without_a_daemon_get_configmaps_reads_the_objects_it_kept(state: Path) -> None:
    kept = ObjectStore(directory=state / "objects")
    kept.put(load_manifests_text(CONFIG + "---\n" + SECRET, node_name="n"), source="api")
    code, out, err = invoke(state, "get", "cm")
    assert code == 0
    assert err == f"no node daemon for state dir {state}: reading the objects it kept\n"
    assert [line.split()[:2] for line in out.splitlines()] == [["NAME", "DATA"], ["settings", "2"]]
    assert invoke(state, "get", "cm", "--no-headers")[1].split()[:2] == ["settings", "2"]
    code, out, _ = invoke(state, "get", "secrets", "-o", "yaml")
    assert "hunter2" not in out
    assert "db" in out


def test_without_a_daemon_get_services_reads_the_kept_ones_and_endpoints_say_why_not(
    state: Path,
) -> None:
    kept = ObjectStore(directory=state / "objects")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.10",
            "selector": {"app": "web"},
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}],
        },
    }
    kept.put_object(service, source="api")
    code, out, err = invoke(state, "get", "svc")
    assert (code, err) == (
        0,
        f"no node daemon for state dir {state}: reading the objects it kept\n",
    )
    header, row = out.splitlines()
    assert header.split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert row.split()[:5] == ["web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP"]
    code, _, err = invoke(state, "get", "endpoints")
    assert code == 1
    assert "endpoints follow the pods of a running node daemon" in err


def test_a_daemons_stale_socket_means_no_daemon(state: Path) -> None:
    import socket

    state.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(state / "api.sock"))
    stale.close()
    code, _, err = invoke(state, "get", "cm")
    assert code == 0
    assert err.startswith(f"no node daemon for state dir {state}")


# -- run beside a daemon ---------------------------------------------------------------------


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The run sessions ``run`` would start (nothing runs)."""
    seen: list[Any] = []

    async def record(self: Any, manifests: Any) -> list[Any]:
        seen.append((self, list(manifests.pods)))
        return []

    monkeypatch.setattr(run_command._Session, "run", record)
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    return seen


def test_run_takes_the_daemons_node_and_network_unless_told_otherwise(
    tmp_path: Path, state: Path, node: Daemon, sessions: list[Any]
) -> None:
    path = write(tmp_path, "job.yaml", POD.replace("NS", "default").replace("8080", "8081"))
    code, _, err = invoke(state, "run", path, "--state-dir", str(state))
    assert code == 0, err
    session, _ = sessions[0]
    assert session.config.node_name == "daemon-node"
    assert session.config.owner.startswith("run-")
    assert session.node.pod_security == "privileged"
    code, _, err = invoke(state, "run", path, "--state-dir", str(state), "--node-name", "mine")
    assert sessions[1][0].config.node_name == "mine"


def test_run_says_in_one_line_that_it_leaves_a_service_to_serve(
    tmp_path: Path, state: Path, sessions: list[Any]
) -> None:
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n"
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n"
        "  containers: [{name: c, image: busybox:1.35}]\n"
    )
    path = write(tmp_path, "app.yaml", service + "---\n" + pod)
    code, _, err = invoke(state, "run", path, "--state-dir", str(state))
    assert code == 0, err
    said = [line for line in err.splitlines() if "service/web" in line]
    assert len(said) == 1
    assert "needs `asynckubelet serve`" in said[0]
    assert len(sessions[0][1]) == 1


def test_run_gives_its_pods_uids_of_their_own(
    tmp_path: Path, state: Path, node: Daemon, sessions: list[Any]
) -> None:
    path = write(tmp_path, "job.yaml", POD.replace("NS", "default").replace("8080", "8081"))
    invoke(state, "run", path, "--state-dir", str(state))
    invoke(state, "run", path, "--state-dir", str(state))
    uids = {s[1][0].metadata.uid for s in sessions}
    assert len(uids) == 2
    assert pod_uid(node_name="daemon-node", namespace="default", name="web") not in uids


def test_run_refuses_a_host_port_a_daemon_pod_holds(
    tmp_path: Path, state: Path, node: Daemon, sessions: list[Any]
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    running(node, "web")
    clash = POD.replace("NS", "default").replace("name: web", "name: clash")
    code, _, err = invoke(
        state, "run", write(tmp_path, "clash.yaml", clash), "--state-dir", str(state)
    )
    assert code == 1
    assert err.startswith("pod/clash: NodePorts: Pod was rejected: Predicate NodePorts failed")
    assert sessions == []


def test_get_through_a_daemon_imports_no_kubernetes_models_nor_http_stack(
    tmp_path: Path, state: Path, node: Daemon
) -> None:
    """What keeps ``get`` fast: the table comes printed, nothing is typed on this side."""
    import subprocess
    import sys

    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    script = (
        "import sys\n"
        "from asynckubelet.cli.app import app\n"
        "try:\n"
        "    app(['get', 'pods', '--state-dir', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = {'lightkube', 'aiohttp', 'aiodocker'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    repo = Path(__file__).resolve().parent.parent
    found = subprocess.run(
        [sys.executable, "-c", script, str(state)],
        capture_output=True,
        text=True,
        cwd=repo,
        check=True,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
    )
    lines = found.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "READY"]
    assert lines[-1] == "[]"


# -- the fast path of get --------------------------------------------------------------------


def test_the_fast_path_prints_what_the_command_prints(
    tmp_path: Path, state: Path, node: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    invoke(state, "apply", "-f", write(tmp_path, "web.yaml", POD.replace("NS", "default")))
    running(node, "web")
    slow = invoke(state, "get", "pods", "-o", "wide")[1]
    assert get_output.through_daemon(["get", "pods", "-o", "wide", "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:4] == slow.splitlines()[1].split()[:4]
    assert get_output.through_daemon(["get", "pods", "nope", "--state-dir", str(state)]) == 1
    assert capsys.readouterr().err == 'Error from server (NotFound): pods "nope" not found\n'


def test_the_fast_path_leaves_a_node_without_daemon_to_the_command_line(state: Path) -> None:
    assert get_output.through_daemon(["get", "pods", "--state-dir", str(state)]) is None
