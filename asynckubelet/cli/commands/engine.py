"""``asynckubelet engine start|stop|status``: the Docker engine that is there, or our own."""

from __future__ import annotations

from asynckubelet.cli.options import LogOptions, PurgeOpt
from asynckubelet.cli.output import command, fail, out, run_async


def _answering() -> str | None:
    """The address of the engine the commands use, when it answers."""
    from asynckubelet.docker import DockerClient
    from asynckubelet.docker.engine import resolve_docker_url

    async def answers(url: str) -> bool:
        async with DockerClient(url=url, retry_attempts=1) as docker:
            return await docker.ping()

    url = resolve_docker_url(None)
    return url if url is not None and run_async(answers, url) else None


@command()
def start(*, log: LogOptions) -> None:
    """Use the engine that answers; else start our own dockerd (root, dockerd installed)."""
    from asynckubelet.docker.engine import own_engine

    url = _answering()
    if url is not None:
        out.print(f"Docker engine answering at {url}")
        return
    daemon = own_engine()
    daemon.start()
    out.print(f"started Docker engine at {daemon.url} (data {daemon.root}, log {daemon.log})")


@command()
def stop(*, purge: PurgeOpt = False, log: LogOptions) -> None:
    """Stop the engine that `engine start` started (never any other)."""
    from asynckubelet.docker.engine import own_engine

    daemon = own_engine()
    if daemon.pid() is None and not purge:
        out.print("no engine of ours is running")
        return
    daemon.stop(remove=purge)
    out.print("stopped" + (" and removed its data" if purge else ""))


@command()
def status(*, log: LogOptions) -> None:
    """Which engine the commands use, and whether it answers (exit 1 when none does)."""
    url = _answering()
    if url is None:
        raise fail("no Docker engine answers; run `asynckubelet engine start`")
    out.print(f"Docker engine answering at {url}")
