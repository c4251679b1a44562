"""The kubelet's atomic writer (``pkg/volume/util/atomic_writer.go``) for configMap, secret,
downward API and projected volumes.

A payload is written into a new timestamped directory (``..2026_01_31_12_00_00.<hex>``),
then the ``..data`` symlink is swapped to it with one ``rename`` and each user-visible
name is a symlink through ``..data``: readers see the old files or the new ones, never a
mix. Everything is reached through directory file descriptors without following links,
since a container may have planted any of them; the writer only ever removes its own
timestamped directories.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from pathlib import Path

from asynckubelet import errors, hostfs

DATA_DIR = "..data"

Payload = dict[str, tuple[bytes, int]]
"""Relative file path -> (content, mode) of an atomic-writer volume."""


_TS_NAME = re.compile(r"^\.\.\d{4}(_\d{2}){5}\.[0-9a-f]{10}$")
"""The writer's own timestamped directories, ``..2026_01_31_12_00_00.<10 hex>``."""
_DATA_TMP = "..data_tmp"
MAX_PATH = 4096
MAX_NAME = 255


def validate_payload_path(path: str) -> None:
    """The kubelet atomic writer's ``validatePath``: a payload path is relative, has no
    ``..`` element, does not start with ``..`` (those names are the writer's) and fits."""
    if not path:
        raise errors.VolumeError(f"invalid path: must not be empty: {path!r}", volume="")
    if os.path.isabs(path):
        raise errors.VolumeError(f"invalid path: must be relative path: {path}", volume="")
    if len(path) > MAX_PATH:
        raise errors.VolumeError(
            f"invalid path: must be less than or equal to {MAX_PATH} characters", volume=""
        )
    items = path.split("/")
    for item in items:
        if item == "..":
            raise errors.VolumeError(f"invalid path: must not contain '..': {path}", volume="")
        if len(item.encode()) > MAX_NAME:
            raise errors.VolumeError(
                f"invalid path: filenames must be less than or equal to {MAX_NAME} characters",
                volume="",
            )
        if "\0" in item:
            raise errors.VolumeError(f"invalid path: must not contain NUL: {path!r}", volume="")
    if items[0].startswith("..") and len(items[0]) > 2:
        raise errors.VolumeError(f"invalid path: must not start with '..': {path}", volume="")


def _clean_payload(payload: Payload) -> Payload:
    """Paths checked and normalised; modes cut to the permission bits (as the kubelet's
    ``os.FileMode`` conversion does: no setuid, setgid or sticky bit reaches a file)."""
    clean: Payload = {}
    for path, (content, mode) in payload.items():
        validate_payload_path(path)
        name = "/".join(p for p in path.split("/") if p not in ("", "."))
        if not name:
            raise errors.VolumeError(f"invalid path: must not be empty: {path!r}", volume="")
        clean[name] = (content, mode & 0o777)
    return clean


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _current_dir(target_fd: int) -> str | None:
    """The timestamped directory ``..data`` names, when it is one of the writer's own: a
    link to a plain directory of the writer's name pattern in the volume directory. Any
    other ``..data`` is not followed."""
    st = _lstat_at(target_fd, DATA_DIR)
    if st is None or not stat.S_ISLNK(st.st_mode):
        return None
    name = os.readlink(DATA_DIR, dir_fd=target_fd)
    if not _TS_NAME.match(name):
        return None
    found = _lstat_at(target_fd, name)
    return name if found is not None and stat.S_ISDIR(found.st_mode) else None


def _read_tree(dir_fd: int, prefix: str, found: Payload) -> bool:
    """Files below ``dir_fd`` into ``found``; False on anything but directories and regular
    files (the tree is then not the writer's as written, and is replaced)."""
    with os.scandir(dir_fd) as entries:
        names = [
            (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
            for e in entries
        ]
    for name, is_dir, is_file in names:
        rel = f"{prefix}{name}"
        if is_dir:
            child = hostfs.open_child_dir(dir_fd, name)
            try:
                if not _read_tree(child, f"{rel}/", found):
                    return False
            finally:
                os.close(child)
        elif is_file:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
            )
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return False
                found[rel] = (f.read(), stat.S_IMODE(st.st_mode))
        else:
            return False
    return True


def _current_payload(target_fd: int, ts_name: str) -> Payload | None:
    try:
        ts_fd = hostfs.open_child_dir(target_fd, ts_name)
    except OSError:
        return None
    found: Payload = {}
    try:
        return found if _read_tree(ts_fd, "", found) else None
    except OSError:
        return None
    finally:
        os.close(ts_fd)


