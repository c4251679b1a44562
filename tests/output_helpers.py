"""A child interpreter that prints through ``run``'s renderer, for tests of what a pipe or a
terminal receives byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RENDERER = (
    "from lightkube.models.core_v1 import Pod\n"
    "from lightkube.models.meta_v1 import ObjectMeta\n"
    "from asynckubelet.cli import output\n"
    "from asynckubelet.cli import renderer as renderer_mod\n"
    "from asynckubelet.docker import LogLine\n"
    "renderer = renderer_mod.PodRenderer(color=output.is_terminal(output.out))\n"
    "pod = Pod(metadata=ObjectMeta(name='web', namespace='default'))\n"
)
"""A child's start: ``run``'s renderer as the command makes it, and a pod ``web``."""


def child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter, its stdout and stderr pipes."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), **env},
        check=True,
    )
