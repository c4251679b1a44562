"""``run --watch``: the run's pods kept in the foreground while the files are followed.

As ``apply --watch`` (:mod:`asynckubelet.cli.devwatch`), on the run's own node: a changed
manifest is loaded (and built) again and its pods handed to the node, which restarts only
the containers whose spec changed; a change a watch rule syncs is copied into the running
containers (:mod:`asynckubelet.cli.devsync`). Errors are shown and the watch goes on; the
run's signal handling ends it, its pods stopped and removed as a run's are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer

from asynckubelet.cli.devsync import WatchState, show
from asynckubelet.cli.devwatch import DEBOUNCE, INTERVAL, WATCHING, changed, snapshot
from asynckubelet.cli.output import err, escape

if TYPE_CHECKING:
    from asynckubelet.manifests import Manifests

__all__ = ["follow"]


async def follow(
    *,
    files: Sequence[str],
    state: WatchState,
    reload: Callable[[], Manifests],
    admit: Callable[[Manifests], Awaitable[list[Any]]],
    interval: float = INTERVAL,
    debounce: float = DEBOUNCE,
) -> None:
    """Follow ``files`` and the build contexts of ``state`` until cancelled: each change
    synced, or ``reload``-ed (in a thread: it may build) and handed to ``admit``."""
    from asynckubelet import errors

    def look() -> dict[str, tuple[int, int]]:
        return snapshot([*map(Path, files), *state.contexts])

    seen = await anyio.to_thread.run_sync(look)
    err.print(WATCHING, highlight=False)
    while True:
        await anyio.sleep(interval)
        now = await anyio.to_thread.run_sync(look)
        if now == seen:
            continue
        while True:
            await anyio.sleep(debounce)
            settled = await anyio.to_thread.run_sync(look)
            if settled == now:
                break
            now = settled
        names = changed(seen, now)
        result = state.plan(names)
        if result is not None:
            await state.carry_out(names, result)
        else:
            show(names, "applying")
            try:
                manifests = await anyio.to_thread.run_sync(reload)
                refused = await admit(manifests)
            except typer.Exit:
                refused = []
            except (typer.TyperException, errors.AsyncKubeletError) as e:
                err.print(f"[red]error: {escape(str(e))}[/red]")
                refused = []
            for pod, rejection in refused:
                name = pod.metadata.name if pod.metadata else ""
                err.print(f"[red]pod/{escape(name)}: {escape(rejection.reason)}[/red]")
        seen = await anyio.to_thread.run_sync(look)
        err.print(WATCHING, highlight=False)
