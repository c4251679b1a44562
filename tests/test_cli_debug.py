"""``asynckubelet debug``: what it refuses before asking a node, as kubectl debug does."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from asynckubelet.cli.app import app


def test_a_terminal_needs_stdin(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["debug", "web", "--image", "busybox", "-t"],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)},
    )
    assert result.exit_code == 2
    assert "-i/--stdin is required for containers with -t/--tty=true" in result.output


def test_it_needs_the_node_daemon(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["debug", "web", "--image", "busybox"], env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 1
    assert "asynckubelet serve" in result.output


def test_the_image_is_required(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["debug", "web"], env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "--image" in result.output
