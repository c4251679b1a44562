"""The node options ``run`` and ``serve`` share: the same names, environment variables and
defaults on both (``--network`` is ``auto`` everywhere), the values reach the network
factory, the literal defaults on the command line are the library's, and no ``--help``
loads the Docker client, netlink or other heavy libraries."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from asynckubelet import errors
from asynckubelet.cli import options, provision
from asynckubelet.cli.app import app
from asynckubelet.cli.options import NodeOptions
from asynckubelet.cluster import agent, kubeletauth
from asynckubelet.manifests import LEVELS
from asynckubelet.network import bridge, factory
from asynckubelet.node import daemon, tokens
from asynckubelet.runtime import logrotation

REPO = Path(__file__).resolve().parent.parent


class Stop(errors.AsyncKubeletError):
    """Raised where the command hands the options on, so nothing runs after it."""


def params(name: str) -> dict[str, Any]:
    """The command's parameters by name, as Typer hands them to its command-line parser."""
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[name].params}


@pytest.mark.parametrize("command", ["run", "serve"])
def test_run_and_serve_take_every_node_option_with_one_variable_and_one_default(
    command: str,
) -> None:
    taken = params(command)
    for field in dataclasses.fields(NodeOptions):
        option = taken[field.name]
        assert option.envvar == f"ASYNCKUBELET_{field.name.upper()}", field.name
        assert option.default == field.default, field.name


@pytest.mark.parametrize("command", ["run", "serve"])
def test_the_network_defaults_to_auto(command: str) -> None:
    assert params(command)["network"].default == "auto"


@pytest.mark.parametrize("command", ["run", "serve"])
def test_the_network_help_names_every_backend(command: str) -> None:
    help_text = params(command)["network"].help or ""
    for backend in factory.BACKENDS:
        assert f"{backend} " in help_text or f"{backend}." in help_text, backend


def test_the_command_lines_defaults_are_the_librarys() -> None:
    assert options.NETWORK_BACKENDS == factory.BACKENDS
    assert options.DEFAULT_BRIDGE == bridge.DEFAULT_BRIDGE
    assert options.DEFAULT_POD_CIDR == bridge.DEFAULT_POD_CIDR
    assert options.DEFAULT_POD_CIDR_V6 == bridge.DEFAULT_POD_CIDR_V6
    assert options.FIREWALLS == bridge.FIREWALLS
    assert options.POD_SECURITY_LEVELS == LEVELS
    assert options.DEFAULT_SERVICE_ACCOUNT_ISSUER == tokens.DEFAULT_ISSUER
    assert options.DEFAULT_NETWORK_STATE_DIR == bridge.DEFAULT_STATE_DIR
    assert options.DEFAULT_KUBELET_PORT == agent.DEFAULT_KUBELET_PORT
    assert options.DEFAULT_POD_CIDR_WAIT == agent.POD_CIDR_WAIT
    assert options.AUTHORIZATION_MODES == kubeletauth.AUTHORIZATION_MODES
    assert options.DEFAULT_CONTAINER_LOG_MAX_SIZE == logrotation.DEFAULT_MAX_SIZE
    assert options.DEFAULT_CONTAINER_LOG_MAX_FILES == logrotation.DEFAULT_MAX_FILES


