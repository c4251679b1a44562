"""Watch rules: what a changed source file does, as compose's ``develop.watch``.

A container's rules are the annotation ``watch.asynckubelet.dev/<container>`` on its pod
(or a workload's pod template), a YAML list read as compose reads ``develop.watch``::

    - action: sync            # copy the file into the running containers, no restart
      path: www               # relative to the image's build context
      target: /www            # absolute, in the container
      ignore: ["*.swp"]       # patterns relative to path
    - action: sync+restart    # copy, then restart the containers
      path: conf
      target: /etc/app
    - action: rebuild         # build the image again and roll the pods onto it
      path: Dockerfile

The first rule whose ``path`` holds a changed file (and does not ignore it) decides what
it does; a file no rule holds does nothing. An image whose containers have no rules is
rebuilt on any change of its context.

The annotation is hostile: a ``path`` must stay inside the build context (no ``..``, no
symbolic link leading out), a ``target`` must be an absolute, normalized path; the files
a sync sends are read without following links and bounded in number and size.
"""

from __future__ import annotations

import fnmatch
import io
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from asynckubelet.errors import ImageBuildError

__all__ = [
    "ACTIONS",
    "ANNOTATION_PREFIX",
    "MAX_RULES",
    "MAX_SYNC_BYTES",
    "MAX_SYNC_FILES",
    "WatchRule",
    "match",
    "parse_rules",
    "sync_tar",
]

ANNOTATION_PREFIX = "watch.asynckubelet.dev/"
"""Followed by a container's name: the watch rules of that container's image."""
ACTIONS = ("sync", "sync+restart", "rebuild")
MAX_RULES = 64
"""The most rules one annotation may hold."""
MAX_ANNOTATION_CHARS = 64 * 1024
MAX_TARGET_CHARS = 4096
MAX_IGNORES = 256
MAX_SYNC_FILES = 10_000
"""The most files one sync sends."""
MAX_SYNC_BYTES = 256 * 1024 * 1024
"""The most file bytes one sync sends."""
_KEYS = {"action", "path", "target", "ignore"}


@dataclass(frozen=True)
class WatchRule:
    """One rule of a container: ``path`` resolved inside ``context``, ``target`` normalized."""

    container: str
    image: str
    context: Path
    action: str
    path: Path
    target: str
    ignore: tuple[str, ...] = ()
    name: str = ""
    """How errors name the rule: ``annotation watch.asynckubelet.dev/web rule 1``."""


