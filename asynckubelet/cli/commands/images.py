"""``asynckubelet images build-pause|build-busybox|build-probe``: images from local
material; ``images load``: your own, from a ``docker save`` archive.

No registry serves the images a user builds on their machine, and the engine the node
uses may be another machine's (``--docker-host``), where ``docker build`` did not run:
``images load`` hands it the archive ``docker save`` wrote, as ``docker load`` does,
streamed from the file or stdin in bounded chunks, never read whole (an archive is
hundreds of megabytes). What is not an archive is refused before the engine sees it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from asynckubelet.cli.options import (
    BusyboxOpt,
    DockerHostOpt,
    ImageArchiveArg,
    ImageTagOpt,
    LogOptions,
    ProbeTagOpt,
)
from asynckubelet.cli.output import command, escape, fail, out, run_async
from asynckubelet.images import build as image_build

if TYPE_CHECKING:
    from asynckubelet.docker import DockerClient

CHUNK_BYTES = 256 * 1024
"""How much of an archive is read, and sent, at a time."""
HEAD_BYTES = 512
"""An archive's first block: a tar header, or a compressor's magic number."""
MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")
"""gzip, bzip2, xz and zstd, which the engine decompresses itself."""


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


@command()
def load(
    archive: ImageArchiveArg,
    *,
    docker_host: DockerHostOpt = None,
    log: LogOptions,
) -> None:
    """Load your own images from a `docker save` archive into the engine the node uses,
    as `docker load` does: `images load FILE.tar`, or `docker save IMAGE | asynckubelet
    images load -` (an engine on another machine: --docker-host)."""
    from asynckubelet import errors
    from asynckubelet.docker import DockerClient

    name = "stdin" if archive == "-" else archive
    with _opened(archive) as stream:
        head = _head(stream)
        if not head:
            raise fail(f'"{escape(name)}" is empty: no image archive to load')
        if not _is_archive(head):
            raise fail(
                f'"{escape(name)}" is not an image archive (a `docker save` tar, or one '
                "compressed with gzip, bzip2, xz or zstd)"
            )

        async def go() -> list[str]:
            async with DockerClient(url=docker_host) as docker:
                try:
                    return await docker.load_images(_chunks(head, stream))
                except errors.ImageError as e:
                    raise fail(f'the engine refused "{escape(name)}": {escape(str(e))}') from e

        loaded = run_async(go)
    for line in loaded:
        out.print(escape(line), highlight=False)


@contextlib.contextmanager
def _opened(archive: str) -> Iterator[IO[bytes]]:
    """The archive's stream: the file, opened and closed, or stdin (left open)."""
    if archive == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise fail(
                "requested load from stdin, but stdin is a terminal: "
                "`docker save IMAGE | asynckubelet images load -`"
            )
        yield sys.stdin.buffer
        return
    try:
        file = open(archive, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise fail(f'cannot read "{escape(archive)}": no such file') from None
    except IsADirectoryError:
        raise fail(f'cannot read "{escape(archive)}": it is a directory') from None
    except OSError as e:
        raise fail(f'cannot read "{escape(archive)}": {escape(e.strerror or str(e))}') from e
    with file:
        yield file


def _head(stream: IO[bytes]) -> bytes:
    """The archive's first block (less only when the archive is shorter)."""
    head = b""
    while len(head) < HEAD_BYTES:
        piece = stream.read(HEAD_BYTES - len(head))
        if not piece:
            break
        head += piece
    return head


def _is_archive(head: bytes) -> bool:
    """A tar (POSIX ``ustar`` or GNU magic, as ``docker save`` writes) or a compressed
    stream the engine decompresses."""
    return head[257:262] == b"ustar" or head.startswith(MAGIC)


async def _chunks(head: bytes, stream: IO[bytes]) -> AsyncIterator[bytes]:
    """``head``, then the rest of ``stream`` read in a worker thread, a chunk at a time."""
    import anyio.to_thread

    yield head
    while chunk := await anyio.to_thread.run_sync(stream.read, CHUNK_BYTES):
        yield chunk