def _write_payload(ts_fd: int, payload: Payload, gid: int | None) -> None:
    for rel, (content, mode) in payload.items():
        *dirs, name = rel.split("/")
        opened: list[int] = []
        try:
            parent = ts_fd
            for d in dirs:
                parent = hostfs.open_child_dir(parent, d, create=True, mode=0o755)
                opened.append(parent)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, mode, dir_fd=parent)
            try:
                os.fchmod(fd, mode)
                if gid is not None:
                    os.fchown(fd, -1, gid)
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        finally:
            for fd in opened:
                os.close(fd)


def write_atomic_at(target_fd: int, payload: Payload, *, gid: int | None = None) -> bool:
    """The kubelet's ``AtomicWriter.Write`` into the open volume directory ``target_fd``;
    returns False when nothing changed.

    Every step acts through ``target_fd``: names are looked up with ``lstat``, links are
    read and replaced but never followed, and only the writer's own timestamped
    directories (matched by name and checked to be directories, not links) are removed. A
    ``..data`` that is not a link to one of them, as a container that could write here might
    leave, is not read and is replaced by the new one.
    """
    clean = _clean_payload(payload)
    visible = {rel.split("/", 1)[0] for rel in clean}
    old = _current_dir(target_fd)
    if (
        old is not None
        and _current_payload(target_fd, old) == clean
        and all(_lstat_at(target_fd, name) is not None for name in visible)
        and not _stale_links(target_fd, visible)
    ):
        return False
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
    ts_name = f"..{stamp}.{secrets.token_hex(5)}"
    os.mkdir(ts_name, 0o755, dir_fd=target_fd)
    try:
        ts_fd = hostfs.open_child_dir(target_fd, ts_name)
        try:
            os.fchmod(ts_fd, 0o755)
            _write_payload(ts_fd, clean, gid)
        finally:
            os.close(ts_fd)
        for name in visible:
            link = f"{DATA_DIR}/{name}"
            found = _lstat_at(target_fd, name)
            if found is None:
                os.symlink(link, name, dir_fd=target_fd)
            elif stat.S_ISLNK(found.st_mode) and os.readlink(name, dir_fd=target_fd) != link:
                os.unlink(name, dir_fd=target_fd)
                os.symlink(link, name, dir_fd=target_fd)
        tmp = _lstat_at(target_fd, _DATA_TMP)
        if tmp is not None:
            os.unlink(_DATA_TMP, dir_fd=target_fd)
        os.symlink(ts_name, _DATA_TMP, dir_fd=target_fd)
        data = _lstat_at(target_fd, DATA_DIR)
        if data is not None and stat.S_ISDIR(data.st_mode):
            raise errors.VolumeError(
                f"{DATA_DIR} is a directory the writer did not make; it is left alone",
                volume="",
            )
        os.replace(_DATA_TMP, DATA_DIR, src_dir_fd=target_fd, dst_dir_fd=target_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            if _lstat_at(target_fd, _DATA_TMP) is not None:
                os.unlink(_DATA_TMP, dir_fd=target_fd)
        with contextlib.suppress(OSError):
            hostfs.remove_tree_at(target_fd, ts_name)
        raise
    for name in _stale_links(target_fd, visible):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=target_fd)
    with os.scandir(target_fd) as entries:
        own = [e.name for e in entries if _TS_NAME.match(e.name) and e.name != ts_name]
    for name in own:
        found = _lstat_at(target_fd, name)
        if found is not None and stat.S_ISDIR(found.st_mode):
            hostfs.remove_tree_at(target_fd, name)
    return True


def _stale_links(target_fd: int, visible: set[str]) -> list[str]:
    """Visible links of the writer (``name -> ..data/name``) for names no longer written."""
    stale = []
    with os.scandir(target_fd) as entries:
        for entry in entries:
            if entry.name.startswith("..") or entry.name in visible:
                continue
            if entry.is_symlink():
                target = os.readlink(entry.name, dir_fd=target_fd)
                if target == f"{DATA_DIR}/{entry.name}":
                    stale.append(entry.name)
    return stale


def write_atomic(
    target: Path, payload: Payload, *, gid: int | None = None, root: Path | None = None
) -> bool:
    """:func:`write_atomic_at` into the directory ``target``, reached from ``root`` (default:
    its parent) without following links and made (0755) when absent."""
    base = root if root is not None else target.parent
    with hostfs.open_dir(base, target, create=True, mode=0o755) as fd:
        return write_atomic_at(fd, payload, gid=gid)


__all__ = [
    "DATA_DIR",
    "MAX_NAME",
    "MAX_PATH",
    "Payload",
    "validate_payload_path",
    "write_atomic",
    "write_atomic_at",
]
