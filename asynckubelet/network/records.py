"""The pod network's records on the node's disk, kept private to the node's user.

The bridge backend's address allocations and per-pod journal and the cni backend's cached
results name every pod's sandbox, namespace and address; another local user who could
read them would learn the node's pods, and one who could write them could take or free an
address. So they are files of mode 0600 in directories of mode 0700 under the network
state directory (``--network-state-dir``), whatever the umask.

The state directory itself is the administrator's choice, as a root of
:mod:`asynckubelet.hostfs` is: made 0700 when missing, left as it is when it exists (it
may be a directory others use too). Every directory below it that the network uses is
made 0700, and tightened to 0700 when it is found wider (records an older version left
readable), so nothing below the state directory is open whatever the files' own modes.

A record is written whole or not at all: a temporary file ``.<name>.tmp`` in the same
directory, flushed to disk, then renamed over the old one. A process killed half-way
leaves only that hidden file, which the sweeps recognise by its name (a half-written
record still tells them which sandbox it was for).

:class:`PodRecords` is the bridge backend's journal: ``pods/<sandbox id>.json`` is written
before anything of the pod is made and marked ready once everything is; teardown deletes
it last, so whatever a killed agent left behind is found from the sandbox id alone.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from asynckubelet import errors

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_OPEN_TO_OTHERS = 0o077


def private_dir(root: Path, path: Path) -> None:
    """``path`` (``root`` or below it) as a directory of the network's records: ``root``
    made 0700 when missing (its missing parents as the umask makes them), each directory
    from ``root`` down to ``path`` made 0700 or, found with group or other bits, tightened
    to 0700. :class:`~asynckubelet.errors.NetworkError` when one cannot be made or is not
    a directory."""
    try:
        below = path.relative_to(root).parts
    except ValueError:
        raise errors.NetworkError(
            f"{path} is not under the network state directory {root}"
        ) from None
    current = root
    try:
        try:
            _make(root)
        except FileNotFoundError:
            root.parent.mkdir(parents=True, exist_ok=True)
            _make(root)
        for name in below:
            current = current / name
            if not _make(current):
                _tighten(current)
    except OSError as e:
        raise errors.NetworkError(f"network state directory {current}: {e}") from e


def _make(path: Path) -> bool:
    """Whether ``path`` was made now, 0700; False when it was there."""
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        return False
    os.chmod(path, PRIVATE_DIR_MODE)
    return True


def _tighten(path: Path) -> None:
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise errors.NetworkError(
            f"network state directory {path}: not a directory (a link or a file is in its place)"
        )
    if mode & _OPEN_TO_OTHERS:
        os.chmod(path, stat.S_IMODE(mode) & ~_OPEN_TO_OTHERS)


def temporary_name(path: Path) -> Path:
    """Where :func:`write_private` writes ``path`` before renaming it into place."""
    return path.with_name(f".{path.name}.tmp")


def write_private(path: Path, text: str) -> None:
    """Replace the file ``path`` with ``text`` at once, mode 0600, flushed to disk first.
    Its directory must exist (:func:`private_dir`)."""
    tmp = temporary_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    with open(fd, "w") as f:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        f.write(text)
        f.flush()
        os.fsync(fd)
    os.replace(tmp, path)


class PodRecords:
    """The bridge backend's journal of pods: one JSON record per sandbox in ``directory``
    (below the network state directory ``root``)."""

    def __init__(self, *, root: Path, directory: Path) -> None:
        self.root = root
        self.directory = directory

    def path(self, sandbox_id: str) -> Path:
        return self.directory / f"{sandbox_id}.json"

    def sandboxes(self) -> list[str]:
        """Sandboxes with a record, or with a half-written one a killed process left."""
        if not self.directory.is_dir():
            return []
        found = [p.stem for p in self.directory.glob("*.json")]
        found += [p.name[1:].removesuffix(".json.tmp") for p in self.directory.glob(".*.json.tmp")]
        return found

    def engines(self) -> dict[str, str]:
        """sandbox id -> engine of every record (empty engine: half-written or older)."""
        found = {}
        for sid in self.sandboxes():
            record = self.read(sid) or {}
            found[sid] = str(record.get("engine") or "")
        return found

    def write(self, sandbox_id: str, record: dict[str, Any]) -> None:
        private_dir(self.root, self.directory)
        write_private(self.path(sandbox_id), json.dumps(record))

    def read(self, sandbox_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(sandbox_id).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def drop(self, sandbox_id: str) -> None:
        path = self.path(sandbox_id)
        temporary_name(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)


__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "PodRecords",
    "private_dir",
    "temporary_name",
    "write_private",
]
