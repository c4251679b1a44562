"""The public API in tiers, each a light package: the top (the node, its errors, the
manifest loader), :mod:`asynckubelet.node` (the kubelet alone) and
:mod:`asynckubelet.runtime` (one pod's sync). Every name in each ``__all__`` resolves,
every error of :mod:`asynckubelet.errors` is at the top, every type the public signatures
use is exported by a tier, and importing a tier, the errors or the manifest loader loads
neither the Docker client, nor netlink, nor the HTTP library."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

import asynckubelet
import asynckubelet.node
import asynckubelet.runtime
from asynckubelet import errors

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("aiodocker", "pyroute2", "aiohttp")
TIERS = [asynckubelet, asynckubelet.node, asynckubelet.runtime]


@pytest.mark.parametrize("tier", TIERS, ids=lambda t: t.__name__)
def test_every_name_in_all_resolves(tier: Any) -> None:
    missing = [name for name in tier.__all__ if not hasattr(tier, name)]
    assert missing == []


def test_the_tiers_do_not_repeat_each_others_names() -> None:
    seen: dict[str, str] = {}
    repeated = []
    for tier in TIERS:
        for name in tier.__all__:
            if name in seen:
                repeated.append(f"{name}: {seen[name]} and {tier.__name__}")
            seen[name] = tier.__name__
    assert repeated == []


def test_every_error_is_exported_from_the_top_package() -> None:
    for name in errors.__all__:
        assert name in asynckubelet.__all__
        assert getattr(asynckubelet, name) is getattr(errors, name)


def test_every_error_class_of_the_errors_module_is_in_its_all() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and value.__module__ == errors.__name__
        and not name.startswith("_")
    }
    assert defined == set(errors.__all__)


@pytest.mark.parametrize("tier", TIERS, ids=lambda t: t.__name__)
def test_the_names_type_checkers_see_are_the_names_imported_at_run_time(tier: Any) -> None:
    """A tier's ``__init__`` lists each public name twice: imported under ``TYPE_CHECKING``
    (for type checkers, re-exported as ``X as X``) and in the table of lazy imports; the
    two must agree."""
    tree = ast.parse(Path(tier.__file__).read_text())
    checked: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                assert statement.module is not None
                for alias in statement.names:
                    if alias.name != "*" and alias.asname is not None:
                        checked[alias.asname] = (statement.module, alias.name)
    assert checked == tier._PUBLIC


def _named_types(hint: Any, found: set[type]) -> None:
    for arg in typing.get_args(hint):
        _named_types(arg, found)
    origin = typing.get_origin(hint)
    if origin is not None:
        _named_types(origin, found)
    if isinstance(hint, type) and hint.__module__.startswith("asynckubelet"):
        found.add(hint)


def _type_checking_names(module_name: str) -> dict[str, Any]:
    """The names a module imports for type checkers only (under ``if TYPE_CHECKING:``), which
    its annotations use but its run time never binds."""
    module = sys.modules[module_name]
    tree = ast.parse(inspect.getsource(module))
    names: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    imported = importlib.import_module(statement.module)
                    for alias in statement.names:
                        names[alias.asname or alias.name] = getattr(imported, alias.name)
    return names


def _hints(owner: Any, module_name: str) -> dict[str, Any]:
    return typing.get_type_hints(owner, localns=_type_checking_names(module_name))


def _public_signature_types(cls: type) -> set[type]:
    found: set[type] = set()
    if dataclasses.is_dataclass(cls):
        for hint in _hints(cls, cls.__module__).values():
            _named_types(hint, found)
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, property):
            member = member.fget
        if not inspect.isfunction(member):
            continue
        for hint in _hints(member, member.__module__).values():
            _named_types(hint, found)
    return found


@pytest.mark.parametrize(
    ("tier", "name"),
    [
        (asynckubelet, "Node"),
        (asynckubelet, "NodeConfig"),
        (asynckubelet.node, "Kubelet"),
        (asynckubelet, "KubeletConfig"),
        (asynckubelet.runtime, "RuntimeManager"),
        (asynckubelet.runtime, "RuntimeConfig"),
    ],
)
def test_every_type_in_a_public_signature_is_exported(tier: Any, name: str) -> None:
    exported = {id(getattr(t, n)) for t in TIERS for n in t.__all__}
    used = _public_signature_types(getattr(tier, name))
    assert used, "the walk found no types at all"
    assert sorted(t.__qualname__ for t in used if id(t) not in exported) == []


def test_the_walk_sees_the_types_of_the_nodes_streams() -> None:
    used = _public_signature_types(asynckubelet.node.Kubelet)
    assert {asynckubelet.PodEvent, asynckubelet.LogLine, asynckubelet.ExecResult} <= used


def modules_loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=ROOT,
    ).stdout
    return set(json.loads(out))


@pytest.mark.parametrize(
    "module",
    [
        "asynckubelet",
        "asynckubelet.errors",
        "asynckubelet.manifests",
        "asynckubelet.node",
        "asynckubelet.runtime",
    ],
)
def test_importing_a_light_part_loads_no_docker_netlink_or_http_library(module: str) -> None:
    loaded = modules_loaded_by(f"import {module}")
    assert module in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []


def test_using_the_node_loads_the_docker_client_on_first_use() -> None:
    loaded = modules_loaded_by("import asynckubelet.node\nasynckubelet.node.Kubelet")
    assert {"aiodocker", "asynckubelet.node.kubelet"} <= loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        asynckubelet.Nothing  # noqa: B018
