"""``--service-account-issuer`` of ``serve`` and ``run``: the flag beats
``ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER``, which beats the default, and the value reaches the
node's token issuer; a value the API server would refuse is a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from asynckubelet import errors
from asynckubelet.cli import options
from asynckubelet.cli.app import app
from asynckubelet.node import kubelet, tokens, volumes
from asynckubelet.node.tokens import DEFAULT_ISSUER, ISSUER_ENV, TokenIssuer

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: busybox}]
"""


class Stop(errors.AsyncKubeletError):
    """Raised where the command hands the issuer on, so nothing runs after it."""


@pytest.fixture
def handed_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The issuers ``serve`` and ``run`` put in their KubeletConfig (or give a
    VolumeManager)."""
    seen: list[str] = []

    def record(**kwargs: Any) -> None:
        seen.append(kwargs["service_account_issuer"])
        raise Stop("stopped by the test")

    monkeypatch.setattr(kubelet, "KubeletConfig", record)
    monkeypatch.setattr(volumes, "VolumeManager", record)
    return seen


def invoke(command: str, flag: list[str], env: dict[str, str], tmp_path: Path) -> Any:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    args = {
        "serve": ["serve", "--listen", "127.0.0.1:0"],
        "run": ["run", str(pod), "--docker-host", "unix:///nonexistent.sock"],
    }[command]
    base = {"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"), ISSUER_ENV: ""}
    return CliRunner().invoke(app, [*args, *flag], env={**base, **env})


PRECEDENCE = [
    ([], {}, DEFAULT_ISSUER),
    ([], {ISSUER_ENV: "https://env.example"}, "https://env.example"),
    (
        ["--service-account-issuer", "https://flag.example"],
        {ISSUER_ENV: "https://env.example"},
        "https://flag.example",
    ),
    (["--service-account-issuer", "https://flag.example"], {}, "https://flag.example"),
]


@pytest.mark.parametrize("command", ["serve", "run"])
@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    PRECEDENCE,
    ids=["default", "environment", "flag beats environment", "flag"],
)
def test_the_flag_beats_the_environment_beats_the_default(
    handed_on: list[str],
    tmp_path: Path,
    command: str,
    flag: list[str],
    env: dict[str, str],
    expected: str,
) -> None:
    invoke(command, flag, env, tmp_path)
    assert handed_on == [expected]


@pytest.mark.parametrize("command", ["serve", "run"])
@pytest.mark.parametrize(
    ("flag", "env", "message"),
    [
        (["--service-account-issuer", ""], {}, "service-account-issuer should not be an empty"),
        (
            [],
            {ISSUER_ENV: "http://[::1]:namedport"},
            "service-account-issuer 'http://[::1]:namedport' contained a ':' but was not a "
            "valid URL",
        ),
    ],
    ids=["empty flag", "bad URL from the environment"],
)
def test_an_issuer_the_api_server_would_refuse_is_a_usage_error(
    handed_on: list[str],
    tmp_path: Path,
    command: str,
    flag: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    result = invoke(command, flag, env, tmp_path)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert handed_on == []


@pytest.mark.parametrize("command", ["serve", "run"])
def test_help_shows_the_option_its_variable_and_its_default(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "--service-account-issuer" in result.stdout
    assert f"env var: {ISSUER_ENV}" in result.stdout
    assert f"default: {DEFAULT_ISSUER}" in result.stdout


def test_the_command_lines_default_is_the_issuers() -> None:
    assert options.DEFAULT_SERVICE_ACCOUNT_ISSUER == tokens.DEFAULT_ISSUER


def test_the_library_reads_no_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ISSUER_ENV, "https://env.example")
    assert TokenIssuer(directory=tmp_path, node_name="n").issuer == DEFAULT_ISSUER


def test_the_kubelets_config_reaches_its_token_issuer(tmp_path: Path) -> None:
    node = kubelet.Kubelet(
        kubelet.KubeletConfig(
            node_name="n",
            state_dir=tmp_path,
            docker_url="unix:///nonexistent.sock",
            service_account_issuer="https://node.example",
        )
    )
    provider = node.runtime.volumes
    assert isinstance(provider, volumes.VolumeManager)
    assert provider.tokens.issuer == "https://node.example"