@pytest.fixture
def handed_on(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the network factory is asked for."""
    seen: list[dict[str, Any]] = []

    def record(name: str, **kwargs: Any) -> None:
        seen.append({"name": name, **kwargs})
        raise Stop("stopped by the test")

    monkeypatch.setattr(factory, "make_network_plugin", record)
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    return seen


def test_serve_hands_the_bridge_options_from_flags_and_environment_to_the_factory(
    handed_on: list[dict[str, Any]], tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", "--bridge", "akltest0", "--dual-stack"],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path), "ASYNCKUBELET_POD_CIDR": "10.99.0.0/24"},
    )
    assert result.exit_code == 1
    ((asked,),) = [handed_on]
    assert (asked["name"], asked["bridge"], asked["pod_cidr"], asked["pod_cidr_v6"]) == (
        "auto",
        "akltest0",
        "10.99.0.0/24",
        options.DEFAULT_POD_CIDR_V6,
    )


@pytest.mark.parametrize("command", ["serve", "reset"])
@pytest.mark.parametrize("given", ["flag", "variable", "neither"])
def test_the_network_state_dir_reaches_the_factory_from_serve_and_reset(
    handed_on: list[dict[str, Any]], tmp_path: Path, command: str, given: str
) -> None:
    records = tmp_path / "records"
    args = ["--network-state-dir", str(records)] if given == "flag" else []
    env = {"ASYNCKUBELET_NETWORK_STATE_DIR": str(records)} if given == "variable" else {}
    listen = ["--listen", "127.0.0.1:0"] if command == "serve" else []
    result = CliRunner().invoke(
        app,
        [command, *listen, "--network", "bridge", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"), **env},
    )
    assert result.exit_code == 1, result.output
    ((asked,),) = [handed_on]
    expected = options.DEFAULT_NETWORK_STATE_DIR if given == "neither" else records
    assert asked["state_dir"] == expected


@pytest.mark.parametrize(
    ("args", "env", "nice"),
    [
        ([], {}, options.DEFAULT_NICE),
        (["--nice", "3"], {}, 3),
        ([], {"ASYNCKUBELET_NICE": "-20"}, -20),
    ],
)
def test_serve_tunes_its_allocator_and_thread_switches_then_its_priority_once_the_engine_runs(
    handed_on: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    nice: int,
) -> None:
    order: list[object] = []
    monkeypatch.setattr(daemon, "limit_malloc_arenas", lambda: order.append("arenas"))
    monkeypatch.setattr(daemon, "quicken_thread_switches", lambda: order.append("switches"))
    monkeypatch.setattr(provision, "ensure_engine", lambda *a, **k: order.append("engine"))

    def set_priority(nice: int) -> list[str]:
        order.append(nice)
        return []

    monkeypatch.setattr(daemon, "set_priority", set_priority)
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path), **env},
    )
    assert result.exit_code == 1
    assert order == ["arenas", "switches", "engine", nice]
    assert options.DEFAULT_NICE == -10


@pytest.mark.parametrize("value", ["20", "-21"])
def test_a_priority_nice_does_not_know_is_refused_before_anything_starts(
    handed_on: list[dict[str, Any]], priorities_set: list[int], tmp_path: Path, value: str
) -> None:
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", "--nice", value],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)},
    )
    assert result.exit_code == 2
    assert f"--nice {value}: must be -20 to 19" in result.output
    assert (handed_on, priorities_set) == ([], [])


def test_the_node_options_object_asks_the_factory_for_what_it_holds(
    handed_on: list[dict[str, Any]],
) -> None:
    node = NodeOptions(
        network="bridge",
        bridge="b1",
        pod_cidr="10.1.0.0/16",
        pod_cidr_v6="fd00:1::/64",
        network_state_dir=Path("/srv/akl-net"),
    )
    with pytest.raises(Stop):
        node.network_plugin(None, node_name="n1")  # type: ignore[arg-type]
    assert handed_on == [
        {
            "name": "bridge",
            "docker": None,
            "state_dir": Path("/srv/akl-net"),
            "bridge": "b1",
            "pod_cidr": "10.1.0.0/16",
            "pod_cidr_v6": "fd00:1::/64",
            "firewall": "iptables",
            "masquerade": True,
            "node_name": "n1",
        }
    ]


@pytest.mark.parametrize("command", ["run", "serve"])
def test_an_unknown_network_is_refused_naming_the_backends(command: str, tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    args = {"serve": ["serve"], "run": ["run", str(pod)]}[command]
    result = CliRunner().invoke(
        app, [*args, "--network", "weave"], env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 1
    assert "--network must be one of auto, bridge, cni, docker, loopback, not 'weave'" in (
        result.stderr
    )


HEAVY = (
    "aiodocker",
    "aiohttp",
    "pyroute2",
    "pydantic",
    "httpx2",
    "jwt",
    "cryptography",
    "watchfiles",
    "prometheus_client",
    "lightkube.core",
    "lightkube.config",
)
"""What no command's help loads: the Docker client, netlink, pydantic, lightkube's HTTP
client, the token signer, the file watcher, the metrics registry, the Kubernetes models."""
COMMAND_LINE = ("loguru", "asyncio", "anyio", "rich", "yaml", "lightkube.models", "msgspec")
"""What a command's own help may load, and ``asynckubelet --help`` does not."""
HELPS = [
    ["--help"],
    *(
        [name, "--help"]
        for name in (
            "run",
            "validate",
            "apply",
            "delete",
            "get",
            "describe",
            "logs",
            "exec",
            "doctor",
            "serve",
        )
    ),
    ["images", "build-pause", "--help"],
    ["engine", "start", "--help"],
    ["images", "--help"],
]


def test_each_help_loads_nothing_heavy_and_the_command_list_not_even_rich() -> None:
    # One interpreter for all: each help is charged with the modules that appear during it.
    script = (
        "import json, sys\n"
        "from asynckubelet.cli import app\n"
        "def loaded(names):\n"
        "    return {n for n in names for m in sys.modules if m == n or m.startswith(n + '.')}\n"
        f"for args in {HELPS!r}:\n"
        f"    before = loaded({HEAVY + COMMAND_LINE!r})\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"    new = sorted(loaded({HEAVY + COMMAND_LINE!r}) - before)\n"
        "    print('LOADED', json.dumps([' '.join(args), new]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "COLUMNS": "200"},
        check=True,
    )
    assert "Usage: " in result.stdout
    loaded: dict[str, list[str]] = dict(
        json.loads(line.removeprefix("LOADED "))
        for line in result.stdout.splitlines()
        if line.startswith("LOADED ")
    )
    assert len(loaded) == len(HELPS)
    for args, modules in loaded.items():
        assert not set(modules) & set(HEAVY), (args, modules)
    assert loaded["--help"] == []
    assert loaded["images --help"] == []


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
        ([], {}, None),
        (["--max-parallel-starts", "3"], {}, 3),
        ([], {"ASYNCKUBELET_MAX_PARALLEL_STARTS": "0"}, 0),
    ],
)
def test_serve_hands_its_limit_of_parallel_starts_to_the_node(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    expected: int | None,
) -> None:
    from asynckubelet.runtime.gate import default_parallel_starts

    handed = _serve_config(monkeypatch)
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", "--nice", "0", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path), **env},
    )
    assert result.exit_code == 0, result.output
    ((config,),) = [handed]
    assert config.max_parallel_starts == (
        default_parallel_starts() if expected is None else expected
    )


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_negative_limit_of_parallel_starts_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: str
) -> None:
    handed = _serve_config(monkeypatch)
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    args = {"serve": ["serve"], "run": ["run", str(pod)]}[command]
    result = CliRunner().invoke(
        app,
        [*args, "--max-parallel-starts", "-1"],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path)},
    )
    assert result.exit_code == 2
    assert "--max-parallel-starts must be 0 (no limit) or more, not -1" in result.output
    assert handed == []


