"""Every library the package imports is one it declares: a module imported directly
works only by luck when it arrives as another dependency's dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "asynckubelet").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "asynckubelet"}


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_normal(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in requirements}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_library_is_a_declared_dependency() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    undeclared = {
        module: providers.get(module, [module])
        for module in imported_top_level_modules()
        if not any(_normal(d) in declared for d in providers.get(module, [module]))
    }
    assert undeclared == {}


def test_the_import_scan_finds_the_direct_imports() -> None:
    assert {"aiodocker", "aiohttp", "msgspec", "pyroute2", "yaml"} <= imported_top_level_modules()
