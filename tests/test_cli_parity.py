"""Every command fails as kubectl does, in one line, and prints what kubectl prints: a
table of typos and bad input against a node daemon on a fake engine (and without one),
``-f`` folders with ``-R``, ``get -w``, ``logs --all-containers``, ``--version`` and the
help's value names."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
import typer.main
from daemon_helpers import Daemon, invoke, running_daemon
from typer.testing import CliRunner

from asynckubelet import __version__, errors
from asynckubelet.cli.app import app
from asynckubelet.cli.commands import get_output

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: a, image: busybox:1.35}
  - {name: b, image: busybox:1.35}
"""
CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""
INVALID = """\
apiVersion: v1
kind: Pod
metadata: {name: Web_1}
spec:
  containers:
  - {name: a}
"""
NOT_FOUND = 'Error from server (NotFound): pods "nope" not found'
NOT_VALID = "error: container zzz is not valid for pod web: choose one of: [a b]"


def apply_text(state: Path, tmp_path: Path, name: str, text: str) -> None:
    """Apply ``text`` from the file ``<name>.yaml``."""
    (tmp_path / f"{name}.yaml").write_text(text)
    invoke(state, "apply", "-f", str(tmp_path / f"{name}.yaml"))


def apply_pods(state: Path, tmp_path: Path, *names: str) -> None:
    """Apply a pod like ``web`` under each of ``names``."""
    for name in names:
        apply_text(state, tmp_path, name, POD.replace("name: web", f"name: {name}"))


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path, tmp_path: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="n1", pod_security="baseline") as d:
        (tmp_path / "web.yaml").write_text(POD)
        invoke(state, "apply", "-f", str(tmp_path / "web.yaml"))
        d.portal.call(lambda: d.node.wait("default", "web", "Running", timeout=10))
        yield d


def files(tmp_path: Path) -> dict[str, str]:
    """Inputs of the table: a missing file, an empty one, a folder without manifests, a
    malformed YAML, an invalid pod."""
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    (tmp_path / "nomanifests").mkdir()
    (tmp_path / "nomanifests" / "notes.txt").write_text("kind: Pod\n")
    (tmp_path / "bad.yaml").write_text("foo: [\n")
    (tmp_path / "invalid.yaml").write_text(INVALID)
    return {
        "MISSING": str(tmp_path / "missing.yaml"),
        "EMPTY": str(tmp_path / "empty.yaml"),
        "FOLDER": str(tmp_path / "nomanifests"),
        "BAD": str(tmp_path / "bad.yaml"),
        "INVALID": str(tmp_path / "invalid.yaml"),
    }


