"""The command line's standard output, a rich console (imported where it is first used:
see :data:`asynckubelet.cli.output.out`)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console


class Stdout(Console):
    """Standard output. When its reader goes away (``| head``) rich's way applies (quiet,
    exit 1), unless the command set ``on_closed``: then later writes go to /dev/null and
    the command is told, to end in its own way."""

    on_closed: Callable[[], None] | None = None

    def on_broken_pipe(self) -> None:
        if self.on_closed is None:
            super().on_broken_pipe()
            return
        import os

        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        self.on_closed()
