"""``apply --watch``: the manifests and the build contexts followed, each change applied.

Files are polled by their modification time and size (no watcher library: a poll of a
few hundred files costs well under a millisecond), every ``INTERVAL`` seconds; a change
is applied once the files stay still for ``DEBOUNCE`` seconds, with one status line
naming the file that changed. An error (a broken manifest, a failing build step) is shown
and the watch goes on; Ctrl-C ends it. With watch rules (:mod:`asynckubelet.cli.devsync`) a change
of a source file may be synced into the running containers instead of applied.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import typer

from asynckubelet.cli.output import err, escape

__all__ = ["DEBOUNCE", "INTERVAL", "MAX_WATCHED", "WATCHING", "changed", "snapshot", "watch"]

INTERVAL = 0.5
"""Seconds between two looks at the files."""
DEBOUNCE = 0.3
"""Seconds the files must stay unchanged before a change is applied."""
MAX_WATCHED = 50_000
"""The most files one look takes (the bound of a build context)."""

WATCHING = "watching for changes (Ctrl-C ends)"
"""The line after each apply: what follows is the next change's."""

Snapshot = dict[str, tuple[int, int]]


def snapshot(paths: Iterable[Path]) -> Snapshot:
    """``path -> (mtime_ns, size)`` of every file under ``paths`` (directories walked,
    symlinks not followed), at most ``MAX_WATCHED`` files."""
    found: Snapshot = {}
    for path in paths:
        walked: Iterable[Path]
        if path.is_dir() and not path.is_symlink():
            walked = (
                Path(root) / name
                for root, _, names in os.walk(path, followlinks=False)
                for name in names
            )
        else:
            walked = [path]
        for file in walked:
            if len(found) >= MAX_WATCHED:
                return found
            try:
                info = file.lstat()
            except OSError:
                continue
            found[str(file)] = (info.st_mtime_ns, info.st_size)
    return found


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The files added, removed or modified, sorted."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _applied(once: Callable[[], None]) -> None:
    """One apply; its error shown, not raised."""
    try:
        once()
    except typer.Exit:
        pass
    except typer.TyperException as e:
        err.print(f"[red]error: {escape(str(e))}[/red]")
    except Exception as e:
        from asynckubelet.errors import AsyncKubeletError

        if not isinstance(e, AsyncKubeletError):
            raise
        err.print(f"[red]error: {escape(str(e))}[/red]")


def watch(
    paths: Callable[[], list[Path]],
    once: Callable[[], None],
    *,
    interval: float = INTERVAL,
    debounce: float = DEBOUNCE,
    sync: Callable[[list[str]], bool] | None = None,
) -> None:
    """Apply ``once`` now and after each change of the files ``paths`` names (asked anew
    after each apply: an edited manifest may name other contexts). ``sync`` is offered
    each change first: True when it dealt with it (its own status line shown), False
    when the change is to be applied. Returns on Ctrl-C."""
    try:
        _applied(once)
        seen = snapshot(paths())
        err.print(WATCHING, highlight=False)
        while True:
            time.sleep(interval)
            now = snapshot(paths())
            if now == seen:
                continue
            while True:
                time.sleep(debounce)
                settled = snapshot(paths())
                if settled == now:
                    break
                now = settled
            files = changed(seen, now)
            if sync is not None and sync(files):
                seen = now
                continue
            first = os.path.relpath(files[0]) if files else "?"
            more = f" (and {len(files) - 1} more)" if len(files) > 1 else ""
            err.print(f"{escape(first)}{more} changed: applying", highlight=False)
            _applied(once)
            seen = snapshot(paths())
            err.print(WATCHING, highlight=False)
    except KeyboardInterrupt:
        return
