"""``subPath`` mounts that cannot be turned against the node (the class of CVE-2017-1002101).

A container can write into its volumes, so it can leave a symbolic link there, say
``emptyDir/link -> /``, and ask (in a later container of the pod, or when the pod is
synced again) for ``subPath: link/etc``. A node that resolves that path, or creates the
missing parts of it, on the host follows the link and writes outside the volume; one that
hands the path to Docker lets the engine follow it and bind the host's ``/etc`` into the
container. The kubelet's answer, carried over here:

- The path is resolved inside the volume only: links are followed while their target stays
  within the volume (a relative link, or an absolute one naming a place inside it), any
  other link is refused. Nothing is created before that check.
- Missing directories are then made one at a time with ``mkdirat`` from a descriptor of the
  existing part, reached with ``openat(O_NOFOLLOW)`` from the volume's own directory, with
  the mode of the volume directory (the kubelet's ``doSafeMakeDir``).
- The result is opened the same way (``doSafeOpen``: a link found now was planted after the
  check, and is refused), and the opened descriptor, not the path, is bind-mounted at
  ``<pod dir>/volume-subpaths/<volume>/<container>/<index>``; Docker binds that. A link
  swapped in after the open changes nothing: the descriptor already names the real
  directory. When the node may not mount (not root), the checked path itself goes to
  Docker, which leaves a window between the check and the engine's bind.

Errors carry the kubelet's words (``failed to prepare subPath for volumeMount "v" of
container "c"``) and no host path; the details go to the log.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from pathlib import Path

from asynckubelet import errors, hostfs
from asynckubelet._logging import logger

SUBPATHS_DIR = "volume-subpaths"
MAX_LINKS = 40
"""Symbolic links followed while resolving one path (Linux's own limit)."""

_MS_BIND = 4096
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def create_message(volume: str, container: str) -> str:
    return (
        f'failed to create subPath directory for volumeMount "{volume}" of container "{container}"'
    )


def prepare_message(volume: str, container: str) -> str:
    return f'failed to prepare subPath for volumeMount "{volume}" of container "{container}"'


def check_sub_path(sub: str) -> list[str]:
    """The kubelet's checks of the path itself (``makeMounts``), with its messages."""
    if os.path.isabs(sub):
        raise errors.ContainerConfigError(f"error SubPath `{sub}` must not be an absolute path")
    names = [p for p in sub.split("/") if p not in ("", ".")]
    if ".." in names:
        raise errors.ContainerConfigError(
            f"unable to provision SubPath `{sub}`: must not contain '..'"
        )
    return names


def resolve(base: str, names: list[str]) -> tuple[list[str], list[str]]:
    """``names`` under the directory ``base`` with links resolved inside it: the existing
    part (no link left in it) and the missing rest. Raises :class:`UnsafePath` for a link
    that leads out of ``base``, too many links, or a file on the way."""
    done: list[str] = []
    pending = list(names)
    links = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not done:
                raise hostfs.UnsafePath("a link leads out of the volume")
            done.pop()
            continue
        here = os.path.join(base, *done, name)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            rest = [n for n in [name, *pending] if n not in ("", ".")]
            if ".." in rest:
                raise hostfs.UnsafePath(f"{here} does not exist") from None
            return done, rest
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise hostfs.UnsafePath(f"too many levels of symbolic links at {here}")
            target = os.readlink(here)
            if os.path.isabs(target):
                if target != base and not target.startswith(base.rstrip("/") + "/"):
                    raise hostfs.UnsafePath(f"{here} is a link out of the volume")
                done, target = [], target[len(base) :]
            pending = target.split("/") + pending
            continue
        if pending and not stat.S_ISDIR(st.st_mode):
            raise hostfs.UnsafePath(f"{here} is not a directory")
        done.append(name)
    return done, []


def _make_missing(base: str, existing: list[str], missing: list[str], mode: int) -> None:
    """``doSafeMakeDir``: each missing directory made from a descriptor of its parent."""
    with hostfs.open_dir(base, "/".join(existing)) as fd:
        opened: list[int] = []
        try:
            for name in missing:
                opened.append(
                    hostfs.open_child_dir(
                        opened[-1] if opened else fd, name, create=True, mode=mode
                    )
                )
        finally:
            for child in opened:
                os.close(child)


def open_safely(base: str, names: list[str]) -> int:
    """``doSafeOpen``: an ``O_PATH`` descriptor of ``base/names``, every component opened
    with ``O_NOFOLLOW`` from the one before; a link on the way is refused."""
    fd = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in names:
            child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise hostfs.UnsafePath(f"unexpected symlink found at {name}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(source: str, sub: str, volume: str, container: str) -> tuple[int, str]:
    """The checked subPath of volume directory ``source``: an open descriptor and its path."""
    names = check_sub_path(sub)
    base = os.path.realpath(source)
    try:
        existing, missing = resolve(base, names)
    except OSError as e:
        logger.warning("subPath {!r} of volume {} refused: {}", sub, volume, e)
        raise errors.ContainerConfigError(prepare_message(volume, container)) from None
    if missing:
        try:
            mode = stat.S_IMODE(os.stat(base).st_mode)
            _make_missing(base, existing, missing, mode)
        except OSError as e:
            logger.warning("subPath {!r} of volume {} not created: {}", sub, volume, e)
            raise errors.ContainerConfigError(create_message(volume, container)) from None
    parts = [*existing, *missing]
    try:
        fd = open_safely(base, parts)
    except OSError as e:
        logger.warning("subPath {!r} of volume {} refused: {}", sub, volume, e)
        raise errors.ContainerConfigError(prepare_message(volume, container)) from None
    return fd, os.path.join(base, *parts)


def prepare_sub_path(source: str, sub: str, volume: str, container: str) -> str:
    """The checked host path of ``sub`` inside the volume directory ``source``, its missing
    directories made; for a node that cannot bind-mount."""
    fd, path = _open(source, sub, volume, container)
    os.close(fd)
    return path


def bind_sub_path(
    source: str,
    sub: str,
    *,
    pod_dir: Path,
    volume: str,
    container: str,
    index: int,
) -> str:
    """Bind the checked subPath at ``<pod_dir>/volume-subpaths/<volume>/<container>/<index>``
    (the kubelet's ``doBindSubPath``); returns that path, for Docker to bind."""
    fd, path = _open(source, sub, volume, container)
    try:
        rel = f"{SUBPATHS_DIR}/{volume}/{container}/{index}"
        target = os.path.join(os.path.realpath(pod_dir), rel)
        try:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
            if _bound_to(target, fd):
                return target
            if target in mount_points_under(target):
                unmount(target)
            with hostfs.open_parent(pod_dir, rel, create=True) as (parent, name):
                if is_dir:
                    os.close(hostfs.open_child_dir(parent, name, create=True))
                else:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                    os.close(os.open(name, flags, 0o640, dir_fd=parent))
            _mount(f"/proc/self/fd/{fd}", target)
        except OSError as e:
            logger.warning("subPath {!r} of volume {} not bound: {}", sub, volume, e)
            raise errors.ContainerConfigError(prepare_message(volume, container)) from None
        logger.debug("bound subPath {} at {}", path, target)
        return target
    finally:
        os.close(fd)


def _bound_to(target: str, fd: int) -> bool:
    """Whether ``target`` is already a mount of the file ``fd`` names."""
    try:
        here = os.stat(target, follow_symlinks=False)
    except OSError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino) and target in (
        mount_points_under(target)
    )


def _mount(source: str, target: str) -> None:
    if _libc.mount(source.encode(), target.encode(), None, _MS_BIND, None) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


def unmount(target: str) -> None:
    """Unmount ``target``; a busy mount is detached (it goes once unused)."""
    if _libc.umount2(target.encode(), 0) == 0:
        return
    code = ctypes.get_errno()
    if code == errno.EBUSY:
        if _libc.umount2(target.encode(), _MNT_DETACH) == 0:
            return
        code = ctypes.get_errno()
    raise OSError(code, os.strerror(code), target)


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are octal escapes."""
    out = bytearray()
    raw = field.encode()
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 4 <= len(raw) and raw[i + 1 : i + 4].isdigit():
            out.append(int(raw[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode(errors="surrogateescape")


def mount_points_under(path: str | Path, *, mountinfo: str | None = None) -> list[str]:
    """Mount points at or below ``path`` in this process's mount namespace, deepest first."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return []
    base = os.path.realpath(path)
    found = set()
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point == base or point.startswith(base.rstrip("/") + "/"):
            found.add(point)
    return sorted(found, key=lambda p: (-p.count("/"), p))


def unmount_all_under(path: str | Path) -> list[str]:
    """Unmount everything at or below ``path``; returns what is still mounted there."""
    for point in mount_points_under(path):
        with contextlib.suppress(OSError):
            unmount(point)
    return mount_points_under(path)


__all__ = [
    "bind_sub_path",
    "check_sub_path",
    "mount_points_under",
    "prepare_sub_path",
    "resolve",
    "unmount",
    "unmount_all_under",
]
