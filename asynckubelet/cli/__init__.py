"""The ``asynckubelet`` command line (see :mod:`asynckubelet.cli.app` for its tree).

:func:`main` first offers the command to :mod:`asynckubelet.cli.fast`, which serves the
plain ``get`` forms through a running daemon without loading the command-line framework;
everything else goes to the Typer app, loaded then. Once the command has ended and its
output is flushed, the process leaves at once: the interpreter's teardown of the modules
a command loaded (the Docker client, the HTTP stack) takes tens of milliseconds and does
nothing a command needs. The commands the app serves import aiohttp's connector without
parsing the system's CA bundle file (:func:`spare_the_ca_bundle`).

The cyclic garbage collector waits while a command starts (:func:`hold_collector`): a
start-up imports tens of thousands of long-lived objects and little garbage, and the
collections those allocations set off (a full one among them) cost a command tens of
milliseconds for almost nothing. It runs again, with what the start-up made set aside for
good (``gc.freeze``), once the command's work begins: its event loop starts
(:func:`~asynckubelet.cli.output.run_async`) or a ``get --watch`` watches
(:func:`release_collector`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_held = False


def hold_collector() -> None:
    """Stop the cyclic garbage collector for the command's start-up (see the module's
    docstring); :func:`release_collector` ends the hold."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release_collector() -> None:
    """The command's work begins: the objects made so far (the modules, the command line,
    the manifests) are set aside for good, where no collection looks at them again, and
    the collector runs again. Nothing, unless :func:`hold_collector` holds it: a program
    that embeds the package keeps its collector as it set it."""
    global _held
    if not _held:
        return
    _held = False
    gc.freeze()
    gc.enable()


def main() -> None:
    prepare_imports()
    hold_collector()
    code: object
    try:
        code = _command()
    except SystemExit as e:
        code = e.code
    _leave(code)


def _command() -> int | None:
    from asynckubelet.cli import fast

    code = fast.main(sys.argv[1:])
    if code is not None:
        return code
    spare_the_ca_bundle()
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


def prepare_imports() -> None:
    """The command line's own import-time savings (:mod:`asynckubelet._imports`), made by its
    entry point for its own process: the package itself leaves an embedding program's
    imports alone. lightkube's package initialises only when cluster mode uses its client
    (the commands use its Kubernetes models alone), pyroute2's only when something asks
    for more than its rtnetlink (about 6 MB of other netlink families)."""
    from asynckubelet import _imports

    _imports.defer_package_init("lightkube")
    _imports.defer_package_init("pyroute2")


def spare_the_ca_bundle() -> None:
    """Have aiohttp's connector, once a command imports it, make its default TLS contexts
    with ``SSL_CERT_FILE`` naming an empty file (see
    :func:`asynckubelet._imports.with_environment`): they then load no CA at import, and
    find a system CA in the hashed certificate directory when a handshake needs one. Not
    when ``SSL_CERT_FILE`` is set: the file it names is then loaded as the user asked."""
    if "SSL_CERT_FILE" in os.environ:
        return
    from asynckubelet import _imports

    _imports.with_environment("aiohttp.connector", {"SSL_CERT_FILE": os.devnull})


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


__all__ = ["app", "main", "prepare_imports"]
