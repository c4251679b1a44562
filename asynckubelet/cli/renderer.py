"""How ``run`` shows its pods: each container's output after a ``pod/container | `` prefix
(coloured on a terminal), and each pod's status changes and waiting reasons on stderr.
``run`` of pods and ``run`` of workloads print through the same renderer.

Each waiting reason is shown once, where it says most: ``pod/web/app: ErrImagePull:
MESSAGE`` stands for the pod's own ``pod/web: ErrImagePull``; and a run that ends on a
final failure (:attr:`PodRenderer.final_at_end`) prints that failure as its last line,
so the renderer leaves it out."""

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

    def __init__(self, *, color: bool, final_at_end: bool = False) -> None:
        self.color = color
        self.final_at_end = final_at_end
        """The run prints a final failure as its last line: not shown here too."""
        self.closed = False
        """Stdout is closed: nobody reads the pods' output any more."""
        self.colors: dict[str, str] = {}
        self.last: dict[str, str] = {}
        self.last_lines: dict[tuple[str, str], str] = {}
        """``(pod, container)`` -> the container's last line of output."""

    def last_line(self, pod: str, container: str) -> str | None:
        """The last line ``container`` of ``pod`` wrote, if any came through here."""
        return self.last_lines.get((pod, container))

    def log(self, pod: Pod, container: str, output: LogLine) -> None:
        """One line of a container's output after its ``pod/container | `` prefix; a
        piece of a longer line (``newline=False``) leaves the printed line open, and the
        next piece of the same container's stream goes on with it, as ``kubectl logs
        --prefix`` and ``docker compose`` print a long line once with one prefix. A line
        printed by anyone else in between ends it first: the rest then starts a line of
        its own, with the prefix."""
        if output.text.strip():
            owner = pod.metadata.name if pod.metadata else ""
            self.last_lines[(owner or "", container)] = output.text
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
        from asynckubelet.node.failures import holdups
        from asynckubelet.node.printpod import kubectl_status

        assert pod.metadata is not None  # noqa: S101  (type narrowing: a running pod has metadata)
        name = pod.metadata.name or ""
        key = f"{pod.metadata.namespace}/{name}"
        shown = kubectl_status(pod, status)
        final = {
            f.container: f.reason
            for f in holdups(status, max_restarts=None)
            if f.final and f.container and self.final_at_end
        }
        lines: list[tuple[str, str, str]] = []
        for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
            waiting = c.state.waiting if c.state is not None else None
            if waiting is None or not waiting.reason or not waiting.message:
                continue
            text = f"pod/{name}/{c.name}: {waiting.reason}: {waiting.message}"
            if c.name not in final:
                lines.append((f"{key}/{c.name}", waiting.reason, text))
        if self.last.get(key) != shown:
            self.last[key] = shown
            said = {reason for _, reason, _ in lines} | set(final.values())
            if shown.removeprefix("Init:") not in said:
                line(err, f"pod/{name}: {shown}", style="dim")
        for where, _, text in lines:
            if self.last.get(where) != text:
                self.last[where] = text
                line(err, text, style="dim")


__all__ = ["COLORS", "PodRenderer"]
