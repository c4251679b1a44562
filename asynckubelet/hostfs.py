"""File operations on the host, confined to a root the agent owns.

The agent runs as root and keeps files in a few trees of its own: the state dir (status
files, events, the manifest directory, the signing key), the pod volume root, the pod log
directory. Names inside those trees come from manifests (a pod's UID, namespace, volume and
container names, ``items[].path``), and parts of the volume tree are visible, and writable,
from inside containers: a container can plant a symbolic link in an ``emptyDir`` pointing at
``/etc``, and a later operation that follows it writes or deletes on the host. So every
place that creates, writes, chmods or removes something in those trees goes through this
module, which

- refuses a path that is absolute outside the root, holds ``..``, or is empty;
- walks from the root one component at a time with ``openat(O_NOFOLLOW)``, so no symbolic
  link on the way is followed, whoever planted it and whenever;
- acts on the last component through the directory descriptor it reached (``mkdirat``,
  ``unlinkat``, ``renameat``, ``fchmod`` of a descriptor opened without following links),
  and removes trees with ``shutil.rmtree(dir_fd=...)``, which never follows links either.

The root itself is the administrator's choice and may be reached through links. Nothing
here knows about pods; callers name the root and the path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from asynckubelet.errors import UnsafePath

DIR_MODE = 0o750
"""Directories of the agent's trees: no access for other local users."""
FILE_MODE = 0o600

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def parts_under(root: Path | str, path: Path | str) -> tuple[str, ...]:
    """The components of ``path`` below ``root``, checked without touching the disk.

    ``path`` is relative to ``root``, or absolute and lexically beneath it. Raises
    :class:`UnsafePath` for ``..`` anywhere, an absolute path elsewhere, or a NUL byte.
    """
    text = os.fspath(path)
    if "\0" in text:
        raise UnsafePath(f"{text!r}: a path may not contain a NUL byte")
    if os.path.isabs(text):
        base = os.path.normpath(os.path.abspath(root))
        if text != base and not text.startswith(base.rstrip("/") + "/"):
            raise UnsafePath(f"{text} is outside {base}")
        text = text[len(base) :]
    names = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in names:
        raise UnsafePath(f"{os.fspath(path)}: '..' may not be used under {os.fspath(root)}")
    return tuple(names)


def ensure_under(root: Path | str, path: Path | str) -> Path:
    """``path`` (relative to ``root`` or absolute) with every symbolic link resolved, when
    that is ``root`` or beneath it; else :class:`UnsafePath`."""
    base = os.path.realpath(root)
    names = parts_under(root, path)
    real = os.path.realpath(os.path.join(base, *names))
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        raise UnsafePath(f"{os.fspath(path)} leads outside {base}")
    return Path(real)


def single_name(name: str, *, what: str = "name") -> str:
    """``name`` when it is usable as one path component (no ``/``, not ``.`` or ``..``)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(f"{what} {name!r} cannot be used as a file name")
    return name


def _open_root(root: Path | str, *, create: bool, mode: int) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise
    os.makedirs(root, mode=mode, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    os.fchmod(fd, mode)
    return fd


def _refusal(dir_fd: int, name: str, shown: str, e: OSError) -> OSError:
    """The error for a component that could not be opened as a directory: a link or a
    non-directory is refused in words, anything else is passed on."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return e
    if stat.S_ISLNK(st.st_mode):
        return UnsafePath(f"{shown} is a symbolic link; it is not followed")
    if not stat.S_ISDIR(st.st_mode):
        return UnsafePath(f"{shown} is not a directory")
    return e


def open_child_dir(
    dir_fd: int,
    name: str,
    *,
    create: bool = False,
    mode: int = DIR_MODE,
    shown: str | None = None,
) -> int:
    """A descriptor of directory ``name`` in ``dir_fd``, never through a symbolic link;
    made (with exactly ``mode``) when absent and ``create``. ``shown`` names it in errors."""
    single_name(name)
    shown = shown or name
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as e:
        raise _refusal(dir_fd, name, shown, e) from e
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=dir_fd)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise _refusal(dir_fd, name, shown, e) from e
    os.fchmod(fd, mode)
    return fd


@contextlib.contextmanager
def open_dir(
    root: Path | str,
    path: Path | str = ".",
    *,
    create: bool = False,
    mode: int = DIR_MODE,
) -> Iterator[int]:
    """A descriptor of the directory ``path`` under ``root``, reached without following
    any symbolic link below the root; missing directories are made with ``mode`` when
    ``create`` (the root too)."""
    names = parts_under(root, path)
    fd = _open_root(root, create=create, mode=mode)
    try:
        for i, name in enumerate(names):
            shown = os.path.join(os.fspath(root), *names[: i + 1])
            child = open_child_dir(fd, name, create=create, mode=mode, shown=shown)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_parent(
    root: Path | str, path: Path | str, *, create: bool = False, mode: int = DIR_MODE
) -> Iterator[tuple[int, str]]:
    """The descriptor of ``path``'s directory (as :func:`open_dir`) and its last name."""
    names = parts_under(root, path)
    if not names:
        raise UnsafePath(f"{os.fspath(path)} names the root {os.fspath(root)} itself")
    with open_dir(root, "/".join(names[:-1]), create=create, mode=mode) as fd:
        yield fd, names[-1]


