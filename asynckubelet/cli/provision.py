"""What ``run`` and ``serve`` set up by themselves before a pod can start, each announced in
one line on stderr: a Docker engine when none answers (``engine start``'s own dockerd), and
the project's own images when they are missing (the image manager builds them; this module
only says so).

An engine is started only where nothing was asked for: no ``--docker-host``, no
``DOCKER_HOST``, nothing answering on the usual sockets, and a machine where we can start
one (root, ``dockerd`` installed). Anywhere else the command goes on and its first call to
the engine fails with the usual message.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from asynckubelet.cli.output import err, escape

Announce = Callable[[str], None]


def announce(text: str) -> None:
    """One line on stderr about something done without being asked."""
    err.print(f"[dim]{escape(text)}[/dim]")


def engine_answers(url: str | None) -> bool:
    """Whether the engine at ``url`` answers; any address that is not a unix socket is
    taken as answering (whether it does is for the client to find out and say)."""
    from asynckubelet.docker.engine import api_answers

    if url is None:
        return False
    if not url.startswith("unix://"):
        return True
    return api_answers(Path(url.removeprefix("unix://")))


def ensure_engine(docker_host: str | None, *, say: Announce = announce) -> None:
    """Start the project's own dockerd when no engine answers and none was named."""
    from asynckubelet.docker import engine

    if docker_host or os.environ.get("DOCKER_HOST"):
        return
    if engine_answers(engine.resolve_docker_url(None)):
        return
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        return
    daemon = engine.own_engine()
    say(
        f"no Docker engine answers; starting one at {daemon.url} (data {daemon.root}, "
        f"log {daemon.log}; `asynckubelet engine stop` stops it)"
    )
    daemon.start()
