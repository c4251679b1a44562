"""Three import-time savings for a package whose command line is a short process.

- :func:`when_imported`: run a function right after a module is first imported, without
  importing it now. The package disables its loguru logger this way: loguru imports
  asyncio and costs more than ``asynckubelet --help`` itself, yet the logger must be
  disabled before any module of the package can log. The command line adds its sink the
  same way, so a command that logs nothing never imports loguru.
- :func:`defer_package_init`: make a package's submodules importable without running the
  package's ``__init__`` until one of its own attributes is used. lightkube's ``__init__``
  imports its HTTP client, kubeconfig loader and YAML codecs, three times what the
  Kubernetes models (``lightkube.models.*``) need; everything else but cluster mode uses
  the models alone.
- :func:`with_environment`: run a module's code, at its first import, with environment
  variables set for that time only. The command line imports aiohttp's connector with
  ``SSL_CERT_FILE`` naming an empty file: the connector makes its two default TLS
  contexts at import, and loading the system's whole CA bundle into them cost a sixth of
  ``asynckubelet run``'s imports and 2 MB of a daemon's memory, for contexts no command
  uses (the engine's TLS has its own CA, the API server's client its own contexts).
  OpenSSL still finds a system CA in the hashed certificate directory
  (``SSL_CERT_DIR``) when a handshake asks for one.
"""

from __future__ import annotations

import importlib
import sys

# What only the finder's matches need is imported when one is made: every command loads
# this module, and ``typing``, ``threading`` and ``importlib.util`` are a sixth of what
# the shortest one (``get``) loads.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import importlib.machinery
    import types
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Hook = Callable[[types.ModuleType], None]


class _Hooked:
    """A loader that runs the hooks right after the module's own code."""

    def __init__(self, loader: Any, hooks: list[Hook]) -> None:
        self._loader = loader
        self._hooks = hooks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        for hook in self._hooks:
            hook(module)


class _InEnvironment:
    """A loader that runs the module's code with environment variables set, and puts the
    environment back as it was right after."""

    def __init__(self, loader: Any, environment: Mapping[str, str]) -> None:
        self._loader = loader
        self._environment = environment

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        import os

        saved = {name: os.environ.get(name) for name in self._environment}
        os.environ.update(self._environment)
        try:
            self._loader.exec_module(module)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


class _Deferred:
    """A package's loader that makes the module but runs its ``__init__`` only when an
    attribute of the package itself is first used (a submodule is imported instead)."""

    def __init__(self, loader: Any) -> None:
        import threading

        self._loader = loader
        self._lock = threading.Lock()

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, package: types.ModuleType) -> None:
        name = package.__name__

        def __getattr__(attribute: str) -> object:
            import importlib.util

            if importlib.util.find_spec(f"{name}.{attribute}") is not None:
                return importlib.import_module(f"{name}.{attribute}")
            with self._lock:
                if package.__dict__.get("__getattr__") is __getattr__:
                    del package.__dict__["__getattr__"]
                    self._loader.exec_module(package)
            return getattr(package, attribute)

        package.__dict__["__getattr__"] = __getattr__


class _Finder:
    """A meta path finder that wraps the loaders of the modules named to it."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}
        self.deferred: set[str] = set()
        self.environments: dict[str, Mapping[str, str]] = {}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        hooks = self.hooks.pop(fullname, None)
        deferred = fullname in self.deferred
        environment = self.environments.pop(fullname, None)
        if hooks is None and not deferred and environment is None:
            return None
        self.deferred.discard(fullname)
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        if deferred and spec.submodule_search_locations is not None:
            spec.loader = _Deferred(spec.loader)  # type: ignore[assignment]
        if environment is not None:
            spec.loader = _InEnvironment(spec.loader, environment)  # type: ignore[assignment]
        if hooks is not None:
            spec.loader = _Hooked(spec.loader, hooks)  # type: ignore[assignment]
        return spec

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)


_finder = _Finder()


def when_imported(name: str, hook: Hook) -> None:
    """Call ``hook(module)`` once the top-level module ``name`` is imported: now if it
    already is, else right after its first import, before the importer gets it. Hooks of
    one module run in the order they were given."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    _finder.hooks.setdefault(name, []).append(hook)
    _finder.install()


def defer_package_init(name: str) -> None:
    """Import the top-level package ``name``, when it is first imported, without running
    its ``__init__``: its submodules import as usual (``from name import submodule`` too),
    and the first use of another attribute of the package (``from name import X``) runs
    the ``__init__`` then. Nothing changes for a package already imported."""
    if name not in sys.modules:
        _finder.deferred.add(name)
        _finder.install()


def with_environment(name: str, environment: Mapping[str, str]) -> None:
    """Run the code of the module ``name`` (a submodule too), at its first import, with
    ``environment`` set, and restore each variable (or its absence) right after: the
    module's import-time work sees it, the rest of the process and its children do not.
    Nothing happens for a module already imported."""
    if name not in sys.modules:
        _finder.environments[name] = dict(environment)
        _finder.install()
