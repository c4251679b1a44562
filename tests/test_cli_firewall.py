"""``--firewall`` and ``--masquerade/--no-masquerade`` of ``serve`` and ``run``: the flag
beats ``ASYNCKUBELET_FIREWALL``/``ASYNCKUBELET_MASQUERADE``, which beat the defaults
(iptables, masquerade on); ``serve`` hands both to the network factory; a firewall that is
unknown, or nftables without ``nft``, is a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from asynckubelet import errors
from asynckubelet.cli import provision
from asynckubelet.cli.app import app
from asynckubelet.network import factory

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: busybox}]
"""


class Stop(errors.AsyncKubeletError):
    """Raised where the command hands the options on, so nothing runs after it."""


@pytest.fixture
def handed_on(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """What ``serve`` gives the network factory."""
    seen: list[tuple[str, bool]] = []

    def record(name: str, **kwargs: Any) -> None:
        seen.append((kwargs["firewall"], kwargs["masquerade"]))
        raise Stop("stopped by the test")

    monkeypatch.setattr(factory, "make_network_plugin", record)
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/sbin/{name}")
    return seen


def serve(flags: list[str], env: dict[str, str], tmp_path: Path) -> Any:
    base = {"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state")}
    args = ["serve", "--listen", "127.0.0.1:0", "--network", "bridge", *flags]
    return CliRunner().invoke(app, args, env={**base, **env})


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        ([], {}, ("iptables", True)),
        ([], {"ASYNCKUBELET_FIREWALL": "nftables"}, ("nftables", True)),
        ([], {"ASYNCKUBELET_MASQUERADE": "false"}, ("iptables", False)),
        (["--firewall", "iptables"], {"ASYNCKUBELET_FIREWALL": "nftables"}, ("iptables", True)),
        (["--firewall", "nftables", "--no-masquerade"], {}, ("nftables", False)),
        (["--masquerade"], {"ASYNCKUBELET_MASQUERADE": "false"}, ("iptables", True)),
    ],
    ids=[
        "defaults",
        "firewall from the environment",
        "masquerade off from the environment",
        "firewall flag beats the environment",
        "flags",
        "masquerade flag beats the environment",
    ],
)
def test_serve_hands_the_flag_else_the_environment_else_the_default_to_the_factory(
    handed_on: list[tuple[str, bool]],
    tmp_path: Path,
    flags: list[str],
    env: dict[str, str],
    expected: tuple[str, bool],
) -> None:
    serve(flags, env, tmp_path)
    assert handed_on == [expected]


@pytest.mark.parametrize("command", ["serve", "run"])
def test_an_unknown_firewall_is_a_usage_error_naming_the_option(
    command: str, tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    args = {"serve": ["serve", "--listen", "127.0.0.1:0"], "run": ["run", str(pod)]}[command]
    env = {"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"), "ASYNCKUBELET_FIREWALL": "pf"}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2
    assert "--firewall must be iptables or nftables, not 'pf'" in result.output


@pytest.mark.parametrize("command", ["serve", "run"])
def test_nftables_without_nft_is_refused_with_what_to_install(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    args = {"serve": ["serve", "--listen", "127.0.0.1:0"], "run": ["run", str(pod)]}[command]
    result = CliRunner().invoke(
        app, [*args, "--firewall", "nftables"], env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "Debian package nftables" in result.output