def _target(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ImageBuildError(f"{where}: target must be an absolute path in the container")
    if len(value) > MAX_TARGET_CHARS or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ImageBuildError(f"{where}: target {value[:80]!r} is not a usable path")
    if not value.startswith("/"):
        raise ImageBuildError(f"{where}: target {value!r} must be an absolute path")
    if ".." in PurePosixPath(value).parts:
        raise ImageBuildError(f"{where}: target {value!r} must not hold '..'")
    return posixpath.normpath(value).replace("//", "/")


def _path(value: Any, context: Path, *, where: str) -> Path:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ImageBuildError(f"{where}: path must be a path relative to the build context")
    if os.path.isabs(value):
        raise ImageBuildError(f"{where}: path {value!r} must be relative to the build context")
    if ".." in Path(value).parts:
        raise ImageBuildError(f"{where}: path {value!r} must not hold '..'")
    root = context.resolve()
    resolved = (root / value).resolve()
    if resolved != root and root not in resolved.parents:
        raise ImageBuildError(
            f"{where}: path {value!r} leads outside the build context {str(root)!r}"
        )
    return resolved


def _ignores(value: Any, *, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_IGNORES:
        raise ImageBuildError(f"{where}: ignore must be a list of at most {MAX_IGNORES} patterns")
    patterns = []
    for item in value:
        if not isinstance(item, str) or not item.strip("/") or "\x00" in item:
            raise ImageBuildError(f"{where}: ignore pattern {item!r} is not a pattern")
        patterns.append(item.strip("/"))
    return tuple(patterns)


def parse_rules(
    value: str, *, container: str, image: str, context: Path, field_name: str
) -> list[WatchRule]:
    """The rules an annotation's value holds; ``context`` is the image's build context."""
    if len(value) > MAX_ANNOTATION_CHARS:
        raise ImageBuildError(f"{field_name}: longer than {MAX_ANNOTATION_CHARS} characters")
    try:
        items = yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise ImageBuildError(f"{field_name}: not a YAML list of rules: {e}") from None
    if not isinstance(items, list) or not items:
        raise ImageBuildError(f"{field_name}: must be a YAML list of rules (action, path, ...)")
    if len(items) > MAX_RULES:
        raise ImageBuildError(f"{field_name}: more than {MAX_RULES} rules")
    rules = []
    for number, item in enumerate(items, 1):
        where = f"{field_name} rule {number}"
        if not isinstance(item, dict):
            raise ImageBuildError(f"{where}: must be a mapping (action, path, target, ignore)")
        unknown = sorted(str(k) for k in item if k not in _KEYS)
        if unknown:
            raise ImageBuildError(
                f"{where}: unknown key {unknown[0]!r} (action, path, target, ignore)"
            )
        action = item.get("action")
        if action not in ACTIONS:
            raise ImageBuildError(f"{where}: action {action!r} is not one of {', '.join(ACTIONS)}")
        path = _path(item.get("path"), context, where=where)
        target = ""
        if action == "rebuild":
            if item.get("target") is not None:
                raise ImageBuildError(f"{where}: a rebuild rule takes no target")
        else:
            target = _target(item.get("target"), where=where)
        ignore = _ignores(item.get("ignore"), where=where)
        rules.append(
            WatchRule(container, image, context.resolve(), action, path, target, ignore, where)
        )
    return rules


def _ignored(relative: str, patterns: Iterable[str]) -> bool:
    """Whether ``relative`` (or a directory it is in) matches one of the patterns."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(fnmatch.fnmatchcase(p, pattern) for pattern in patterns for p in prefixes)


def match(file: Path, rules: Sequence[WatchRule]) -> tuple[WatchRule, str] | None:
    """The first rule that holds ``file`` (an absolute path) and where in the container it
    goes (empty for a rebuild); None when no rule holds it or its rule ignores it."""
    for rule in rules:
        if file != rule.path and rule.path not in file.parents:
            continue
        relative = file.relative_to(rule.path).as_posix() if file != rule.path else ""
        if relative and _ignored(relative, rule.ignore):
            return None
        if rule.action == "rebuild":
            return rule, ""
        return rule, posixpath.join(rule.target, relative) if relative else rule.target
    return None


def sync_tar(
    files: Sequence[tuple[Path, str]],
    *,
    context: Path,
    max_files: int = MAX_SYNC_FILES,
    max_bytes: int = MAX_SYNC_BYTES,
) -> bytes:
    """A tar to extract at ``/`` in a container: each ``(file, target)`` a regular file at
    ``target``, owned by root, with the file's mode. A file is read without following a
    link and must resolve inside ``context``; a link, a directory or a missing file is an
    :class:`~asynckubelet.errors.ImageBuildError` naming it."""
    if len(files) > max_files:
        raise ImageBuildError(f"a sync of more than {max_files} files")
    root = context.resolve()
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for file, target in files:
            if root not in file.resolve().parents:
                raise ImageBuildError(f"{str(file)!r} is outside the build context {str(root)!r}")
            try:
                fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError as e:
                raise ImageBuildError(f"{str(file)!r} cannot be read: {e.strerror}") from None
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise ImageBuildError(f"{str(file)!r} is not a regular file")
                total += info.st_size
                if total > max_bytes:
                    raise ImageBuildError(f"a sync of more than {max_bytes} bytes")
                if not target.strip("/"):
                    raise ImageBuildError(f"{str(file)!r}: a file cannot be synced to '/'")
                entry = tarfile.TarInfo(target.lstrip("/"))
                entry.size = info.st_size
                entry.mode = stat.S_IMODE(info.st_mode)
                entry.mtime = int(info.st_mtime)
                tar.addfile(entry, handle)
    return buffer.getvalue()
