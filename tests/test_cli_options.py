"""Global options: --log-level and --log-format before or after the command, by flag or
``ASYNCKUBELET_*`` environment; the command's flag beats the one before it, which beats the
environment, which beats the default."""

from __future__ import annotations

import json
from typing import Any

import loguru
import pytest
from loguru import logger
from typer.testing import CliRunner

from asynckubelet.cli import logsetup, output
from asynckubelet.cli.app import app
from asynckubelet.cli.options import LogOptions


class FakeLogger:
    """Records what ``setup_logging`` configures instead of configuring loguru."""

    def __init__(self) -> None:
        self.added: list[tuple[Any, str]] = []

    def remove(self) -> None:
        self.added.clear()

    def enable(self, name: str) -> None:
        pass

    def add(self, sink: Any, *, level: str, **_: Any) -> None:
        self.added.append((sink, level))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLogger:
    recorder = FakeLogger()
    monkeypatch.setattr(loguru, "logger", recorder)
    monkeypatch.setattr(logsetup, "add_sink", recorder.add)
    return recorder


def configured(fake: FakeLogger, args: list[str], env: dict[str, str]) -> tuple[str, str]:
    # `get pods -o bogus` sets up logging, then fails as kubectl does (no printer for that
    # format) before any Docker call.
    result = CliRunner().invoke(app, args, env={"ASYNCKUBELET_STATE_DIR": "/nonexistent", **env})
    assert result.exit_code == 1, result.output
    ((sink, level),) = fake.added
    return level, "json" if sink is output.json_sink else "text"


GET = ["get", "pods", "-o", "bogus"]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (GET, {}, ("WARNING", "text")),
        (GET, {"ASYNCKUBELET_LOG_LEVEL": "info"}, ("INFO", "text")),
        (GET, {"ASYNCKUBELET_LOG_FORMAT": "json"}, ("WARNING", "json")),
        (["--log-level", "debug", *GET], {"ASYNCKUBELET_LOG_LEVEL": "info"}, ("DEBUG", "text")),
        (["--log-format", "json", *GET], {}, ("WARNING", "json")),
        ([*GET, "--log-level", "error"], {"ASYNCKUBELET_LOG_LEVEL": "info"}, ("ERROR", "text")),
        (["--log-level", "debug", *GET, "--log-level", "error"], {}, ("ERROR", "text")),
        (
            ["--log-format", "json", *GET, "--log-format", "text"],
            {"ASYNCKUBELET_LOG_FORMAT": "json"},
            ("WARNING", "text"),
        ),
        ([*GET, "-v"], {}, ("INFO", "text")),
        ([*GET, "-vv"], {"ASYNCKUBELET_LOG_LEVEL": "error"}, ("DEBUG", "text")),
    ],
)
def test_the_command_flag_beats_the_global_flag_beats_the_environment_beats_the_default(
    fake: FakeLogger, args: list[str], env: dict[str, str], expected: tuple[str, str]
) -> None:
    assert configured(fake, args, env) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--log-level", "loud", "get", "pods"], "--log-level must be"),
        (["get", "pods", "--log-format", "xml"], "--log-format must be text or json"),
    ],
)
def test_an_unknown_log_level_or_format_is_a_usage_error_naming_the_option(
    fake: FakeLogger, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("command", "envvars"),
    [
        ([], ["ASYNCKUBELET_LOG_LEVEL", "ASYNCKUBELET_LOG_FORMAT"]),
        (
            ["serve"],
            [
                "ASYNCKUBELET_MANIFESTS",
                "ASYNCKUBELET_LISTEN",
                "ASYNCKUBELET_ALLOW_REMOTE",
                "ASYNCKUBELET_STATE_DIR",
                "ASYNCKUBELET_NODE_NAME",
                "ASYNCKUBELET_NETWORK",
                "ASYNCKUBELET_POD_CIDR",
                "ASYNCKUBELET_BRIDGE",
                "ASYNCKUBELET_DUAL_STACK",
                "ASYNCKUBELET_POD_CIDR_V6",
                "ASYNCKUBELET_FIREWALL",
                "ASYNCKUBELET_MASQUERADE",
                "ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER",
                "ASYNCKUBELET_POD_SECURITY",
                "ASYNCKUBELET_PAUSE_IMAGE",
                "ASYNCKUBELET_STOP_PODS_ON_EXIT",
                "ASYNCKUBELET_CLUSTER_DNS",
                "ASYNCKUBELET_CLUSTER_DOMAIN",
                "ASYNCKUBELET_DOCKER_HOST",
                "ASYNCKUBELET_LOG_LEVEL",
                "ASYNCKUBELET_LOG_FORMAT",
            ],
        ),
        (
            ["run"],
            [
                "ASYNCKUBELET_NODE_NAME",
                "ASYNCKUBELET_PAUSE_IMAGE",
                "ASYNCKUBELET_GRACE_PERIOD",
                "ASYNCKUBELET_POD_SECURITY",
                "ASYNCKUBELET_NETWORK",
                "ASYNCKUBELET_POD_CIDR",
                "ASYNCKUBELET_BRIDGE",
                "ASYNCKUBELET_CLUSTER_DNS",
                "ASYNCKUBELET_CLUSTER_DOMAIN",
                "ASYNCKUBELET_DOCKER_HOST",
                "ASYNCKUBELET_LOG_LEVEL",
                "ASYNCKUBELET_LOG_FORMAT",
            ],
        ),
    ],
)
def test_help_names_the_environment_variable_of_each_option(
    command: list[str], envvars: list[str]
) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for name in envvars:
        assert f"env var: {name}" in text, name


def test_an_option_of_serve_reads_its_environment_variable(fake: FakeLogger) -> None:
    result = CliRunner().invoke(
        app,
        ["serve"],
        env={"ASYNCKUBELET_LISTEN": "10.1.2.3:10255", "ASYNCKUBELET_STATE_DIR": "/nonexistent"},
    )
    assert result.exit_code == 2
    assert "10.1.2.3" in result.stderr


def test_a_json_log_line_is_one_object_with_time_level_message_and_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output.setup_logging(LogOptions(log_level="info", log_format="json"))
    try:
        logger.bind(pod="default/web", container="app").info("Started container {}", "app")
    finally:
        logger.remove()
        logger.disable("asynckubelet")
    (line,) = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert entry["level"] == "INFO"
    assert entry["message"] == "Started container app"
    assert (entry["pod"], entry["container"]) == ("default/web", "app")
    assert entry["time"].startswith("20")
