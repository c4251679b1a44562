"""What the command line's entry point does to its own process, and only to its own: a
program that embeds the package keeps its collector, imports and environment as it set
them.

The cyclic garbage collector waits while a command starts (:func:`hold_collector`): a
start-up imports tens of thousands of long-lived objects and little garbage, and the
collections those allocations set off (a full one among them) cost a command tens of
milliseconds for almost nothing. It runs again, with what the start-up made set aside for
good (``gc.freeze``), once the command's work begins: its event loop starts
(:func:`~asynckubelet.cli.output.run_async`) or a ``get --watch`` watches
(:func:`release_collector`).
"""

from __future__ import annotations

import gc
import os

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


def trace_if_asked() -> None:
    """The marks of :mod:`asynckubelet._trace` appended to the file ``ASYNCKUBELET_TRACE``
    names, when it names one (a bench's daemon); the module is not even imported
    otherwise."""
    if os.environ.get("ASYNCKUBELET_TRACE"):
        from asynckubelet import _trace

        _trace.from_environment()


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
