"""``get -o jsonpath=...``, ``jsonpath-file``, ``jsonpath-as-json``, ``custom-columns`` and
``custom-columns-file``: what is printed from the objects the node API returns, and
kubectl's words for every template it would refuse."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from typer.testing import CliRunner

from asynckubelet.cli.commands import get as get_command
from asynckubelet.cli.commands import get_args
from asynckubelet.cli.commands.get_output import show
from asynckubelet.kubectl import columns

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI

app_module = importlib.import_module("asynckubelet.cli.app")


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}, {"name": "d", "image": "nginx"}]
        },
        "status": {"phase": "Running"},
    }


class Objects:
    """The node API's reading side, over objects held in memory."""

    def __init__(self, **by_plural: list[dict[str, Any]]) -> None:
        self.by_plural = by_plural

    def list(self, plural: str, where: str | None, *, selector: str | None = None) -> Any:
        return [dict(o) for o in self.by_plural.get(plural, [])]

    def get(self, plural: str, namespace: str, name: str) -> Any:
        return next(dict(o) for o in self.by_plural[plural] if o["metadata"]["name"] == name)


PODS = Objects(pods=[_pod("web", app="web"), _pod("db")])


def _options(output: str, **more: Any) -> dict[str, Any]:
    return {
        "plural": "pods",
        "name": None,
        "namespace": "default",
        "all_namespaces": False,
        "output": output,
        "watch": False,
        "no_headers": False,
        "selector": None,
        "show_labels": False,
        "allow_missing_template_keys": "true",
        **more,
    }


def _printed(capsys: pytest.CaptureFixture[str], api: Any, options: dict[str, Any]) -> str:
    show(cast("NodeAPI", api), options)
    return capsys.readouterr().out


def test_jsonpath_of_a_list_get_has_the_list_as_its_root(capsys: Any) -> None:
    out = _printed(capsys, PODS, _options("jsonpath={.kind} {.items[*].metadata.name}"))
    assert out == "List web db"


def test_jsonpath_of_a_named_get_has_the_object_as_its_root(capsys: Any) -> None:
    out = _printed(capsys, PODS, _options("jsonpath={.kind}/{.metadata.name}", name="web"))
    assert out == "Pod/web"


def test_jsonpath_range_prints_a_line_per_pod(capsys: Any) -> None:
    template = (
        'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.spec.containers[*].image}{"\\n"}{end}'
    )
    assert _printed(capsys, PODS, _options(template)) == "web\tbusybox nginx\ndb\tbusybox nginx\n"


def test_jsonpath_file_reads_the_template_from_the_file(capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonpath"
    path.write_text("{.items[0].metadata.name}")
    assert _printed(capsys, PODS, _options(f"jsonpath-file={path}")) == "web"


def test_jsonpath_as_json_prints_the_results_as_an_array(capsys: Any) -> None:
    out = _printed(capsys, PODS, _options("jsonpath-as-json={.items[*].metadata.name}"))
    assert out == '[\n    "web",\n    "db"\n]\n'


def test_secret_values_never_reach_a_template(capsys: Any) -> None:
    secret = {"metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"}}
    api = Objects(secrets=[secret])
    out = _printed(capsys, api, _options("jsonpath={.items[*].data}{..k}", plural="secrets"))
    assert "c2VjcmV0" not in out


def test_a_missing_key_prints_nothing_by_default_and_fails_when_not_allowed(capsys: Any) -> None:
    assert _printed(capsys, PODS, _options("jsonpath={.items[*].nope}")) == ""
    strict = _options("jsonpath={.items[*].nope}", allow_missing_template_keys="false")
    with pytest.raises(get_args.Refused) as refused:
        show(cast("NodeAPI", PODS), strict)
    assert str(refused.value).startswith(
        'error executing jsonpath "{.items[*].nope}": Error executing template: nope is not found.'
    )


def test_custom_columns_print_headers_cells_and_none(capsys: Any) -> None:
    spec = (
        "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app,"
        "IMAGES:.spec.containers[*].image"
    )
    assert _printed(capsys, PODS, _options(spec)) == (
        "NAME   APP      IMAGES\nweb    web      busybox,nginx\ndb     <none>   busybox,nginx\n"
    )


def test_custom_columns_no_headers_leaves_out_the_header(capsys: Any) -> None:
    out = _printed(capsys, PODS, _options("custom-columns=N:{.metadata.name}", no_headers=True))
    assert out == "web\ndb\n"


