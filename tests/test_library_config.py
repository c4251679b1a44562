"""The library as a newcomer meets it: every field of every record a caller fills in says
what it does in its docstring; a node built with the defaults gets the command line's
pod network (the host's default backend), loopback only when asked for; what the
README's library section names comes from the top package; the guide ships with it."""

from __future__ import annotations

import ast
import dataclasses
import importlib.resources
import inspect
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

import asynckubelet
import asynckubelet.runtime
from asynckubelet.cli.options import DEFAULT_BRIDGE, DEFAULT_NETWORK, DEFAULT_POD_CIDR
from asynckubelet.network import LoopbackPlugin, factory
from asynckubelet.network.dockernet import DockerNetworkPlugin
from asynckubelet.testing import FakeDocker

ROOT = Path(__file__).resolve().parent.parent
RECORDS = [
    asynckubelet.NodeConfig,
    asynckubelet.KubeletConfig,
    asynckubelet.NetworkConfig,
    asynckubelet.ServicesConfig,
    asynckubelet.HTTPEndpoint,
    asynckubelet.ClusterConfig,
    asynckubelet.ServiceRanges,
    asynckubelet.runtime.DNSSettings,
]


def documented_fields(cls: type) -> dict[str, str]:
    """Field name -> the string literal that follows it in the class body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    (body,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    found: dict[str, str] = {}
    statements = body.body
    for statement, after in zip(statements, [*statements[1:], None], strict=True):
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[statement.target.id] = after.value.value
    return found


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_field_of_a_config_record_has_a_docstring(record: Any) -> None:
    fields = [f.name for f in dataclasses.fields(record)]
    documented = documented_fields(record)
    assert [f for f in fields if not documented.get(f, "").strip()] == []
    assert len((record.__doc__ or "").split()) > 5


def test_a_node_config_of_defaults_has_the_command_lines_network() -> None:
    network = asynckubelet.NodeConfig().network
    assert network == asynckubelet.NetworkConfig()
    assert (network.backend, network.bridge, network.pod_cidr) == (
        DEFAULT_NETWORK,
        DEFAULT_BRIDGE,
        DEFAULT_POD_CIDR,
    )


def test_the_default_network_is_the_hosts_default_backend_and_loopback_is_asked_for() -> None:
    remote = FakeDocker(url="tcp://engine.example:2375")
    plugin = asynckubelet.NetworkConfig().plugin(remote, node_name="n1")
    assert factory.choose_backend(docker_url=remote.url)[0] == "docker"
    assert isinstance(plugin, DockerNetworkPlugin)
    loopback = asynckubelet.NetworkConfig(backend="loopback").plugin(remote, node_name="n1")
    assert isinstance(loopback, LoopbackPlugin)
    assert asynckubelet.NodeConfig(network=None).network is None


def readme_library_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("\n## The library\n", 1)[1].split("\n## ", 1)[0]


def test_everything_the_readmes_library_section_names_comes_from_the_top_package() -> None:
    section = readme_library_section()
    imported = re.findall(r"^from asynckubelet import (.+)$", section, flags=re.M)
    names = {n.strip() for line in imported for n in line.split(",")}
    names |= set(re.findall(r"`(?:asynckubelet\.)?([A-Z]\w+)[(`]", section))
    assert {"Node", "NodeConfig", "KubeletConfig", "NetworkConfig"} <= names
    assert sorted(n for n in names if n not in asynckubelet.__all__) == []


def test_the_library_guide_ships_in_the_package_as_the_docs_page() -> None:
    guide = importlib.resources.files("asynckubelet").joinpath("library.md")
    assert guide.read_text(encoding="utf-8") == (ROOT / "docs" / "library.md").read_text()


def test_the_built_wheel_carries_the_library_guide(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "asynckubelet", source / "asynckubelet", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path / "wheel"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "--no-index", "-q", "-w", str(out), str(source)], check=True)
    (wheel,) = out.glob("asynckubelet-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = z.read("asynckubelet/library.md").decode()
    assert shipped == (ROOT / "docs" / "library.md").read_text()