FAILURES = [
    (("get", "pod", "nope"), 1, [NOT_FOUND]),
    (("get", "pods/nope"), 1, [NOT_FOUND]),
    (("get", "pods", "nope", "-o", "yaml"), 1, [NOT_FOUND]),
    (
        ("get", "pods", "-o", "bogus"),
        1,
        [
            'error: unable to match a printer suitable for the output format "bogus", allowed '
            "formats are: custom-columns,custom-columns-file,json,jsonpath,jsonpath-as-json,"
            "jsonpath-file,name,wide,yaml"
        ],
    ),
    (("get", "foo"), 1, ['error: the server doesn\'t have a resource type "foo"']),
    (
        ("get", "pod", "web", "-A"),
        1,
        ["error: a resource cannot be retrieved by name across all namespaces"],
    ),
    (("describe", "pod", "nope"), 1, [NOT_FOUND]),
    (
        ("describe", "pod", "web", "-n", "nons"),
        1,
        ['Error from server (NotFound): pods "web" not found'],
    ),
    (("describe", "node", "x"), 1, ['error: the server doesn\'t have a resource type "node"']),
    (("describe", "pod/nope"), 1, [NOT_FOUND]),
    (
        ("describe", "pod/web", "web"),
        1,
        ["error: arguments in resource/name form must have a single resource and name"],
    ),
    (("logs", "nope"), 1, [NOT_FOUND]),
    (("logs", "pod/nope"), 1, [NOT_FOUND]),
    (("logs", "foo/x"), 1, ['error: the server doesn\'t have a resource type "foo"']),
    (
        ("logs", "cm/settings"),
        1,
        [
            "error: cannot get the logs from *v1.ConfigMap: selector for *v1.ConfigMap not "
            "implemented"
        ],
    ),
    (
        ("exec", "secret/x", "--", "true"),
        1,
        ["error: cannot attach to *v1.Secret: selector for *v1.Secret not implemented"],
    ),
    (("exec", "po/nope", "--", "true"), 1, [NOT_FOUND]),
    (("logs", "web", "-c", "zzz"), 1, [NOT_VALID]),
    (("logs", "web", "-n", "nons"), 1, ['Error from server (NotFound): pods "web" not found']),
    (
        ("logs", "web", "-c", "a", "-p"),
        1,
        [
            'Error from server (BadRequest): previous terminated container "a" in pod "web" not '
            "found"
        ],
    ),
    (
        ("logs", "web", "--all-containers", "-c", "a"),
        1,
        ["error: --all-containers=true should not be specified with container name a"],
    ),
    (("exec", "nope", "--", "true"), 1, [NOT_FOUND]),
    (("exec", "web", "-c", "zzz", "--", "true"), 1, [NOT_VALID]),
    (("delete", "pod", "nope"), 1, [NOT_FOUND]),
    (("apply", "-f", "MISSING"), 1, ['error: the path "MISSING" does not exist']),
    (("apply", "-f", "EMPTY"), 1, ["error: no objects passed to apply"]),
    (
        ("apply", "-f", "FOLDER"),
        1,
        ["error: error reading [FOLDER]: recognized file extensions are [.json .yaml .yml]"],
    ),
    (
        ("apply", "-f", "BAD"),
        1,
        [
            "error: BAD: <document>: Invalid YAML: line 2, column 1: did not find expected node "
            "content"
        ],
    ),
    (
        ("apply", "-f", "INVALID"),
        1,
        [
            'error: INVALID[0]: metadata.name: Invalid value: "Web_1": a lowercase RFC 1123 '
            "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "error: INVALID[0]: spec.containers[0].image: Required value",
        ],
    ),
    (("delete", "-f", "MISSING"), 1, ['error: the path "MISSING" does not exist']),
    (("delete", "-f", "EMPTY"), 1, ["error: no objects passed to delete"]),
    (("run", "MISSING"), 1, ['error: the path "MISSING" does not exist']),
    (
        ("get", "pods", "--bogus"),
        2,
        ["error: unknown flag: --bogus; see 'asynckubelet get --help'"],
    ),
    (
        ("gte", "pods"),
        2,
        ["error: unknown command \"gte\" (did you mean 'get'?); see 'asynckubelet --help'"],
    ),
    (("logs",), 2, ["error: missing argument 'POD | TYPE/NAME'; see 'asynckubelet logs --help'"]),
]


@pytest.mark.parametrize(("args", "code", "lines"), FAILURES)
def test_every_failure_is_kubectls_line_and_exit_code(
    args: tuple[str, ...],
    code: int,
    lines: list[str],
    node: Daemon,
    state: Path,
    tmp_path: Path,
) -> None:
    named = files(tmp_path)
    args = tuple(named.get(a, a) for a in args)
    expected = []
    for line in lines:
        for placeholder, path in named.items():
            line = line.replace(placeholder, path)
        expected.append(line)
    result, out, err = invoke(state, *args)
    assert (result, err.splitlines()) == (code, expected)
    assert out == ""


def test_type_slash_name_names_the_pod_as_its_name_does(node: Daemon, state: Path) -> None:
    assert invoke(state, "describe", "pod/web") == invoke(state, "describe", "pod", "web")
    assert invoke(state, "logs", "pods/web", "-c", "a") == invoke(state, "logs", "web", "-c", "a")
    code, out, _ = invoke(state, "describe", "pod/web")
    assert code == 0
    assert out.startswith("Name:")


