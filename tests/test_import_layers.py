"""The layers contract covers the whole package and makes no exceptions.

import-linter checks only the modules a layer names: a module at the package's root that
no layer names may import anything, and an ``ignore_imports`` entry lets an import point up
the layers for good. These tests keep both from coming back unnoticed.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "asynckubelet"


def layers_contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    return dict(layers)


def layer_modules(layers: list[str]) -> list[str]:
    """The modules the layers name (``"a : (b) | c"`` names a, b and c)."""
    return [name.strip("() ") for layer in layers for name in re.split(r"[|:]", layer)]


def root_modules() -> set[str]:
    """The package's direct modules and subpackages, without ``__init__``."""
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return modules | packages


def test_the_layers_contract_makes_no_exceptions() -> None:
    assert "ignore_imports" not in layers_contract()


def test_every_module_at_the_package_root_is_in_a_layer() -> None:
    named = layer_modules(layers_contract()["layers"])
    assert sorted(root_modules() - set(named)) == []


def test_no_module_is_in_two_layers() -> None:
    named = layer_modules(layers_contract()["layers"])
    assert sorted({n for n in named if named.count(n) > 1}) == []


def test_the_layer_names_are_modules_of_the_package() -> None:
    named = layer_modules(layers_contract()["layers"])
    assert sorted(set(named) - root_modules()) == []


def test_the_root_scan_finds_modules_and_packages() -> None:
    assert {"errors", "node", "kubectl", "__main__"} <= root_modules()
