"""Images made on this machine, for machines that cannot pull.

Every pod needs a sandbox image, and tests need a shell image, yet the machines this
project runs on may reach no registry at all. So these images are made here from local
material: the pause image from the project's own ``pause.c`` compiled statically, the
busybox image from the host's static busybox, and the probe helper (``probe.c``, HTTP and
TCP probes from inside a pod's network namespace for nodes that cannot reach pod IPs).
Each is packed in memory as a ``docker load`` archive (``manifest.json``, the image
config, one layer tar) and handed to the Docker adapter, so no Dockerfile, build context
or builder daemon is involved.

Archives are deterministic: every timestamp and owner is fixed and the JSON is canonical,
so the same input always yields the same image id and loading it again changes nothing.

Compiling and packing block, so the async entry points run them in a worker thread.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import struct
import subprocess
import tarfile
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import anyio.to_thread

from asynckubelet._logging import logger
from asynckubelet.errors import ImageBuildError

__all__ = [
    "DEFAULT_BUSYBOX_TAG",
    "DEFAULT_PAUSE_TAG",
    "LOCAL_REGISTRY",
    "PAUSE_VERSION",
    "PROBE_REPOSITORY",
    "Directory",
    "Entry",
    "File",
    "ImageConfig",
    "ImageLoader",
    "LocalImage",
    "Symlink",
    "build_busybox_image",
    "build_pause_image",
    "build_probe_image",
    "busybox_entries",
    "compile_pause",
    "default_probe_tag",
    "image_archive",
    "is_static_elf",
    "local_image",
]

LOCAL_REGISTRY = "asynckubelet.local"
"""The registry name of the images made here: no registry serves it, so they are never pulled."""
PAUSE_VERSION = "3.10"
DEFAULT_PAUSE_TAG = f"{LOCAL_REGISTRY}/pause:{PAUSE_VERSION}"
DEFAULT_BUSYBOX_TAG = f"{LOCAL_REGISTRY}/busybox:1.35"
PROBE_REPOSITORY = f"{LOCAL_REGISTRY}/probe"

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_EPOCH = "1970-01-01T00:00:00Z"
_COMPILERS = ("musl-gcc", "gcc")
_COMPILER_PACKAGES = "install Debian's musl-tools (preferred), or gcc and libc6-dev"
_BUSYBOX_PACKAGE = "install Debian's busybox-static"
_COMPILE_TIMEOUT = 120.0
_PT_INTERP = 3

_ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "i686": "386",
    "i386": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


class ImageLoader(Protocol):
    """What the builders need from the Docker adapter: load a ``docker save`` archive."""

    async def load_image(self, data: bytes) -> None: ...


@dataclass(frozen=True)
class File:
    """A regular file in the image, at an absolute ``path``."""

    path: str
    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Symlink:
    """A symbolic link at ``path`` pointing to ``target`` (kept verbatim)."""

    path: str
    target: str


@dataclass(frozen=True)
class Directory:
    """A directory; parents of other entries are created 0755 without one."""

    path: str
    mode: int = 0o755


Entry = File | Symlink | Directory


def _host_architecture() -> str:
    machine = platform.machine().lower()
    return _ARCHITECTURES.get(machine, machine)


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's run configuration the builders set."""

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ()
    working_dir: str = ""
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    architecture: str = field(default_factory=_host_architecture)


