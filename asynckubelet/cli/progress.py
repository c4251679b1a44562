"""Progress on the command line: image pulls per layer, and what a wait still waits for.

On a terminal both are a live display redrawn in place (rich), so a pull of many layers
takes a few lines, not hundreds. Anywhere else (a pipe, a CI log, a file) they are plain
lines, at most one per change of a layer's state: byte counts move many times a second,
and a log should not carry each of them, nor carriage returns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.progress import Progress, TaskID

    from asynckubelet.docker import PullProgress


def escape(text: str) -> str:
    """``text`` with what rich would read as markup escaped (rich is imported when a
    display first prints: a daemon that logs its pulls instead never needs it)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


LineWriter = Callable[[str, str], None]
"""``(image or pod, text)``: where plain lines go."""


@dataclass(frozen=True)
class _Layer:
    image: str
    layer: str


def _new_progress(**options: Any) -> Progress:
    """A rich Progress of pulls: a row per image, and per layer its state, bar and bytes."""
    from rich.progress import BarColumn, DownloadColumn, Progress, Task, TextColumn
    from rich.text import Text

    class LayerBar(BarColumn):
        """The bar of a layer; the image's own row has none."""

        def render(self, task: Task) -> Text:  # type: ignore[override]
            if task.fields.get("image_row"):
                return Text("")
            return super().render(task)  # type: ignore[return-value]

    class LayerBytes(DownloadColumn):
        """Bytes done/total of a layer, once Docker has said the total."""

        def render(self, task: Task) -> Text:
            if task.fields.get("image_row") or task.total is None:
                return Text("")
            return super().render(task)

    return Progress(
        TextColumn("{task.description}"),
        TextColumn("{task.fields[status]}"),
        LayerBar(),
        LayerBytes(),
        **options,
    )


def _amount(progress: PullProgress) -> str:
    if progress.total is None:
        return ""
    return f" {progress.current or 0}/{progress.total} bytes"


class PullDisplay:
    """A :class:`~asynckubelet.runtime.images.PullListener` that shows pulls to a person.

    ``live`` (normally: the console is a terminal) redraws a per-layer display in place on
    ``console``; otherwise each change of a layer's state is one line given to ``write``
    (default: printed on ``console``).
    """

    def __init__(self, *, console: Console, live: bool, write: LineWriter | None = None) -> None:
        self.console = console
        self.live = live
        self.write = write or self._print
        self._states: dict[_Layer, str] = {}
        self._inflight: set[str] = set()
        self._progress: Progress | None = None
        self._tasks: dict[_Layer, TaskID] = {}

    def _print(self, image: str, text: str) -> None:
        self.console.print(f"{escape(image)}: {escape(text)}", highlight=False, soft_wrap=True)

    # -- PullListener ---------------------------------------------------------------------

    def pull_started(self, image: str) -> None:
        self._inflight.add(image)
        if self.live:
            progress = self._start()
            self._tasks[_Layer(image, "")] = progress.add_task(
                image, total=None, status="pulling", start=False, image_row=True
            )
        else:
            self.write(image, "pulling")

    def pull_progress(self, image: str, progress: PullProgress) -> None:
        key = _Layer(image, progress.layer)
        if self.live:
            self._update_live(key, progress)
            return
        if not progress.layer:
            self.write(image, progress.status)
            return
        if self._states.get(key) == progress.status:
            return
        self._states[key] = progress.status
        self.write(image, f"{progress.layer}: {progress.status}{_amount(progress)}")

    def pull_finished(self, image: str, error: str | None) -> None:
        self._inflight.discard(image)
        for key in [k for k in self._states if k.image == image]:
            del self._states[key]
        if self.live:
            header = self._tasks.get(_Layer(image, ""))
            if self._progress is not None and header is not None:
                self._progress.update(header, status=f"failed: {error}" if error else "pulled")
            if not self._inflight:
                self._stop()
        else:
            self.write(image, f"failed: {error}" if error else "pulled")

    # -- the live display ------------------------------------------------------------------

    def _start(self) -> Progress:
        if self._progress is None:
            self._progress = _new_progress(
                console=self.console,
                transient=False,
                refresh_per_second=8,
                # Output printed meanwhile goes above the display; stdout only when it
                # is the same terminal (a redirected stdout keeps the pods' output).
                redirect_stdout=sys.stdout.isatty(),
            )
            self._progress.start()
        return self._progress

    def _update_live(self, key: _Layer, progress: PullProgress) -> None:
        live = self._start()
        if not progress.layer:
            header = self._tasks.get(_Layer(key.image, ""))
            if header is not None:
                live.update(header, status=progress.status)
            return
        task = self._tasks.get(key)
        if task is None:
            task = live.add_task(
                f"  {progress.layer}", total=None, status=progress.status, image_row=False
            )
            self._tasks[key] = task
        done = progress.status in ("Pull complete", "Already exists", "Download complete")
        total: float | None = progress.total
        completed: float | None = progress.current
        if done and total is None:
            total = next(t.total for t in live.tasks if t.id == task)
            completed = total
        live.update(task, status=progress.status, total=total, completed=completed)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.refresh()
            self._progress.stop()
            self._progress = None
            self._tasks.clear()

    def close(self) -> None:
        """End the live display (pulls cut short leave it otherwise)."""
        self._stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class WaitDisplay:
    """What a wait still waits for: each pod not ready yet, and why.

    ``live``: a table redrawn in place, gone when the wait ends; otherwise one line per
    change of a pod's reason, given to ``write`` (default: printed on ``console``).
    """

    def __init__(self, *, console: Console, live: bool, write: LineWriter | None = None) -> None:
        self.console = console
        self.live = live
        self.write = write or self._print
        self._last: dict[str, str] = {}
        self._live: Live | None = None

    def _print(self, pod: str, text: str) -> None:
        self.console.print(f"{escape(pod)}: {escape(text)}", highlight=False, soft_wrap=True)

    def update(self, pending: Mapping[str, str]) -> None:
        """``pending``: pod (as ``pod/NAME``) -> why it is not ready yet."""
        if self.live:
            from rich.table import Table

            table = Table(box=None, show_header=True, header_style="bold")
            table.add_column("WAITING FOR")
            table.add_column("WHY")
            for pod, why in pending.items():
                table.add_row(escape(pod), escape(why))
            if self._live is None:
                from rich.live import Live

                self._live = Live(
                    table,
                    console=self.console,
                    transient=True,
                    refresh_per_second=8,
                    redirect_stdout=sys.stdout.isatty(),
                )
                self._live.start(refresh=True)
            else:
                self._live.update(table, refresh=True)
            return
        for pod, why in pending.items():
            if self._last.get(pod) != why:
                self._last[pod] = why
                self.write(pod, f"not ready: {why}")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
