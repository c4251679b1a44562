"""How ``run`` shows its pods: each container's output after a ``pod/container | `` prefix
(coloured on a terminal), and each pod's status changes and waiting reasons on stderr.
``run`` of pods and ``run`` of workloads print through the same renderer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from asynckubelet.cli.output import end_open_line, err, hold_open, line, open_line, out

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod, PodStatus

    from asynckubelet.docker import LogLine

COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan")


class PodRenderer:
    """Prefixes pod output and reports status changes, waiting reasons with their messages
    among them. Once :attr:`closed`, pod output is dropped unformatted."""

    def __init__(self, *, color: bool) -> None:
        self.color = color
        self.closed = False
        """Stdout is closed: nobody reads the pods' output any more."""
        self.colors: dict[str, str] = {}
        self.last: dict[str, str] = {}

    def log(self, pod: Pod, container: str, output: LogLine) -> None:
        """One line of a container's output after its ``pod/container | `` prefix; a
        piece of a longer line (``newline=False``) leaves the printed line open, and the
        next piece of the same container's stream goes on with it, as ``kubectl logs
        --prefix`` and ``docker compose`` print a long line once with one prefix. A line
        printed by anyone else in between ends it first: the rest then starts a line of
        its own, with the prefix."""
        if self.closed:
            return
        console = out if output.stream == "stdout" else err
        name = f"{pod.metadata.name if pod.metadata else ''}/{container}"
        key = (name, output.stream)
        end = "\n" if output.newline else ""
        if open_line() == key:
            line(console, output.text, end=end, owner=key)
            return
        color = self.colors.setdefault(name, COLORS[len(self.colors) % len(COLORS)])
        if not self.color:
            line(console, f"{name} | {output.text}", end=end, owner=key)
            return
        from rich.text import Text

        end_open_line()
        # The pod's text as it is: never read as markup.
        console.print(Text.assemble((name, color), " | ", output.text), highlight=False, end=end)
        if not output.newline:
            hold_open(key, console)

    def status(self, pod: Pod, status: PodStatus) -> None:
        from asynckubelet.node.printpod import kubectl_status

        assert pod.metadata is not None  # noqa: S101  (type narrowing: a running pod has metadata)
        name = pod.metadata.name or ""
        key = f"{pod.metadata.namespace}/{name}"
        shown = kubectl_status(pod, status)
        if self.last.get(key) != shown:
            self.last[key] = shown
            line(err, f"pod/{name}: {shown}", style="dim")
        for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
            waiting = c.state.waiting if c.state is not None else None
            if waiting is None or not waiting.reason or not waiting.message:
                continue
            text = f"pod/{name}/{c.name}: {waiting.reason}: {waiting.message}"
            if self.last.get(f"{key}/{c.name}") != text:
                self.last[f"{key}/{c.name}"] = text
                line(err, text, style="dim")


__all__ = ["COLORS", "PodRenderer"]
