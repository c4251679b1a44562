"""``asynckubelet images build-pause|build-busybox|build-probe``: images from local material."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from asynckubelet.cli.options import BusyboxOpt, DockerHostOpt, ImageTagOpt, LogOptions, ProbeTagOpt
from asynckubelet.cli.output import command, out, run_async
from asynckubelet.images import build as image_build

if TYPE_CHECKING:
    from asynckubelet.docker import DockerClient


def _build(
    build: Callable[[DockerClient], Awaitable[str]], *, tag: str, docker_host: str | None
) -> None:
    """Run one offline image builder against the engine and print ``<tag> <image id>``."""
    from asynckubelet.docker import DockerClient

    async def go() -> str:
        async with DockerClient(url=docker_host) as docker:
            return await build(docker)

    out.print(f"{tag} {run_async(go)}")


@command()
def build_pause(
    *,
    tag: ImageTagOpt = image_build.DEFAULT_PAUSE_TAG,
    docker_host: DockerHostOpt = None,
    log: LogOptions,
) -> None:
    """Compile the project's pause program statically and load it as a sandbox image."""
    _build(
        functools.partial(image_build.build_pause_image, tag=tag), tag=tag, docker_host=docker_host
    )


@command()
def build_busybox(
    *,
    tag: ImageTagOpt = image_build.DEFAULT_BUSYBOX_TAG,
    busybox: BusyboxOpt = Path("/bin/busybox"),
    docker_host: DockerHostOpt = None,
    log: LogOptions,
) -> None:
    """Pack the host's static busybox as a small general-purpose image."""
    build = functools.partial(image_build.build_busybox_image, tag=tag, busybox=busybox)
    _build(build, tag=tag, docker_host=docker_host)


@command()
def build_probe(
    *, tag: ProbeTagOpt = None, docker_host: DockerHostOpt = None, log: LogOptions
) -> None:
    """Compile the probe helper statically and load it (the node does so itself when it
    first needs it; for engines the node cannot reach the pods of)."""
    tag = tag or image_build.default_probe_tag()
    _build(
        functools.partial(image_build.build_probe_image, tag=tag), tag=tag, docker_host=docker_host
    )