def test_custom_columns_file_reads_headers_and_paths(capsys: Any, tmp_path: Path) -> None:
    path = tmp_path / "cols"
    path.write_text("NAME   PHASE\nmetadata.name   {.status.phase}\n")
    out = _printed(capsys, PODS, _options(f"custom-columns-file={path}"))
    assert out == "NAME   PHASE\nweb    Running\ndb     Running\n"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("jsonpath", "template format specified but no template given"),
        ("jsonpath=", "template format specified but no template given"),
        ("jsonpath={.a", "error parsing jsonpath {.a, unclosed action"),
        (
            "jsonpath={*}",
            "error parsing jsonpath {*}, unrecognized character in action: U+002A '*'",
        ),
        ("custom-columns", "custom-columns format specified but no custom columns given"),
        (
            "custom-columns=NAME",
            "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>",
        ),
        (
            "custom-columns=N:{.a}}",
            "unexpected path string, expected a 'name1.name2' or "
            "'.name1.name2' or '{name1.name2}' or '{.name1.name2}'",
        ),
        (
            "jsonpath-file=/nonexistent/t",
            "error reading --template /nonexistent/t, open "
            "/nonexistent/t: no such file or directory",
        ),
        (
            "go-template={{.a}}",
            'unable to match a printer suitable for the output format "go-template={{.a}}", '
            "allowed formats are: custom-columns,custom-columns-file,json,jsonpath,"
            "jsonpath-as-json,jsonpath-file,name,wide,yaml",
        ),
    ],
)
def test_templates_kubectl_refuses_are_refused_in_its_words(output: str, message: str) -> None:
    with pytest.raises(get_args.Refused) as refused:
        get_args.check_output(output)
    assert str(refused.value) == message


def test_a_custom_columns_file_without_a_spec_line_is_refused() -> None:
    with pytest.raises(columns.ColumnsError, match="missing spec line"):
        columns.from_file_text("NAME\n")
    with pytest.raises(columns.ColumnsError, match=r"number of headers \(2\)"):
        columns.from_file_text("A B\n.a\n")


def test_a_template_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    with pytest.raises(get_args.Refused, match="larger than"):
        get_args.check_output(f"jsonpath-file={path}")


@pytest.mark.parametrize(
    ("path", "template"),
    [(".a.b", "{.a.b}"), ("a.b", "{.a.b}"), ("{a.b}", "{.a.b}"), ("{.a[*].b}", "{.a[*].b}")],
)
def test_column_paths_are_relaxed_as_kubectl_relaxes_them(path: str, template: str) -> None:
    assert columns.relaxed(path) == template


def test_cells_are_gos_sprint_of_the_values_with_terminal_escapes_made_harmless() -> None:
    obj = {"m": {"b": [1, 2.5], "a": None}, "s": "\x1b[31mred\r"}
    out = columns.render([("M", "{.m}"), ("S", "{.s}")], obj)
    assert out == "M" + " " * 24 + "S\nmap[a:<nil> b:[1 2.5]]   ^[[31mred\\r\n"


def test_the_tab_writer_keeps_kubectls_minimum_width() -> None:
    assert columns.tabwrite("A\tB\nx\ty\n") == "A     B\nx     y\n"


def test_the_fast_path_serves_template_outputs_and_reads_allow_missing_keys() -> None:
    argv = ["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]
    options = get_args.plain([*argv, "--allow-missing-template-keys=false"])
    assert options is not None
    assert options["output"] == "jsonpath={.items[*].metadata.name}"
    assert options["allow_missing_template_keys"] == "false"
    assert get_args.plain([*argv, "--allow-missing-template-keys"]) is None


@pytest.fixture
def node_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def objects(*args: Any, **kwargs: Any) -> Iterator[Objects]:
        yield PODS

    monkeypatch.setattr(get_command, "node_api", objects)


def test_the_command_prints_a_jsonpath(node_pods: None) -> None:
    result = CliRunner().invoke(
        app_module.app, ["get", "pods", "-o", "jsonpath={.items[1].metadata.name}"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == "db"


def test_the_command_reports_a_failing_template_and_exits_1(node_pods: None) -> None:
    argv = ["get", "pods", "-o", "jsonpath={.nope}", "--allow-missing-template-keys"]
    assert CliRunner().invoke(app_module.app, argv).exit_code == 0
    result = CliRunner().invoke(app_module.app, [*argv[:-1], "--allow-missing-template-keys=false"])
    assert result.exit_code == 1
    assert 'error executing jsonpath "{.nope}"' in result.output


def test_the_command_refuses_a_flag_value_that_is_not_a_boolean(node_pods: None) -> None:
    argv = ["get", "pods", "-o", "jsonpath={.a}", "--allow-missing-template-keys=maybe"]
    result = CliRunner().invoke(app_module.app, argv)
    assert result.exit_code == 1
    assert 'invalid argument "maybe" for "--allow-missing-template-keys" flag' in result.output