def test_describe_without_a_name_describes_every_pod_of_the_namespace(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    apply_pods(state, tmp_path, "web2")
    code, out, err = invoke(state, "describe", "pods")
    assert (code, err) == (0, "")
    names = [line.split()[1] for line in out.splitlines() if line.startswith("Name:")]
    assert names == ["web", "web2"]
    first, second = out.split("\n\n\nName:")
    assert first.startswith("Name:             web\n")
    assert second.startswith("             web2\n")
    assert invoke(state, "describe", "pods", "-n", "empty") == (
        0,
        "",
        "No resources found in empty namespace.\n",
    )


def test_without_a_daemon_or_an_engine_each_command_says_so_in_one_line(state: Path) -> None:
    env = {"ASYNCKUBELET_DOCKER_HOST": f"unix://{state}/no-engine.sock"}
    for args in (
        ("get", "pods"),
        ("describe", "pod", "web"),
        ("logs", "web"),
        ("delete", "pod", "web"),
    ):
        code, out, err = invoke(state, *args, env=env)
        notice, failure = err.splitlines()
        assert notice.startswith(f"no node daemon for state dir {state}: ")
        assert failure == (
            f"error: cannot reach the Docker engine at unix://{state}/no-engine.sock; "
            "is dockerd running?"
        ), args
        assert (code, out) == (1, "")


@pytest.fixture
def dying_daemon(state: Path) -> Iterator[Path]:
    """A daemon that answers the connection, then dies before it answers the request."""
    state.mkdir(parents=True)
    path = state / "api.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.parametrize(
    "args",
    [
        ("get", "pods", "-o", "wide"),
        ("describe", "pod", "web"),
        ("logs", "web"),
        ("delete", "pod", "web"),
    ],
)
def test_a_daemon_that_dies_mid_way_is_one_error_line(
    args: tuple[str, ...], state: Path, dying_daemon: Path
) -> None:
    code, out, err = invoke(state, *args)
    (line,) = err.splitlines()
    assert line.startswith("error: ")
    assert f"node daemon at {dying_daemon}" in line
    assert (code, out) == (1, "")


# -- -f folders and -R -----------------------------------------------------------------------


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "manifests"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG)
    (root / "README.md").write_text("kind: Pod\n")
    (root / "sub" / "web.yml").write_text(POD.replace("name: web", "name: deep"))
    (root / "sub" / "deeper" / "other.json").write_text(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}'
    )
    return root


