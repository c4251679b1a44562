"""``--container-log-max-size`` and ``--container-log-max-files`` (the kubelet's flags) on
``serve``, ``run`` and the cluster runner: handed to the node, and a bad value refused
before anything starts, naming the flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import cluster_serve
from typer.testing import CliRunner

from asynckubelet.cli import provision
from asynckubelet.cli.app import app
from asynckubelet.cli.options import NodeOptions


def _serve_config(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The node configuration ``serve`` starts its node with (nothing is started)."""
    from asynckubelet.cli.commands import serve

    handed: list[Any] = []
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    monkeypatch.setattr(serve, "run_async", lambda fn, config, *args: handed.append(config))
    return handed


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, ("10Mi", 5)),
        (["--container-log-max-size", "1Ki", "--container-log-max-files", "2"], {}, ("1Ki", 2)),
        (
            [],
            {
                "ASYNCKUBELET_CONTAINER_LOG_MAX_SIZE": "-1",
                "ASYNCKUBELET_CONTAINER_LOG_MAX_FILES": "3",
            },
            ("-1", 3),
        ),
    ],
)
def test_serve_hands_its_log_limits_to_the_node(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    expected: tuple[str, int],
) -> None:
    handed = _serve_config(monkeypatch)
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", "--nice", "0", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path), **env},
    )
    assert result.exit_code == 0, result.output
    ((config,),) = [handed]
    assert (config.container_log_max_size, config.container_log_max_files) == expected


@pytest.mark.parametrize("command", ["run", "serve"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--container-log-max-size", "lots"],
            "--container-log-max-size 'lots': not a quantity",
        ),
        (["--container-log-max-size", "0"], "--container-log-max-size '0': must be more than 0"),
        (["--container-log-max-files", "1"], "--container-log-max-files 1: must be greater than 1"),
    ],
)
def test_a_bad_log_limit_is_refused_naming_its_flag_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
    args: list[str],
    message: str,
) -> None:
    handed = _serve_config(monkeypatch)
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    prefix = {"serve": ["serve"], "run": ["run", str(pod)]}[command]
    result = CliRunner().invoke(
        app, [*prefix, *args], env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert message in result.output
    assert handed == []


def test_the_runtime_configuration_of_run_takes_the_log_limits() -> None:
    config = NodeOptions(container_log_max_size="512Ki", container_log_max_files=3).runtime_config()
    assert (config.container_log_max_size, config.container_log_max_files) == ("512Ki", 3)
    default = NodeOptions().runtime_config()
    assert (default.container_log_max_size, default.container_log_max_files) == ("10Mi", 5)


def test_serve_in_cluster_mode_takes_the_log_limits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    limits = ["--container-log-max-size", "1Mi", "--container-log-max-files", "4"]
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path, *limits)
    assert code == 0, output
    assert kubelet is not None
    assert (kubelet.container_log_max_size, kubelet.container_log_max_files) == ("1Mi", 4)
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path)
    assert kubelet is not None
    assert (kubelet.container_log_max_size, kubelet.container_log_max_files) == ("10Mi", 5)
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path, "--container-log-max-files", "1")
    assert code == 2
    assert kubelet is None
