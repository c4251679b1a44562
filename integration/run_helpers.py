"""Helpers of the tests of ``asynckubelet run`` through its command line: the command for a
node of the test's own, its environment, a run to its end, a manifest written from a
template, and the containers Docker holds for the node."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio

from asynckubelet.docker import ContainerSummary, DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

REPO = Path(__file__).resolve().parent.parent


def run_command(*args: str, node: str) -> list[str]:
    """``asynckubelet run ARGS`` for the node ``node``, with the tests' sandbox image."""
    return [
        sys.executable,
        "-m",
        "asynckubelet",
        "run",
        *args,
        "--node-name",
        node,
        "--pause-image",
        PAUSE_IMAGE,
        "--no-color",
    ]


def run_env() -> dict[str, str]:
    """This environment, with this checkout's package first on the path."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def run_pod(
    manifest: Path, *extra: str, node: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``run`` of ``manifest`` (and ``extra`` arguments) to its end, output captured."""
    return subprocess.run(
        run_command(str(manifest), *extra, node=node),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=run_env(),
    )


def write_manifest(tmp_path: Path, text: str, name: str = "pod.yaml") -> Path:
    """``text`` dedented, with ``BUSYBOX`` standing for the tests' busybox image."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).replace("BUSYBOX", BUSYBOX_IMAGE))
    return path


def node_containers(engine: Engine, node: str) -> list[ContainerSummary]:
    """Every container of ``node`` that the engine holds, running or not."""

    async def go() -> list[ContainerSummary]:
        async with DockerClient(url=engine.url) as client:
            return await client.list_containers(labels={naming.LABEL_NODE: node})

    return anyio.run(go)


def in_terminal(args: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run ``args`` with stdin, stdout and stderr on a pseudo-terminal; (exit code, output)."""
    import fcntl
    import pty
    import struct
    import termios

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        args,
        env={**env, "TERM": "xterm-256color", "COLUMNS": "160"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([controller], [], [], 0.2)
            if readable:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                output += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(controller)
    return code, output.decode(errors="replace")
