"""The ``asynckubelet`` command line (see :mod:`asynckubelet.cli.app` for its tree).

:func:`main` first offers the command to
:func:`~asynckubelet.cli.commands.get_output.through_daemon`, which serves the plain
``get`` forms through a running daemon without loading the command-line framework;
everything else goes to the Typer app, loaded then. Once the command has ended and its
output is flushed, the process leaves at once: the interpreter's teardown of the modules
a command loaded (the Docker client, the HTTP stack) takes tens of milliseconds and does
nothing a command needs. The commands the app serves import aiohttp's connector without
parsing the system's CA bundle file (:func:`~asynckubelet.cli.process.spare_the_ca_bundle`).

What the entry point does to its own process, and only to its own (the collector held
while a command starts, the import-time savings), is :mod:`asynckubelet.cli.process`.
"""

from __future__ import annotations

import contextlib
import os
import sys

from asynckubelet.cli import process

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def main() -> None:
    process.prepare_imports()
    process.hold_collector()
    process.trace_if_asked()
    code: object
    try:
        code = _command()
    except SystemExit as e:
        code = e.code
    _leave(code)


def _command() -> int | None:
    from asynckubelet.cli.commands.get_output import through_daemon

    code = through_daemon(sys.argv[1:])
    if code is not None:
        return code
    process.spare_the_ca_bundle()
    _load_app()
    from asynckubelet.cli.app import main as run_app

    run_app()
    return 0


def _leave(code: object) -> None:
    """End the process with ``code`` as ``SystemExit`` would (None is 0, a message is
    printed and is 1), after flushing what the command wrote and closing its log sinks,
    without the interpreter's teardown."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        sys.stderr.write(f"{code}\n")
        status = 1
    loguru = sys.modules.get("loguru")
    if loguru is not None:
        loguru.logger.remove()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


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