def is_static_elf(data: bytes) -> bool:
    """True when ``data`` is an ELF executable that asks for no program interpreter.

    A binary without ``PT_INTERP`` needs no ``ld.so`` and no shared libc, so it runs in
    an image that holds nothing else.
    """
    if len(data) < 52 or data[:4] != b"\x7fELF":
        return False
    elf_class, byte_order = data[4], data[5]
    if elf_class not in (1, 2) or byte_order not in (1, 2):
        return False
    endian = "<" if byte_order == 1 else ">"
    if elf_class == 2:
        if len(data) < 64:
            return False
        (e_type,) = struct.unpack_from(endian + "H", data, 0x10)
        (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    else:
        (e_type,) = struct.unpack_from(endian + "H", data, 0x10)
        (phoff,) = struct.unpack_from(endian + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x2A)
    if e_type not in (2, 3) or phnum == 0 or phentsize < 4:
        return False
    if phoff + phnum * phentsize > len(data):
        return False
    for index in range(phnum):
        (p_type,) = struct.unpack_from(endian + "I", data, phoff + index * phentsize)
        if p_type == _PT_INTERP:
            return False
    return True


def _check_tag(repo_tag: str) -> None:
    name, _, tag = repo_tag.rpartition(":")
    if not name or not tag or "/" in tag or "@" in repo_tag:
        raise ImageBuildError(
            f"image reference {repo_tag!r} must be repository:tag (no digest)", image=repo_tag
        )


def _member_name(path: str, *, image: str) -> str:
    pure = PurePosixPath(path)
    if not pure.is_absolute() or ".." in pure.parts or pure == PurePosixPath("/"):
        raise ImageBuildError(
            f"image path {path!r} must be absolute, below / and free of '..'", image=image
        )
    return pure.relative_to("/").as_posix()


def _tar_info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _layer(entries: Iterable[Entry], *, image: str) -> bytes:
    by_name: dict[str, Entry] = {}
    for entry in entries:
        name = _member_name(entry.path, image=image)
        if name in by_name:
            raise ImageBuildError(f"image path {entry.path!r} given twice", image=image)
        by_name[name] = entry
    for name in list(by_name):
        for parent in PurePosixPath(name).parents:
            key = parent.as_posix()
            if key != "." and key not in by_name:
                by_name[key] = Directory(path=f"/{key}")
            elif key in by_name and not isinstance(by_name[key], Directory):
                raise ImageBuildError(
                    f"image path /{key} is a parent of /{name} but not a directory", image=image
                )

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(by_name, key=lambda n: PurePosixPath(n).parts):
            entry = by_name[name]
            if isinstance(entry, File):
                info = _tar_info(name, tarfile.REGTYPE, entry.mode)
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            elif isinstance(entry, Symlink):
                info = _tar_info(name, tarfile.SYMTYPE, 0o777)
                info.linkname = entry.target
                tar.addfile(info)
            else:
                tar.addfile(_tar_info(name, tarfile.DIRTYPE, entry.mode))
    return buffer.getvalue()


def _canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _image_config(config: ImageConfig, *, diff_id: str) -> dict[str, Any]:
    run: dict[str, Any] = {}
    if config.entrypoint:
        run["Entrypoint"] = list(config.entrypoint)
    if config.cmd:
        run["Cmd"] = list(config.cmd)
    if config.env:
        run["Env"] = list(config.env)
    if config.working_dir:
        run["WorkingDir"] = config.working_dir
    if config.user:
        run["User"] = config.user
    if config.labels:
        run["Labels"] = dict(config.labels)
    return {
        "architecture": config.architecture,
        "os": "linux",
        "created": _EPOCH,
        "config": run,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": _EPOCH, "created_by": "asynckubelet.images.build"}],
    }


def _archive(*, repo_tag: str, files: Iterable[Entry], config: ImageConfig) -> tuple[bytes, str]:
    _check_tag(repo_tag)
    layer = _layer(files, image=repo_tag)
    layer_hex = hashlib.sha256(layer).hexdigest()
    config_json = _canonical_json(_image_config(config, diff_id=f"sha256:{layer_hex}"))
    config_hex = hashlib.sha256(config_json).hexdigest()
    manifest = _canonical_json(
        [
            {
                "Config": f"{config_hex}.json",
                "RepoTags": [repo_tag],
                "Layers": [f"{layer_hex}/layer.tar"],
            }
        ]
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tar_info(layer_hex, tarfile.DIRTYPE, 0o755))
        for name, data in (
            (f"{layer_hex}/layer.tar", layer),
            (f"{config_hex}.json", config_json),
            ("manifest.json", manifest),
        ):
            info = _tar_info(name, tarfile.REGTYPE, 0o644)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue(), f"sha256:{config_hex}"


def image_archive(*, repo_tag: str, files: Iterable[Entry], config: ImageConfig) -> bytes:
    """A ``docker load`` archive of a one-layer image holding ``files``, tagged ``repo_tag``.

    The image id the engine will report is ``sha256:`` + the digest of the config member.
    Raises :class:`ImageBuildError` for a tag without ``:tag``, a relative or duplicated
    path, or a path whose parent is not a directory.
    """
    return _archive(repo_tag=repo_tag, files=files, config=config)[0]


def _compiler_candidates(cc: str | None) -> list[str]:
    if cc is not None:
        found = shutil.which(cc)
        if found is None:
            raise ImageBuildError(f"C compiler {cc!r} not found: {_COMPILER_PACKAGES}")
        return [found]
    found_all = [path for name in _COMPILERS if (path := shutil.which(name)) is not None]
    if not found_all:
        raise ImageBuildError(
            f"no C compiler found (looked for {', '.join(_COMPILERS)}): {_COMPILER_PACKAGES}"
        )
    return found_all


def _compile_static(program: str, *, workdir: Path, cc: str | None) -> Path:
    candidates = _compiler_candidates(cc)
    output = workdir / program
    env = {**os.environ, "LC_ALL": "C"}
    failures: list[str] = []
    source_ref = resources.files("asynckubelet.images") / program / f"{program}.c"
    with resources.as_file(source_ref) as source:
        for compiler in candidates:
            command = [compiler, "-static", "-Os", "-s", "-o", str(output), str(source)]
            try:
                result = subprocess.run(  # noqa: S603  (argv list, no shell: a compiler found by shutil.which)
                    command,
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=_COMPILE_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                failures.append(f"{compiler}: {e}")
                continue
            if result.returncode != 0:
                detail = result.stderr.strip().splitlines()[-3:]
                failures.append(f"{compiler}: exit {result.returncode}: {' | '.join(detail)}")
                continue
            if not is_static_elf(output.read_bytes()):
                failures.append(f"{compiler}: output is not a static executable")
                continue
            logger.debug("compiled {} with {} ({} bytes)", program, compiler, output.stat().st_size)
            return output
    raise ImageBuildError(
        f"cannot compile {program}.c statically (" + "; ".join(failures) + f"): "
        f"{_COMPILER_PACKAGES}"
    )


def compile_pause(*, workdir: Path, cc: str | None = None) -> Path:
    """Compile the pause program statically and stripped into ``workdir``; return its path.

    Tries ``musl-gcc`` and then ``gcc`` unless ``cc`` names the compiler. Blocks while the
    compiler runs; async callers go through :func:`build_pause_image`. Raises
    :class:`ImageBuildError`, naming the Debian packages to install, when no compiler or
    no static libc is present.
    """
    return _compile_static("pause", workdir=workdir, cc=cc)


def _pause_archive(*, tag: str, cc: str | None) -> tuple[bytes, str]:
    with tempfile.TemporaryDirectory(prefix="asynckubelet-pause-") as workdir:
        binary = compile_pause(workdir=Path(workdir), cc=cc).read_bytes()
    return _archive(
        repo_tag=tag,
        files=[File(path="/pause", data=binary, mode=0o755)],
        config=ImageConfig(entrypoint=["/pause"], user="65535:65535"),
    )


async def build_pause_image(
    docker: ImageLoader, *, tag: str = DEFAULT_PAUSE_TAG, cc: str | None = None
) -> str:
    """Compile the pause program, load it as image ``tag`` and return the image id.

    The image holds only ``/pause``, runs it as 65535:65535 like Kubernetes' own pause
    image, and stops at once on ``docker stop``.
    """
    archive, image_id = await anyio.to_thread.run_sync(partial(_pause_archive, tag=tag, cc=cc))
    await docker.load_image(archive)
    logger.info("loaded {} as {} ({} bytes)", tag, image_id, len(archive))
    return image_id


def probe_source_digest() -> str:
    """The first 12 hex digits of the probe helper's source digest: its image tag."""
    source = resources.files("asynckubelet.images") / "probe" / "probe.c"
    return hashlib.sha256(source.read_bytes()).hexdigest()[:12]


def default_probe_tag() -> str:
    """``asynckubelet.local/probe:<source digest>``: a changed program is a new image."""
    return f"{PROBE_REPOSITORY}:{probe_source_digest()}"


def _probe_archive(*, tag: str, cc: str | None) -> tuple[bytes, str]:
    with tempfile.TemporaryDirectory(prefix="asynckubelet-probe-") as workdir:
        binary = _compile_static("probe", workdir=Path(workdir), cc=cc).read_bytes()
    return _archive(
        repo_tag=tag,
        files=[File(path="/probe", data=binary, mode=0o755)],
        config=ImageConfig(entrypoint=["/probe"], cmd=["wait"], user="65534:65534"),
    )


async def build_probe_image(
    docker: ImageLoader, *, tag: str | None = None, cc: str | None = None
) -> str:
    """Compile the probe helper, load it as image ``tag`` and return the image id.

    The image holds only ``/probe`` (``probe.c``: HTTP GET and TCP connect with a timeout,
    or ``wait``), run as 65534:65534. The default tag carries the source's digest.
    """
    tag = tag or default_probe_tag()
    archive, image_id = await anyio.to_thread.run_sync(partial(_probe_archive, tag=tag, cc=cc))
    await docker.load_image(archive)
    logger.info("loaded {} as {} ({} bytes)", tag, image_id, len(archive))
    return image_id


def _busybox_applets(busybox: Path, *, image: str) -> list[str]:
    try:
        result = subprocess.run(  # noqa: S603  (argv list, no shell: the host's static busybox)
            [str(busybox), "--list"],
            capture_output=True,
            text=True,
            timeout=_COMPILE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ImageBuildError(
            f"cannot run {busybox} --list: {e}: {_BUSYBOX_PACKAGE}", image=image
        ) from e
    applets = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or not applets:
        raise ImageBuildError(
            f"{busybox} --list listed no applets (exit {result.returncode}): {_BUSYBOX_PACKAGE}",
            image=image,
        )
    if any("/" in applet for applet in applets):
        raise ImageBuildError(f"{busybox} --list printed a path, not an applet name", image=image)
    return applets


def busybox_entries(*, busybox: Path, image: str) -> list[Entry]:
    """The files of the busybox image: the host's static ``busybox`` at ``/bin/busybox``
    with a symlink per applet, ``/tmp``, ``/root``, ``/etc/passwd`` and ``/etc/group``;
    other images built on it add their own files beside these."""
    try:
        binary = busybox.read_bytes()
    except OSError as e:
        raise ImageBuildError(
            f"cannot read busybox at {busybox}: {e.strerror}: {_BUSYBOX_PACKAGE}", image=image
        ) from e
    if not is_static_elf(binary):
        raise ImageBuildError(
            f"{busybox} is not a statically linked executable, and the image has no libc "
            f"for it: {_BUSYBOX_PACKAGE}",
            image=image,
        )
    applets = set(_busybox_applets(busybox, image=image)) | {"sh"}
    applets.discard("busybox")
    files: list[Entry] = [
        File(path="/bin/busybox", data=binary, mode=0o755),
        *(Symlink(path=f"/bin/{applet}", target="busybox") for applet in sorted(applets)),
        Directory(path="/tmp", mode=0o1777),  # noqa: S108  (the image's own /tmp, not a host file)
        Directory(path="/root", mode=0o700),
        File(
            path="/etc/passwd",
            data=b"root:x:0:0:root:/root:/bin/sh\n"
            b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        ),
        File(path="/etc/group", data=b"root:x:0:\nnobody:x:65534:\n"),
    ]
    return files


def _busybox_archive(*, tag: str, busybox: Path) -> tuple[bytes, str]:
    files = busybox_entries(busybox=busybox, image=tag)
    return _archive(
        repo_tag=tag,
        files=files,
        config=ImageConfig(cmd=["sh"], env=[f"PATH={DEFAULT_PATH}"]),
    )


async def build_busybox_image(
    docker: ImageLoader, *, tag: str = DEFAULT_BUSYBOX_TAG, busybox: Path = Path("/bin/busybox")
) -> str:
    """Pack the host's static ``busybox`` as image ``tag``, load it and return the image id.

    The image has ``/bin/busybox`` with a symlink per applet it lists (``/bin/sh`` among
    them), ``/tmp`` (1777), ``/etc/passwd`` and ``/etc/group`` with root and nobody,
    ``PATH`` set and ``sh`` as its command.
    """
    archive, image_id = await anyio.to_thread.run_sync(
        partial(_busybox_archive, tag=tag, busybox=busybox)
    )
    await docker.load_image(archive)
    logger.info("loaded {} as {} ({} bytes)", tag, image_id, len(archive))
    return image_id


@dataclass(frozen=True)
class LocalImage:
    """An image the node makes itself when it is missing: how, and from what."""

    build: Callable[[ImageLoader], Awaitable[str]]
    """Makes and loads the image; returns its id (raises :class:`ImageBuildError`)."""
    source: str
    """What it is made from, for the one line announcing the build."""
    command: str
    """The command line that makes it, for an error when it cannot be made here."""


def local_image(tag: str) -> LocalImage | None:
    """How the node makes ``tag`` when it is one of the project's own images (the pause
    image, busybox, the probe helper at its current digest); None for any other image."""
    if tag == DEFAULT_PAUSE_TAG:
        return LocalImage(
            build=partial(build_pause_image, tag=tag),
            source="the project's pause.c, compiled statically",
            command="asynckubelet images build-pause",
        )
    if tag == DEFAULT_BUSYBOX_TAG:
        return LocalImage(
            build=partial(build_busybox_image, tag=tag),
            source="the host's static busybox (Debian's busybox-static)",
            command="asynckubelet images build-busybox",
        )
    if tag == default_probe_tag():
        return LocalImage(
            build=partial(build_probe_image, tag=tag),
            source="the project's probe.c, compiled statically",
            command="asynckubelet images build-probe",
        )
    return None