def test_apply_f_of_a_folder_reads_its_manifests_and_R_its_sub_folders_too(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    root = tree(tmp_path)
    assert invoke(state, "apply", "-f", str(root))[1] == "configmap/settings created\n"
    code, out, _ = invoke(state, "apply", "-f", str(root), "-R")
    assert (code, out.splitlines()) == (
        0,
        ["configmap/settings unchanged", "configmap/other created", "pod/deep created"],
    )


def test_delete_f_R_deletes_what_the_folder_tree_holds(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    root = tree(tmp_path)
    invoke(state, "apply", "-R", "-f", str(root))
    code, out, err = invoke(state, "delete", "--recursive", "-f", str(root), "--grace-period", "0")
    assert (code, err) == (0, "")
    assert sorted(out.splitlines()) == [
        'configmap "other" deleted',
        'configmap "settings" deleted',
        'pod "deep" deleted',
    ]


def test_get_takes_several_names_in_one_table_and_says_which_are_missing(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    apply_pods(state, tmp_path, "web2")
    code, out, err = invoke(state, "get", "pods", "web", "web2")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["NAME", "READY"]
    assert [r.split()[0] for r in rows] == ["web", "web2"]
    code, out, err = invoke(state, "get", "pods", "web", "nope")
    assert code == 1
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "web"]
    assert err == NOT_FOUND + "\n"
    assert invoke(state, "get", "pod/web", "pod/web2", "-o", "name") == (
        0,
        "pod/web\npod/web2\n",
        "",
    )
    code, out, _ = invoke(state, "get", "pods", "web", "web2", "-o", "yaml")
    assert code == 0
    assert out.startswith("apiVersion: v1\nitems:\n")
    assert out.count("\n  kind: Pod\n") == 2
    assert invoke(state, "get", "pod/web", "cm/settings")[2] == (
        "error: a resource cannot be retrieved by name across several types\n"
    )


def test_delete_takes_several_names_and_type_slash_name_forms(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    apply_pods(state, tmp_path, "web2", "web3")
    code, out, err = invoke(state, "delete", "pod", "web", "web2", "--grace-period", "0")
    assert (code, out, err) == (0, 'pod "web" deleted\npod "web2" deleted\n', "")
    code, out, err = invoke(state, "delete", "pod/web3", "cm/nope", "--grace-period", "0")
    assert (code, out) == (1, 'pod "web3" deleted\n')
    assert err == 'Error from server (NotFound): configmaps "nope" not found\n'
    code, out, err = invoke(state, "delete", "pod")
    assert (code, out) == (1, "")
    assert err == "error: resource(s) were provided, but no name was specified\n"


def test_delete_all_deletes_every_object_of_the_type_in_the_namespace(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    apply_pods(state, tmp_path, "web2")
    apply_text(state, tmp_path, "config", CONFIG)
    code, out, err = invoke(state, "delete", "pods", "--all", "--grace-period", "0")
    assert (code, out, err) == (0, 'pod "web" deleted\npod "web2" deleted\n', "")
    assert invoke(state, "get", "configmaps", "-o", "name")[1] == "configmap/settings\n"
    assert invoke(state, "delete", "pods", "--all", "-n", "empty") == (
        0,
        "",
        "No resources found in empty namespace.\n",
    )
    code, _, err = invoke(state, "delete", "pod", "web", "--all")
    assert code == 2
    assert "--all takes a resource type alone" in err


def test_a_folder_whose_manifests_are_all_deeper_needs_R(
    node: Daemon, state: Path, tmp_path: Path
) -> None:
    root = tmp_path / "only-deeper"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "c.yaml").write_text(CONFIG)
    code, _, err = invoke(state, "apply", "-f", str(root))
    assert (code, err) == (
        1,
        f"error: error reading [{root}]: recognized file extensions are [.json .yaml .yml]\n",
    )
    assert invoke(state, "apply", "-f", str(root), "-R")[1] == "configmap/settings created\n"


# -- get -w ----------------------------------------------------------------------------------


class ScriptedWatch:
    """A client whose watches answer scripted events."""

    def __init__(self, *rounds: list[dict[str, Any]]) -> None:
        self.rounds = list(rounds)

    def watch(self, namespace: str | None, *, name: str | None, table: bool) -> Iterator[Any]:
        yield from self.rounds.pop(0)


def row(name: str, status: str, namespace: str = "default") -> dict[str, Any]:
    from asynckubelet.kubectl.pods import POD_COLUMNS
    from asynckubelet.kubectl.tables import table

    cells = [name, "1/1", status, "0", "5s", "10.0.0.1", "n1", "<none>", "<none>"]
    return table(POD_COLUMNS, [(cells, {"name": name, "namespace": namespace})])


def event(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": body}


BOOKMARK = event("BOOKMARK", {"metadata": {"annotations": {"k8s.io/initial-events-end": "true"}}})


def watched(
    capsys: pytest.CaptureFixture[str], *rounds: list[dict[str, Any]], **options: Any
) -> tuple[list[str], BaseException]:
    client = cast("NodeAPI", ScriptedWatch(*rounds))
    with pytest.raises(errors.DaemonError) as caught:
        get_output.watch(
            client,
            "pods",
            None,
            where=options.get("where", "default"),
            output=options.get("output"),
        )
    return capsys.readouterr().out.splitlines(), caught.value


def test_a_watch_prints_the_pods_as_a_table_then_each_change_as_a_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines, ended = watched(
        capsys,
        [
            event("ADDED", row("web", "Running")),
            event("ADDED", row("db-0", "Running")),
            BOOKMARK,
            event("MODIFIED", row("db-0", "Terminating")),
            event("ADDED", row("x", "ContainerCreating")),
        ],
    )
    assert lines == [
        "NAME   READY   STATUS    RESTARTS   AGE",
        "web    1/1     Running   0          5s",
        "db-0   1/1     Running   0          5s",
        "db-0   1/1     Terminating   0          5s",
        "x      1/1     ContainerCreating   0          5s",
    ]
    assert str(ended) == "the node daemon ended the watch"


def test_a_watch_of_nothing_prints_the_header_with_the_first_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines, _ = watched(capsys, [BOOKMARK, event("ADDED", row("web", "Pending"))], output="wide")
    assert lines == [
        "NAME   READY   STATUS    RESTARTS   AGE   IP         NODE   NOMINATED NODE   "
        "READINESS GATES",
        "web    1/1     Pending   0          5s    10.0.0.1   n1     <none>           <none>",
    ]


def test_a_watch_of_every_namespace_starts_rows_with_the_namespace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines, _ = watched(
        capsys, [event("ADDED", row("web", "Running", "team")), BOOKMARK], where=None
    )
    assert lines == [
        "NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE",
        "team        web    1/1     Running   0          5s",
    ]


def test_an_expired_watch_starts_anew_without_a_second_header(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expired = event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "m"})
    lines, _ = watched(
        capsys,
        [event("ADDED", row("web", "Running")), BOOKMARK, expired],
        [event("ADDED", row("web", "Running")), BOOKMARK],
    )
    assert lines == [
        "NAME   READY   STATUS    RESTARTS   AGE",
        "web    1/1     Running   0          5s",
        "web    1/1     Running   0          5s",
    ]


def test_a_watch_error_other_than_expired_is_the_servers_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failure = event(
        "ERROR", {"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"}
    )
    _, ended = watched(capsys, [failure])
    assert (str(ended), getattr(ended, "reason", "")) == ("boom", "InternalError")


def test_a_watch_with_o_name_prints_one_line_per_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pod = {"metadata": {"name": "web", "namespace": "default"}}
    lines, _ = watched(
        capsys, [event("ADDED", pod), BOOKMARK, event("DELETED", pod)], output="name"
    )
    assert lines == ["pod/web", "pod/web"]


def test_get_w_through_the_daemon_sees_a_new_pod(node: Daemon, state: Path, tmp_path: Path) -> None:
    from asynckubelet.api.client import NodeClient

    client = NodeClient(state / "api.sock")
    events = client.watch("default", table=True)
    initial = []
    for item in events:
        if item["type"] == "BOOKMARK":
            break
        initial.append(item["object"]["rows"][0]["cells"][0])
    apply_pods(state, tmp_path, "db")
    later = next(item for item in events if item["object"]["rows"][0]["cells"][0] == "db")
    events.close()
    assert (initial, later["type"]) == (["web"], "ADDED")


def test_get_w_without_a_daemon_says_it_needs_one(state: Path) -> None:
    code, _, err = invoke(state, "get", "pods", "-w")
    assert code == 1
    assert err.startswith(f"error: no node daemon for state dir {state}: get --watch needs one")


# -- logs --all-containers, --version, help --------------------------------------------------


def test_logs_all_containers_prints_each_containers_output_in_order(
    node: Daemon, state: Path
) -> None:
    from asynckubelet.docker import LogLine

    for container in node.portal.call(node.docker.list_containers):
        name = (container.get("Labels") or {}).get("io.kubernetes.container.name")
        if name in ("a", "b"):
            node.docker.log_lines[container["Id"]] = [LogLine(stream="stdout", text=f"from {name}")]
    code, out, err = invoke(state, "logs", "web", "--all-containers")
    assert (code, out, err) == (0, "from a\nfrom b\n", "")
    code, out, err = invoke(state, "logs", "web")
    assert (out, err) == ("from a\n", 'Defaulted container "a" out of: a, b\n')


def test_logs_print_the_output_as_written_a_last_line_without_newline_included(
    node: Daemon, state: Path
) -> None:
    from asynckubelet.docker import LogLine

    long = "é" * 9000
    for container in node.portal.call(node.docker.list_containers):
        if (container.get("Labels") or {}).get("io.kubernetes.container.name") == "a":
            node.docker.log_lines[container["Id"]] = [
                LogLine(stream="stdout", text=long[:8000], newline=False),
                LogLine(stream="stdout", text=long[8000:]),
                LogLine(stream="stdout", text="done", newline=False),
            ]
    env = {"ASYNCKUBELET_STATE_DIR": str(state)}
    whole = CliRunner().invoke(app, ["logs", "web", "-c", "a"], env=env)
    cut = CliRunner().invoke(app, ["logs", "web", "-c", "a", "--limit-bytes", "5"], env=env)
    refused = CliRunner().invoke(app, ["logs", "web", "--limit-bytes", "-1"], env=env)
    assert (whole.exit_code, whole.stdout_bytes) == (0, (long + "\ndone").encode())
    assert (cut.exit_code, cut.stdout_bytes) == (0, long.encode()[:5])
    assert refused.exit_code == 2
    assert "--limit-bytes must be greater than 0" in refused.stderr


def test_version_prints_the_clients_and_with_a_daemon_the_servers_its_api_names(
    node: Daemon, state: Path
) -> None:
    assert invoke(state, "--version")[1] == f"asynckubelet {__version__}\n"
    assert invoke(state, "version")[1].splitlines() == [
        f"Client Version: v{__version__}",
        f"Server Version: v{__version__}",
    ]


def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, (*path, name))


def test_every_option_has_a_description_and_names_its_value_as_kubectl_does() -> None:
    root = typer.main.get_command(app)
    for path, command in walk(root, ("asynckubelet",)):
        for param in command.params:
            where = f"{' '.join(path)} {param.opts[0] if param.opts else param.name}"
            assert (getattr(param, "help", None) or "").strip(), where
            metavar = param.metavar
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                assert metavar == "", where
            else:
                assert metavar, where
                assert metavar == metavar.upper(), where
                assert not metavar.startswith("<"), where


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (
            ("logs",),
            [
                "(POD | TYPE/NAME)",
                "--tail",
                "LINES",
                "--container",
                "CONTAINER",
                "--all-containers",
            ],
        ),
        (("get",), ["get [OPTIONS] TYPE[/NAME] [NAME]...", "--output", "FORMAT", "--watch"]),
        (("apply",), ["--filename", "FILENAME", "--recursive"]),
    ],
)
def test_help_shows_value_names_and_no_python_types(
    command: tuple[str, ...], shown: list[str]
) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for word in shown:
        assert word in result.stdout, word
    for python_type in ("<str>", "<int>", "<bool>", "<float>", "<path>"):
        assert python_type not in result.stdout


def test_usage_lines_read_as_kubectl_s_without_braces() -> None:
    lines = {}
    for command in ("run", "logs", "exec", "get", "delete"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        lines[command] = next(line for line in result.stdout.splitlines() if "Usage:" in line)
        assert "{" not in lines[command], lines[command]
    assert "run [OPTIONS] FILE... " in lines["run"] + " "
    assert "logs [OPTIONS] (POD | TYPE/NAME) " in lines["logs"] + " "
    assert "exec [OPTIONS] (POD | TYPE/NAME) COMMAND... " in lines["exec"] + " "
    assert "delete [OPTIONS] [TYPE[/NAME]] [NAME]... " in lines["delete"] + " "


def test_a_command_s_help_paragraphs_wrap_to_the_terminal_not_to_the_source() -> None:
    root = typer.main.get_command(app)
    for path, command in walk(root, ("asynckubelet",)):
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph, (path, paragraph)
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80"})
    text = " ".join(result.stdout.split())
    assert "Always pods run until SIGINT/SIGTERM, which stops every pod" in text
    short = [line for line in result.stdout.splitlines() if line.strip() in {"until", "at once)."}]
    assert not short, short
