"""The ``asynckubelet`` command line (see :mod:`asynckubelet.cli.app` for its tree).

:func:`main` first offers the command to :mod:`asynckubelet.cli.fast`, which serves the
plain ``get`` forms through a running daemon without loading the command-line framework;
everything else goes to the Typer app, loaded then.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from asynckubelet.cli import fast

    code = fast.main(sys.argv[1:])
    if code is not None:
        sys.stdout.flush()
        raise SystemExit(code)
    _load_app()
    from asynckubelet.cli.app import main as run_app

    run_app()


def _load_app() -> Any:
    """The Typer app, bound as this package's ``app`` (importing the module of the same
    name binds the module there first)."""
    from asynckubelet.cli.app import app

    globals()["app"] = app
    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _load_app()
    raise AttributeError(f"module 'asynckubelet.cli' has no attribute {name!r}")


__all__ = ["app", "main"]