def make_dirs(root: Path | str, path: Path | str, *, mode: int = DIR_MODE) -> None:
    """``mkdir -p`` under ``root`` without following links; made directories get ``mode``."""
    with open_dir(root, path, create=True, mode=mode):
        pass


def write_at(dir_fd: int, name: str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Replace file ``name`` in ``dir_fd`` with ``data`` at once (a new file, then a rename
    over the old name: a link there is replaced, never followed)."""
    single_name(name)
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        mode,
        dir_fd=dir_fd,
    )
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_file(
    root: Path | str,
    path: Path | str,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    dir_mode: int = DIR_MODE,
) -> None:
    """Replace the file at ``path`` under ``root`` with ``data`` atomically, with exactly
    ``mode``; missing directories are made with ``dir_mode``."""
    with open_parent(root, path, create=True, mode=dir_mode) as (fd, name):
        write_at(fd, name, data, mode=mode)


def append_file(
    root: Path | str,
    path: Path | str,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    dir_mode: int = DIR_MODE,
) -> None:
    """Append ``data`` to the file at ``path`` (made with ``mode``), never through a link."""
    with open_parent(root, path, create=True, mode=dir_mode) as (dir_fd, name):
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def read_file(root: Path | str, path: Path | str, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``), never through a link."""
    with open_parent(root, path) as (dir_fd, name):
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UnsafePath(f"{os.fspath(path)} is not a regular file")
            return f.read() if limit is None else f.read(limit)


def chmod_at(dir_fd: int, name: str, mode: int) -> None:
    """Set the mode of ``name`` in ``dir_fd``; a symbolic link is refused, not followed.

    The file is reached through an ``O_PATH`` descriptor, so a device or FIFO planted
    there is never opened."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            raise UnsafePath(f"{name} is a symbolic link; it is not followed")
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def chmod(root: Path | str, path: Path | str, mode: int) -> None:
    """``chmod`` of the file or directory at ``path``, never through a link."""
    with open_parent(root, path) as (fd, name):
        try:
            chmod_at(fd, name, mode)
        except UnsafePath:
            raise UnsafePath(f"{os.fspath(path)} is a symbolic link; it is not followed") from None


def symlink(root: Path | str, path: Path | str, target: str, *, dir_mode: int = DIR_MODE) -> None:
    """Make ``path`` a symbolic link to ``target`` (replacing what is there, at once)."""
    with open_parent(root, path, create=True, mode=dir_mode) as (fd, name):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        os.symlink(target, tmp, dir_fd=fd)
        try:
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise


def rename(root: Path | str, path: Path | str, new_name: str) -> bool:
    """Rename the file at ``path`` to ``new_name`` in the same directory, replacing what
    is there (a link is renamed itself, never followed); False when there was nothing."""
    single_name(new_name)
    try:
        with open_parent(root, path) as (fd, name):
            os.replace(name, new_name, src_dir_fd=fd, dst_dir_fd=fd)
    except FileNotFoundError:
        return False
    return True


def remove_file(root: Path | str, path: Path | str) -> bool:
    """Remove the file or link at ``path`` (a link itself, never its target); False when
    there was nothing, or when a directory on the way is missing."""
    try:
        with open_parent(root, path) as (fd, name):
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return False
    return True


def remove_tree_at(dir_fd: int, name: str) -> bool:
    """Remove ``name`` in ``dir_fd`` and, when it is a directory, all below it; links are
    removed, never followed. False when there was nothing."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def remove_tree(root: Path | str, path: Path | str) -> bool:
    """``rm -rf`` of ``path`` under ``root``, never following a link, on the way or below.
    False when there was nothing (or a directory on the way is missing)."""
    try:
        with open_parent(root, path) as (fd, name):
            return remove_tree_at(fd, name)
    except FileNotFoundError:
        return False


def remove_dir(root: Path | str, path: Path | str) -> bool:
    """``rmdir`` of an empty directory at ``path``; False when absent or not empty."""
    try:
        with open_parent(root, path) as (fd, name):
            os.rmdir(name, dir_fd=fd)
    except UnsafePath:
        raise
    except OSError:
        return False
    return True


if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - every Linux has it
    raise ImportError("this platform's shutil.rmtree follows symbolic links")


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "UnsafePath",
    "append_file",
    "chmod",
    "chmod_at",
    "ensure_under",
    "make_dirs",
    "open_child_dir",
    "open_dir",
    "open_parent",
    "parts_under",
    "read_file",
    "remove_dir",
    "remove_file",
    "remove_tree",
    "remove_tree_at",
    "rename",
    "single_name",
    "symlink",
    "write_at",
    "write_file",
]
