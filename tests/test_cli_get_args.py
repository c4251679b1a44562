"""``get``'s options declared once and read alike: the plain forms the entry point serves
before the command-line framework loads, every other form left to the ``get`` command,
whose options are those same declarations and which makes the same request of them."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import pytest
import typer.core
from typer.testing import CliRunner

from asynckubelet.cli.commands import get as get_command
from asynckubelet.cli.commands import get_args

app_module = importlib.import_module("asynckubelet.cli.app")
LOGGING = {"verbose", "log_level", "log_format", "help"}
"""The options of ``get`` the plain reading leaves to the command line (``--help`` too)."""


@pytest.mark.parametrize(
    ("argv", "served"),
    [
        (["get", "pods"], {"plural": "pods", "name": None, "output": None}),
        (["get", "po", "web", "-n", "team"], {"name": "web", "namespace": "team"}),
        (["get", "pod/web", "-owide"], {"name": "web", "output": "wide"}),
        (["get", "cm", "-A", "--output=json"], {"plural": "configmaps", "all_namespaces": True}),
        (["get", "secrets", "--state-dir", "/s", "-H", "tcp://x:2376"], {"state_dir": "/s"}),
        (["get", "pods", "--no-headers"], {"no_headers": True, "output": None}),
    ],
)
def test_the_plain_forms_of_get_are_served_without_the_framework(
    argv: list[str], served: dict[str, Any]
) -> None:
    options = get_args.plain(argv)
    assert options is not None
    assert {k: options[k] for k in served} == served


@pytest.mark.parametrize(
    "argv",
    [
        ["get"],
        ["get", "pods", "--help"],
        ["get", "pods", "-v"],
        ["get", "pods", "--log-level", "debug"],
        ["get", "pods", "-o", "table"],
        ["get", "nodes"],
        ["get", "pods", "web", "-A"],
        ["get", "pods", "-n"],
        ["--log-level", "debug", "get", "pods"],
        ["describe", "pod", "web"],
    ],
)
def test_every_other_form_is_left_to_the_full_command_line(argv: list[str]) -> None:
    assert get_args.plain(argv) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "pods", "a", "b"],
        ["get", "pod/a", "pod/b"],
        ["get", "pod/a", "b"],
        ["get", "svc,ep"],
        ["get", "pods", "-Aw"],
        ["get", "pods", "--watch=yes"],
        ["get", "pods", "--", "web"],
        ["get", "pods", "-l", "app=web", "web"],
        ["get", "pods/"],
    ],
)
def test_several_names_or_types_and_forms_the_flags_do_not_cover_are_left_too(
    argv: list[str],
) -> None:
    assert get_args.plain(argv) is None


def _get_options() -> dict[str, typer.core.TyperOption]:
    command = app_module.load("get", app_module.TREE["get"])
    return {p.name: p for p in command.params if isinstance(p, typer.core.TyperOption) and p.name}


def test_the_get_commands_options_are_the_flags_declared_once() -> None:
    options = _get_options()
    assert set(options) - LOGGING == {flag.dest for flag in get_args.FLAGS}
    for flag in get_args.FLAGS:
        option = options[flag.dest]
        assert sorted(option.opts) == sorted(flag.names), flag.dest
        assert option.is_flag is not flag.takes_value, flag.dest
        assert option.envvar == flag.envvar, flag.dest
        assert option.help == flag.help, flag.dest
        assert option.default == flag.default, flag.dest


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the ``get`` command hands its printer, with no node asked."""
    seen: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def no_node(*args: Any, **kwargs: Any) -> Iterator[object]:
        yield object()

    monkeypatch.setattr(get_command, "node_api", no_node)
    monkeypatch.setattr(get_command, "show", lambda api, request: seen.append(request))
    return seen


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "pods"],
        ["get", "po", "web", "-n", "team"],
        ["get", "pod/web", "-owide", "--namespace=x"],
        ["get", "cm", "-A", "--output=json", "--no-headers"],
        ["get", "pods", "-nteam", "-lapp=web", "--show-labels"],
        ["get", "deploy", "-w", "--selector", "tier in (a,b)"],
        ["get", "all", "-o", "name"],
        ["get", "pods", "web", "-l", ""],
    ],
)
def test_the_command_makes_the_request_the_plain_reading_makes(
    argv: list[str], requests: list[dict[str, Any]]
) -> None:
    result = CliRunner().invoke(app_module.app, argv)
    assert result.exit_code == 0, result.output
    plain = get_args.plain(argv)
    assert plain is not None
    node = {"state_dir", "node_name", "docker_host", "instance"}
    assert requests == [{k: v for k, v in plain.items() if k not in node}]


def test_a_flag_is_read_only() -> None:
    with pytest.raises(AttributeError, match="read-only"):
        get_args.NAMESPACE.default = "kube-system"
    assert get_args.NAMESPACE.default == "default"


def test_names_in_type_slash_name_form_share_their_type() -> None:
    assert get_args.same_type("pod/a", ["po/b"], selector=None) == ("pod", ["a", "b"])
    assert get_args.same_type("pods", ["a", "b"], selector=None) == ("pods", ["a", "b"])


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (
            lambda: get_args.same_type("pod/a", ["b"], selector=None),
            "there is no need to specify a resource type as a separate argument when "
            "passing arguments in resource/name form",
        ),
        (
            lambda: get_args.same_type("pod/a", ["svc/b"], selector=None),
            "a resource cannot be retrieved by name across several types",
        ),
        (
            lambda: get_args.same_type("pods", ["a"], selector="app=web"),
            "name cannot be provided when a selector is specified",
        ),
        (
            lambda: get_args.single("pods", "a", {"all_namespaces": True}),
            "a resource cannot be retrieved by name across all namespaces",
        ),
        (
            lambda: get_args.single("all", "a", {}),
            'a resource cannot be retrieved by name across all types ("all")',
        ),
        (
            lambda: get_args.single("pods", None, {"output": "table"}),
            'unable to match a printer suitable for the output format "table", '
            "allowed formats are: custom-columns,custom-columns-file,json,jsonpath,"
            "jsonpath-as-json,jsonpath-file,name,wide,yaml",
        ),
        (
            lambda: get_args.single("nodes/x", None, {}),
            'the server doesn\'t have a resource type "nodes/x"',
        ),
    ],
)
def test_arguments_get_refuses_are_refused_in_kubectls_words(check: Any, message: str) -> None:
    with pytest.raises(get_args.Refused) as refused:
        check()
    assert str(refused.value) == message
