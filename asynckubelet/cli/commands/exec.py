"""``asynckubelet exec``: a command in a pod's container, with its exit code.

Without ``-i``/``-t`` the command's output is collected and written out; with them the
terminal is attached: input, output, raw mode and the window size, as ``kubectl exec``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
from typing import TYPE_CHECKING

import anyio
import typer

from asynckubelet.cli import output
from asynckubelet.cli.client import node_api, pod_name, pod_ref
from asynckubelet.cli.options import (
    CommandArg,
    ContainerOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodRefArg,
    StdinOpt,
    TtyOpt,
)

if TYPE_CHECKING:
    from asynckubelet.api.execclient import StreamSession
    from asynckubelet.api.protocol import ExecTarget
    from asynckubelet.docker import DockerAPI
    from asynckubelet.docker.execs import ExecSession

    Session = ExecSession | StreamSession
    """A running command: on the engine, or behind the pod's ``exec`` subresource."""


@output.command(not_found_as="BadRequest")
def exec_(
    name: PodRefArg,
    command: CommandArg,
    *,
    container: ContainerOpt = None,
    stdin: StdinOpt = False,
    tty: TtyOpt = False,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Run a command in a pod's container; exits with the command's exit code."""
    ref = pod_ref(name, attach=True)
    terminal = _terminal(stdin=stdin, tty=tty)
    with node_api(node) as api:
        request = _Request(
            name=pod_name(ref, namespace=namespace, api=api),
            command=command,
            container=container,
            namespace=namespace,
            stdin=stdin,
            tty=terminal,
        )
        target = api.exec_target(request.namespace, request.name, request.container)
    raise typer.Exit(output.run_async(_exec, request, target))


NO_TTY = "Unable to use a TTY - input is not a terminal or the right kind of file"


def _terminal(*, stdin: bool, tty: bool) -> bool:
    """Whether the command gets a terminal, as ``kubectl exec`` decides: only with ``-i``
    too, and only when the input is a terminal (else it says so and goes on without)."""
    if not (tty and stdin):
        return False
    if not sys.stdin.isatty():
        print(NO_TTY, file=sys.stderr)
        return False
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Request:
    name: str
    command: list[str]
    container: str | None
    namespace: str
    stdin: bool
    tty: bool


async def _exec(request: _Request, target: ExecTarget) -> int:
    from asynckubelet import errors
    from asynckubelet.api.inprocess import node_runtime

    if target.socket is not None:
        return await _through_api(request, target.socket, container=target.container)

    async with node_runtime(node_name=target.node_name, docker_host=target.docker_host) as rm:
        cid = target.container_id
        info = await rm.docker.inspect_container(cid)
        if not (info.get("State") or {}).get("Running"):
            raise errors.PodError("cannot exec into a container that is not running")
        if request.stdin or request.tty:
            return await _interactive(rm.docker, cid, request)
        result = await rm.docker.exec_run(cid, request.command)
        sys.stdout.buffer.write(result.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(result.stderr)
        sys.stderr.flush()
        return result.exit_code


async def _through_api(request: _Request, socket: str, *, container: str) -> int:
    """The command through the pod's ``exec`` subresource on the daemon's socket."""
    from asynckubelet.api.execclient import exec_stream

    async with exec_stream(
        socket,
        request.namespace,
        request.name,
        container=container,
        command=request.command,
        stdin=request.stdin,
        tty=request.tty,
    ) as session:
        if request.stdin or request.tty:
            return await attached(session, stdin=request.stdin, tty=request.tty)
        await _pump_out(session)
        return await session.exit_code()


async def _interactive(docker: DockerAPI, container_id: str, request: _Request) -> int:
    """Attach the terminal to the command on the engine."""
    from asynckubelet.docker.execs import exec_session

    async with exec_session(
        docker, container_id, request.command, stdin=request.stdin, tty=request.tty
    ) as session:
        return await attached(session, stdin=request.stdin, tty=request.tty)


async def attached(session: Session, *, stdin: bool, tty: bool) -> int:
    """Attach the terminal to the command (or the attached process): input, output,
    window size, raw mode; its exit code."""
    import termios
    import tty as tty_mod

    raw = tty and sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if raw else None
    if tty:
        await _resize(session)
    if raw:
        tty_mod.setraw(sys.stdin.fileno(), termios.TCSANOW)
    try:
        async with anyio.create_task_group() as tg:
            if stdin:
                tg.start_soon(_pump_in, session)
            if tty:
                tg.start_soon(_follow_window_size, session)
            tg.start_soon(_until_exited, session, tg.cancel_scope)
            await _pump_out(session)
            tg.cancel_scope.cancel()
    finally:
        if saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
    return await session.exit_code()


async def _resize(session: Session) -> None:
    rows, columns = terminal_size()
    await session.resize(rows=rows, columns=columns)


def terminal_size() -> tuple[int, int]:
    """``(rows, columns)`` of the terminal the command is attached to, as kubectl reads it:
    the terminal's own size (stdout's, else stdin's). ``COLUMNS`` and ``LINES`` count only
    without one: they say how wide to print here (a tool that starts this command may set
    them), not how large the remote command's terminal is."""
    for stream in (sys.stdout, sys.stdin):
        try:
            size = os.get_terminal_size(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
        if size.lines > 0 and size.columns > 0:
            return size.lines, size.columns
    fallback = shutil.get_terminal_size()
    return fallback.lines, fallback.columns


async def _follow_window_size(session: Session) -> None:
    import signal

    with anyio.open_signal_receiver(signal.SIGWINCH) as signals:
        async for _ in signals:
            await _resize(session)


async def _pump_in(session: Session) -> None:
    fd = sys.stdin.fileno()
    # A regular file cannot be polled; it is read at once, never blocking. Some devices
    # (``/dev/null``) cannot be polled either: the event loop refuses them, and they are
    # read in a worker thread.
    regular = stat.S_ISREG(os.fstat(fd).st_mode)
    pollable = not regular
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except PermissionError:
                pollable = False
        if regular or pollable:
            data = os.read(fd, 65536)
        else:
            data = await anyio.to_thread.run_sync(os.read, fd, 65536, abandon_on_cancel=True)
        if not data:
            session.close_input()
            return
        await session.write(data)


async def _pump_out(session: Session) -> None:
    while (chunk := await session.read()) is not None:
        target = sys.stderr.buffer if chunk[0] == 2 else sys.stdout.buffer
        target.write(chunk[1])
        target.flush()


async def _until_exited(session: Session, scope: anyio.CancelScope) -> None:
    # Docker may keep an attached stream open after the command ended.
    while await session.running():  # noqa: ASYNC110
        await anyio.sleep(0.2)
    await anyio.sleep(0.2)
    scope.cancel()