def test_the_run_time_configuration_takes_the_limit_of_parallel_starts() -> None:
    from asynckubelet.runtime.gate import default_parallel_starts

    assert NodeOptions(max_parallel_starts=5).runtime_config().max_parallel_starts == 5
    assert NodeOptions().runtime_config().max_parallel_starts == default_parallel_starts()


def test_given_node_labels_sit_over_the_kubelets_own_so_an_os_selector_matches() -> None:
    """A node given ``--node-labels`` checks nodeSelectors as the kubelet does, against its
    registered labels: the given ones over ``kubernetes.io/hostname``, ``os`` and ``arch``
    (a DaemonSet's ``kubernetes.io/os: linux`` pod is admitted, not refused)."""
    from lightkube.models.core_v1 import Container, Pod, PodSpec

    from asynckubelet.node.admission import matches_node_selector

    info = NodeOptions(node_name="n1", node_labels="team=a,kubernetes.io/hostname=x").node_info()
    assert info.labels is not None
    assert info.labels["team"] == "a"
    assert info.labels["kubernetes.io/hostname"] == "x"
    assert info.labels["kubernetes.io/os"] == "linux"
    assert info.labels["kubernetes.io/arch"]
    linux = Pod(
        spec=PodSpec(containers=[Container(name="a")], nodeSelector={"kubernetes.io/os": "linux"})
    )
    assert matches_node_selector(linux, info.labels, "n1")
    assert NodeOptions(node_name="n1").node_info().labels is None
